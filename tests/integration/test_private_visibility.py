"""Who may see what of a private channel, on every outbound path (one rule:
``hubbub.server.state.visibility``).

``#secret`` is invite-only: alice made it and invited bob; eve, the observer ``ops`` and the
admin ``boss`` are not invited. Its existence, name, members, text and streams reach only
alice and bob; an admin's dashboard shows that it exists, never its text (as for DMs).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from hubbub.server.config import Limits, ParticipantConfig, SpaceConfig, hash_token
from tests.conftest import RunningGateway, WsClient, start_gateway, stop_gateway
from tests.dashboard.conftest import open_events, person
from tests.mcp.conftest import SHORT, call, fails, http_session

SECRET = "#secret"
PEOPLE = {
    "alice": "participant",
    "bob": "participant",
    "eve": "participant",
    "ops": "observer",
    "boss": "admin",
}


def _space() -> SpaceConfig:
    people = {
        pid: ParticipantConfig(kind="human", role=role, token_hash=hash_token(f"{pid}-token"))  # type: ignore[arg-type]
        for pid, role in PEOPLE.items()
    }
    cfg = SpaceConfig(space="default", participants=people)
    cfg.validate()
    return cfg


@pytest.fixture
async def gw(tmp_path: Path) -> AsyncIterator[RunningGateway]:
    gw = await start_gateway(tmp_path, spaces=[_space()], limits=Limits(rate_per_s=0))
    yield gw
    await stop_gateway(gw)


@pytest.fixture(autouse=True)
def short_listen(monkeypatch: pytest.MonkeyPatch) -> None:
    """The gateway's /mcp listens with short settings (as tests/mcp does)."""
    for name, value in SHORT.items():
        monkeypatch.setenv(name, value)


async def _mew(gw: RunningGateway, pid: str, **extra: Any) -> WsClient:
    return await gw.mew(pid, token=f"{pid}-token", **extra)


async def _secret(gw: RunningGateway) -> WsClient:
    """alice, connected, has made ``#secret`` and invited bob."""
    alice = await _mew(gw, "alice")
    await alice.send({"kind": "channel/create", "payload": {"channel": SECRET, "private": True}})
    assert (await alice.expect("channel/joined"))["payload"]["channel"] == SECRET
    invite = {"channel": SECRET, "participant": "bob"}
    await alice.send({"kind": "channel/invite", "payload": invite})
    await alice.expect("channel/invited")
    return alice


def _chat(text: str, channel: str = "#general") -> dict[str, Any]:
    return {"kind": "chat", "channel": channel, "payload": {"text": text}}


def _presence_of(f: dict[str, Any], event: str, pid: str) -> bool:
    """Whether ``f`` is a space-wide presence ``event`` about ``pid``."""
    return bool(
        f.get("kind") == "system/presence"
        and f["payload"].get("event") == event
        and "channel" not in f["payload"]
        and f["payload"]["participant"]["id"] == pid
    )


async def _raw_until_fence(c: WsClient) -> list[str]:
    """Every frame (stream data frames too, unparsed) that reached ``c`` before the answer to
    a ``channel/list`` sent now, after the gateway settled."""
    assert c.door is not None
    await c.door.settle()
    await c.send({"kind": "channel/list", "id": "raw-fence"})
    seen: list[str] = []
    while True:
        raw = await c.ws.recv()
        if '"channel/list-response"' in raw and "raw-fence" in raw:
            return seen
        seen.append(raw)


# ---------------------------------------------------------------------- WebSocket, MEW dialect


async def test_mew_welcome_and_presence_name_no_private_channel(gw: RunningGateway) -> None:
    """A presence event carries a participant's channels: to each listener those it may
    see (a member of the private channel hears it named, an outsider does not); an
    outsider's welcome never lists a private channel, even one it asked for."""
    alice = await _secret(gw)
    eve = await _mew(gw, "eve")
    bob = await _mew(gw, "bob", channels=["#general", SECRET])
    for listener, channels in ((eve, ["#general"]), (alice, ["#general", SECRET])):
        joined = await listener.next_where(lambda f: _presence_of(f, "join", "bob"))
        assert joined["payload"]["participant"]["channels"] == channels
    await bob.close()
    for listener, channels in ((eve, ["#general"]), (alice, ["#general", SECRET])):
        left = await listener.next_where(lambda f: _presence_of(f, "leave", "bob"))
        assert left["payload"]["participant"]["channels"] == channels
    assert SECRET not in json.dumps(await eve.fence())

    c = await gw.connect()
    hello = {"type": "join", "participantId": "eve", "space": "default", "token": "eve-token"}
    await c.send(hello | {"channels": ["#general", SECRET]})
    welcome = await c.expect("system/welcome")
    assert [ch["name"] for ch in welcome["payload"]["channels"]] == ["#general"]
    assert welcome["payload"]["channels_total"] == 1
    refused = await c.expect("system/error")
    assert refused["payload"]["error"] == "not_invited"  # the name eve asked for, no more


async def test_mew_channel_create_of_a_look_alike_does_not_name_the_private_channel(
    gw: RunningGateway,
) -> None:
    """An outsider's ``channel/create #SECRET`` (or ``#secret``) is refused without the
    private channel's name; a member is told which channel it is."""
    await _secret(gw)
    eve = await _mew(gw, "eve")
    for name in ("#SECRET", "#Secret", SECRET):
        await eve.send({"kind": "channel/create", "payload": {"channel": name}})
        err = (await eve.expect("system/error"))["payload"]
        assert err["error"] == "channel_exists"
        assert "cannot see" in err["message"] and "pick another name" in err["message"]
        if name != SECRET:
            assert SECRET not in err["message"], err
        assert "join" not in err["message"]
    bob = await _mew(gw, "bob")
    await bob.send({"kind": "channel/create", "payload": {"channel": "#SECRET"}})
    err = (await bob.expect("system/error"))["payload"]
    assert f"looks like the existing channel {SECRET}" in err["message"]


# ---------------------------------------------------------------------- agentchat dialect


async def test_agentchat_create_and_list_keep_the_private_channel_hidden(
    gw: RunningGateway,
) -> None:
    await _secret(gw)
    await _mew(gw, "bob", channels=["#general", SECRET])
    eve = await gw.agentchat("eve", token="eve-token")
    await eve.send({"type": "CREATE_CHANNEL", "channel": "#Secret"})
    err = await eve.expect_type("ERROR")
    assert err["code"] == "CHANNEL_EXISTS" and SECRET not in err["message"], err
    await eve.send({"type": "LIST_CHANNELS"})
    listed = await eve.expect_type("CHANNELS")
    assert SECRET not in [c["name"] for c in listed["list"]]
    await eve.silent(lambda f: SECRET in json.dumps(f))


# ---------------------------------------------------------------------- HTTP


async def test_http_participants_lists_private_channels_to_members_only(
    gw: RunningGateway,
) -> None:
    await _secret(gw)
    await _mew(gw, "bob", channels=["#general", SECRET])
    await gw.settle()

    async def channels_seen_by(token: str) -> dict[str, list[str]]:
        headers = {"Authorization": f"Bearer {token}"}
        async with (
            aiohttp.ClientSession() as http,
            http.get(f"{gw.http}/participants", headers=headers) as resp,
        ):
            assert resp.status == 200
            body = await resp.json()
        return {p["id"]: p["channels"] for p in body["participants"]}

    outsider = await channels_seen_by("eve-token")
    assert outsider["alice"] == ["#general"] and outsider["bob"] == ["#general"]
    member = await channels_seen_by("bob-token")
    assert member["alice"] == ["#general", SECRET] and member["bob"] == ["#general", SECRET]


# ---------------------------------------------------------------------- streams


async def test_a_stream_in_a_private_channel_reaches_its_members_only(
    gw: RunningGateway,
) -> None:
    """The request, its ``stream/open``, its data frames, its close and the welcome's
    ``active_streams`` entry: members only."""
    alice = await _secret(gw)
    bob = await _mew(gw, "bob", channels=["#general", SECRET])
    eve = await _mew(gw, "eve")
    await alice.send(
        {
            "kind": "stream/request",
            "channel": SECRET,
            "payload": {"direction": "upload", "description": "merger plans"},
        }
    )
    sid = (await bob.expect("stream/open"))["payload"]["stream_id"]
    assert (await alice.expect("stream/open"))["payload"]["stream_id"] == sid
    await alice.ws.send(f"#{sid}#the numbers")
    assert await bob.ws.recv() == f"#{sid}#the numbers"
    assert await alice.ws.recv() == f"#{sid}#the numbers"  # its writer's echo, as MEW's
    seen = await _raw_until_fence(eve)
    assert not [f for f in seen if sid in f or "merger" in f], seen

    late_eve = await gw.connect()  # a second connection of eve: its welcome
    hello = {"type": "join", "participantId": "eve", "space": "default", "token": "eve-token"}
    await late_eve.send(hello)
    assert (await late_eve.expect("system/welcome"))["payload"]["active_streams"] == []
    bob2 = await gw.connect()
    await bob2.send(hello | {"participantId": "bob", "token": "bob-token"})
    listed = (await bob2.expect("system/welcome"))["payload"]["active_streams"]
    assert [s["description"] for s in listed] == ["merger plans"]

    # granting an outsider write access would hand it the stream: refused
    grant = {"stream_id": sid, "participant_id": "eve"}
    await alice.send({"kind": "stream/grant-write", "payload": grant})
    err = (await alice.expect("system/error"))["payload"]
    assert err["error"] == "not_invited" and "'eve'" in err["message"]

    await alice.close()  # the owner leaves: its stream closes, for members only
    closed = await bob2.expect("stream/close")
    assert closed["payload"]["stream_id"] == sid
    seen = await _raw_until_fence(late_eve)
    assert not [f for f in seen if sid in f], seen


async def test_an_http_only_sender_may_not_open_a_stream(gw: RunningGateway) -> None:
    """A stream belongs to a connection: without one, ``stream/request`` over HTTP is refused
    (no slot is taken); with one, it opens and closes when that connection does."""
    url = f"{gw.http}/participants/eve/messages"
    headers = {"Authorization": "Bearer eve-token"}
    body = {"kind": "stream/request", "payload": {"direction": "upload"}}
    async with aiohttp.ClientSession(headers=headers) as http:
        for _ in range(3):
            async with http.post(url, data=json.dumps(body)) as resp:
                assert resp.status == 409, await resp.text()
                err = await resp.json()
                assert err["error"] == "invalid_operation"
                assert "connect over WebSocket" in err["message"]
        assert len(gw.router.spaces["default"].streams) == 0

        eve = await _mew(gw, "eve")
        bob = await _mew(gw, "bob")
        async with http.post(url, data=json.dumps(body)) as resp:
            assert resp.status == 202, await resp.text()
            sid = (await resp.json())["stream_id"]
        assert (await bob.expect("stream/open"))["payload"]["owner"] == "eve"
        await eve.close()
        closed = await bob.expect("stream/close")
        assert closed["payload"] == {"stream_id": sid, "reason": "owner_disconnected"}
        assert len(gw.router.spaces["default"].streams) == 0


# ---------------------------------------------------------------------- dashboard


async def _events(gw: RunningGateway, pid: str) -> Any:
    return open_events(gw, token=f"{pid}-token")  # type: ignore[arg-type]


def _mentions_secret(data: Any) -> bool:
    return SECRET in json.dumps(data)


async def test_dashboard_feed_and_snapshot_hide_the_private_channel(
    gw: RunningGateway,
) -> None:
    """An observer not invited sees nothing of ``#secret``; the admin sees that it exists and
    who is in it, its messages without their text (as DMs); a member sees everything."""
    alice = await _secret(gw)
    async with await _events(gw, "boss") as admin:  # watching: the feed records messages
        admin_snap = await admin.next("snapshot")
        assert SECRET in [c["name"] for c in admin_snap["channels"]]
        await alice.send(_chat("the merger is on", SECRET))
        msg = await admin.activity("message", channel=SECRET)
        assert msg["private"] is True and "text" not in msg and msg["participant"] == "alice"
        await alice.send(_chat("public marker"))
        await admin.activity("message", text="public marker")

        async with await _events(gw, "ops") as observer:
            snap = await observer.next("snapshot")
            assert not _mentions_secret(snap), snap  # channels, participants, recent
            assert person(snap, "alice")["channels"] == ["#general"]
            assert "the merger" not in json.dumps(snap)
            await alice.send(_chat("still secret", SECRET))
            await alice.send(_chat("second marker"))
            await observer.activity("message", text="second marker")
            bob = await _mew(gw, "bob", channels=["#general", SECRET])  # connect, then state
            joined = await observer.activity("connect", participant="bob")
            assert joined["channels"] == ["#general"]
            await bob.send({"kind": "channel/create", "payload": {"channel": "#SECRET"}})
            err = await observer.activity("error", participant="bob")  # it names #secret
            assert err["code"] == "channel_exists" and "channel you cannot see" in err["message"]
            st = await observer.next("state", lambda d: person(d, "bob")["online"])
            assert person(st, "bob")["channels"] == ["#general"]
            assert not [d for _, d in observer.seen if _mentions_secret(d)], observer.seen
            assert "still secret" not in json.dumps(observer.seen)

        async with await _events(gw, "boss") as again:
            snap = await again.next("snapshot")
            assert "the merger" not in json.dumps(snap) and "still secret" not in json.dumps(snap)
            (secret,) = [c for c in snap["channels"] if c["name"] == SECRET]
            assert secret["members"] == ["alice", "bob"] and secret["private"] is True
            assert person(snap, "bob")["channels"] == ["#general", SECRET]


# ---------------------------------------------------------------------- MCP


async def test_mcp_listen_resources_and_channels_keep_the_private_channel_hidden(
    gw: RunningGateway,
) -> None:
    alice = await _secret(gw)
    headers = {"Authorization": "Bearer eve-token"}
    async with http_session(gw.http + "/mcp", headers) as s:
        listed = await call(s, "channels")
        assert SECRET not in [c["name"] for c in listed["channels"]]
        await alice.send(_chat("for members", SECRET))
        await alice.send(_chat("for everyone"))
        got = await call(s, "listen", timeout_s=10)
        assert [m["text"] for m in got["messages"]] == ["for everyone"]
        assert "not invited" in await fails(s, "history", channel="secret", limit=10)
        assert "not invited" in await fails(s, "join", channel="secret")
        with pytest.raises(Exception, match="hubbub://channel/secret"):  # refused, not read
            await s.read_resource("hubbub://channel/secret")  # type: ignore[arg-type]
