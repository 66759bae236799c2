"""Floor control, a gateway restart, cancellation and the /mcp door's refusals."""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime
from pathlib import Path

import anyio
import httpx2
import pytest

from hubbub.sdk import Client
from hubbub.server.config import Limits, ParticipantConfig, SpaceConfig, hash_token
from hubbub.server.http.mcp_http import GONE_GRACE_S, IDLE_TIMEOUT_S, MCP_DOORS, gone_grace_s
from tests.conftest import RunningGateway, start_gateway, stop_gateway
from tests.mcp.conftest import (
    ACCEPT,
    INIT,
    SHORT,
    TRANSPORT_PARAMS,
    TRANSPORTS,
    call,
    fails,
    opener,
    stdio_session,
)
from tests.ports import reserve_port
from tests.timing import until

pytestmark = pytest.mark.timeout(90)


def _ms(ts: str) -> int:
    """An envelope's ``ts`` in Unix milliseconds (the earliest legal ``started_at``)."""
    return int(datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp() * 1000)


@pytest.fixture(autouse=True)
def short_listen(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in SHORT.items():
        monkeypatch.setenv(name, value)


@pytest.mark.slow  # starts `hubbub mcp` (stdio)
async def test_two_mcp_agents_and_an_sdk_agent_one_answer(gateway: RunningGateway) -> None:
    """One question, three agents claim it: the SDK agent claimed first and answers; the MCP
    agents (one per transport) see yielded_to, and send(reply_to) refuses unless forced."""
    ws = opener("stdio", gateway.http, gateway.url)
    http = opener("http", gateway.http, gateway.url)
    async with (
        ws("alpha") as a,
        http("beta") as b,
        Client(gateway=gateway.url, participant_id="sdk") as sdk,
    ):
        asker = await gateway.mew("asker", kind="service")
        await asker.send({"kind": "chat", "channel": "#general", "payload": {"text": "6*7?"}})
        qa = (await call(a, "listen", timeout_s=10))["messages"][0]
        qb = (await call(b, "listen", timeout_s=10))["messages"][0]
        assert qa["id"] == qb["id"] and qa["addressed_to_you"] is False
        claimed = sdk.expect("floor/claimed")
        await sdk.send(
            {
                "kind": "floor/responding-to",
                "channel": "#general",
                "payload": {"msg_id": qa["id"], "started_at": _ms(qa["ts"])},
            }
        )
        await asyncio.wait_for(claimed, 10)
        for s in (a, b):
            verdict = await call(s, "claim_floor", message_id=qa["id"])
            assert (verdict["granted"], verdict["yielded_to"]) == (False, "sdk")
            refusal = await fails(s, "send", to="#general", text="42", reply_to=qa["id"])
            assert "sdk is answering" in refusal and "force: true" in refusal
        await sdk.send({"kind": "chat", "channel": "#general", "payload": {"text": "42"}})
        later = await call(a, "listen", timeout_s=10)
        assert [m["text"] for m in later["messages"]] == ["42"]
        forced = await call(b, "send", to="#general", text="also 42", reply_to=qa["id"], force=True)
        assert forced["seq"] is not None


@pytest.mark.slow  # starts `hubbub mcp` (stdio)
async def test_first_claim_is_granted_and_a_later_yield_is_reported(
    gateway: RunningGateway,
) -> None:
    for transport in TRANSPORTS:
        async with (
            opener(transport, gateway.http, gateway.url)("claude") as s,
            Client(gateway=gateway.url, participant_id=f"sdk-{transport}") as sdk,
        ):
            asker = await gateway.mew(f"asker-{transport}")
            await asker.send({"kind": "chat", "channel": "#general", "payload": {"text": "q?"}})
            got = await call(s, "listen", timeout_s=10)
            q = next(m for m in got["messages"] if m["from"] == f"asker-{transport}")
            assert (await call(s, "claim_floor", message_id=q["id"]))["granted"] is True
            # an earlier claim arrives later: the gateway yields claude, listen reports it
            await sdk.send(
                {
                    "kind": "floor/responding-to",
                    "channel": "#general",
                    "payload": {"msg_id": q["id"], "started_at": _ms(q["ts"])},
                }
            )
            note = await call(s, "listen", timeout_s=10)
            assert note["yields"] == [
                {"message_id": q["id"], "winner": f"sdk-{transport}", "channel": "#general"}
            ]
            assert "is answering" in await fails(
                s, "send", to="#general", text="a", reply_to=q["id"]
            )
            unknown = await fails(s, "claim_floor", message_id="nope")
            assert "claim the `id` of a channel message" in unknown


@pytest.mark.slow  # starts `hubbub mcp` (stdio)
async def test_listen_across_a_gateway_restart(tmp_path: Path) -> None:
    """hubbub mcp reconnects and resumes: every message once, none missed, none twice."""
    gw = await start_gateway(tmp_path)
    port = gw.port
    async with stdio_session(gw.url, "claude") as s:
        bob = await gw.mew("bob")
        await bob.send({"kind": "chat", "channel": "#general", "payload": {"text": "one"}})
        await bob.next_where(lambda f: f.get("payload", {}).get("text") == "one")
        await stop_gateway(gw)
        gw = await start_gateway(tmp_path, port=port)
        bob = await gw.mew("bob")  # before claude is back: it gets these by resume
        for text in ("two", "three"):
            await bob.send({"kind": "chat", "channel": "#general", "payload": {"text": text}})
        texts: list[str] = []
        while len(texts) < 3:
            got = await call(s, "listen", timeout_s=15)
            texts += [m["text"] for m in got["messages"]]
        assert texts == ["one", "two", "three"]
        await bob.send({"kind": "chat", "channel": "#general", "payload": {"text": "four"}})
        got = await call(s, "listen", timeout_s=15)
        assert [m["text"] for m in got["messages"]] == ["four"]
    await stop_gateway(gw)


@pytest.mark.slow  # starts `hubbub mcp` (stdio)
async def test_hubbub_mcp_fails_over_to_the_next_gateway(gateway: RunningGateway) -> None:
    """Several --gateway URLs (the nodes of a cluster): a dead one is skipped."""
    dead = f"ws://127.0.0.1:{reserve_port()}/ws"  # held, never listened on
    async with stdio_session(dead, "claude", "--gateway", gateway.url) as s:
        assert (await call(s, "channels"))["channels"][0]["joined"] is True
        assert "claude" in gateway.router.spaces["default"].online


@pytest.mark.parametrize("transport", TRANSPORT_PARAMS)
async def test_cancelling_a_listen_loses_nothing(gateway: RunningGateway, transport: str) -> None:
    async with opener(transport, gateway.http, gateway.url)("claude") as s:
        waiting = asyncio.Event()

        async def progress(_p: float, _t: float | None, _m: str | None) -> None:
            waiting.set()

        async with anyio.create_task_group() as tg:
            scope = anyio.CancelScope()

            async def blocked() -> None:
                with scope:
                    await s.call_tool("listen", {"timeout_s": 600}, progress_callback=progress)

            tg.start_soon(blocked)
            await waiting.wait()  # a progress notification: the listen is blocked, waiting
            await call(s, "who")  # the session still answers while a listen blocks
            scope.cancel()
        bob = await gateway.mew("bob")
        await bob.send({"kind": "chat", "channel": "#general", "payload": {"text": "after"}})
        got = await call(s, "listen", timeout_s=10)
        assert [m["text"] for m in got["messages"]] == ["after"]


async def test_mcp_door_refusals(tmp_path: Path) -> None:
    cfg = SpaceConfig(participants={"claude": ParticipantConfig(token_hash=hash_token("good"))})
    gw = await start_gateway(tmp_path, spaces=[cfg])
    try:
        async with httpx2.AsyncClient() as http:
            url = gw.http + "/mcp"
            wrong = await http.post(
                url, json=INIT, headers={**ACCEPT, "Authorization": "Bearer bad"}
            )
            assert wrong.status_code == 401 and "unknown token" in wrong.json()["message"]
            none = await http.post(url, json=INIT, headers=ACCEPT)
            assert none.status_code == 401 and "requires a token" in none.json()["message"]
            foreign = await http.post(
                url, json=INIT, headers={**ACCEPT, "Origin": "https://evil.example"}
            )
            assert foreign.status_code == 403 and foreign.json()["error"] == "forbidden_origin"
            stream = await http.get(url, headers={"Origin": "https://evil.example"})
            assert stream.status_code == 403
        async with opener("http", gw.http, gw.url)("claude", token="good") as s:
            assert (await call(s, "who"))["participants"][0]["id"] == "claude"
    finally:
        await stop_gateway(gw)


async def test_open_mode_needs_a_participant(gateway: RunningGateway) -> None:
    async with httpx2.AsyncClient() as http:
        none = await http.post(gateway.http + "/mcp", json=INIT, headers=ACCEPT)
        assert none.status_code == 400
        assert (
            "open mode, so name yourself with the header 'X-Hubbub-Participant"
            in (none.json()["message"])
        )
        bad = await http.post(gateway.http + "/mcp?as=no%20spaces", json=INIT, headers=ACCEPT)
        assert bad.status_code == 400


@pytest.mark.slow  # starts `hubbub mcp` (stdio)
async def test_closing_the_session_is_a_disconnect(gateway: RunningGateway) -> None:
    watcher = await gateway.mew("watcher")
    for transport in TRANSPORTS:
        async with opener(transport, gateway.http, gateway.url)("claude") as s:
            await call(s, "who")
            assert "claude" in gateway.router.spaces["default"].online
        left = await watcher.next_where(
            lambda f: f.get("kind") == "system/presence" and f["payload"].get("event") == "leave"
        )
        ids = [
            p["id"] for p in left["payload"].get("participants") or [left["payload"]["participant"]]
        ]
        assert ids == ["claude"]


async def test_an_idle_session_ends_and_its_participant_goes_offline(
    gateway: RunningGateway,
) -> None:
    """No request in flight and no event stream for 30 minutes (the door's clock): the SDK's
    session is deleted (its id answers 404) and the participant is disconnected."""
    async with httpx2.AsyncClient() as http:
        url = gateway.http + "/mcp"
        headers = {**ACCEPT, "X-Hubbub-Participant": "idler"}
        opened = await http.post(url, json=INIT, headers=headers)
        assert opened.status_code == 200
        sid = opened.headers["mcp-session-id"]
        headers |= {"mcp-session-id": sid, "mcp-protocol-version": "2025-06-18"}
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert (await http.post(url, json=note, headers=headers)).status_code == 202
        (door,) = gateway.runner.app[MCP_DOORS]
        await until(lambda: not door.sessions[sid].in_flight, what="the notification's end")
        now = door.clock()
        door.clock = lambda: now + 29 * 60
        await door.sweep()
        assert "idler" in gateway.router.spaces["default"].online  # not idle long enough
        ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
        assert (await http.post(url, json=ping, headers=headers)).status_code == 200
        # the ping's handler ends just after its answer
        await until(lambda: not door.sessions[sid].in_flight, what="the ping's end")
        door.clock = lambda: now + 29 * 60 + IDLE_TIMEOUT_S + 1  # + 1: float sums round
        await door.sweep()
        assert "idler" not in gateway.router.spaces["default"].online
        gone = await http.post(url, json=ping, headers=headers)
        assert gone.status_code == 404


async def test_a_session_whose_stream_closed_ends_after_the_grace(
    gateway: RunningGateway,
) -> None:
    """Claude Code, Gemini CLI, the Inspector and the TypeScript SDK exit without a
    ``DELETE``: once the session's event stream (its GET) closed and nothing is in flight
    for ``GONE_GRACE_S`` (the door's clock), the participant goes offline, not 30 minutes
    later."""
    async with httpx2.AsyncClient() as http:
        url = gateway.http + "/mcp"
        headers = {**ACCEPT, "X-Hubbub-Participant": "ghost"}
        opened = await http.post(url, json=INIT, headers=headers)
        sid = opened.headers["mcp-session-id"]
        headers |= {"mcp-session-id": sid, "mcp-protocol-version": "2025-06-18"}
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert (await http.post(url, json=note, headers=headers)).status_code == 202
        (door,) = gateway.runner.app[MCP_DOORS]
        stream = {**headers, "accept": "text/event-stream"}
        async with http.stream("GET", url, headers=stream) as events:
            assert events.status_code == 200
            await until(lambda: door.sessions[sid].in_flight == 1, what="the stream open")
        await until(lambda: not door.sessions[sid].in_flight, what="the stream's end")
        now = door.clock()
        door.clock = lambda: now + GONE_GRACE_S - 1
        await door.sweep()
        assert "ghost" in gateway.router.spaces["default"].online  # within the grace
        door.clock = lambda: now + GONE_GRACE_S + 1
        await door.sweep()
        assert "ghost" not in gateway.router.spaces["default"].online
    assert gone_grace_s({"HUBBUB_MCP_GONE_GRACE_S": "30"}) == 30.0
    with pytest.raises(ValueError, match="HUBBUB_MCP_GONE_GRACE_S"):
        gone_grace_s({"HUBBUB_MCP_GONE_GRACE_S": "soon"})


async def test_http_resume_longer_than_a_page_is_paged(tmp_path: Path) -> None:
    """A participant away for more than ``limits.resume_max`` messages: its next session's
    first ``listen`` returns all of them once, in order (the rest is paged before
    ``initialize`` is answered)."""
    limits = Limits(resume_max=3, rate_per_s=0)
    gw = await start_gateway(tmp_path, limits=limits)
    try:
        open_mcp = opener("http", gw.http, gw.url)
        async with open_mcp("claude") as s:
            await call(s, "who")  # the first session starts the cursor where it joined
        bob = await gw.mew("bob")
        for i in range(10):
            await bob.send({"kind": "chat", "channel": "#general", "payload": {"text": f"m{i}"}})
        await bob.next_where(lambda f: f.get("payload", {}).get("text") == "m9")
        await stop_gateway(gw)
        gw = await start_gateway(tmp_path, limits=limits, port=gw.port)
        bob = await gw.mew("bob")
        async with open_mcp("claude") as s:
            await bob.send({"kind": "chat", "channel": "#general", "payload": {"text": "live"}})
            texts: list[str] = []
            while len(texts) < 11:
                got = await call(s, "listen", timeout_s=10)
                assert not got["nudge"], texts
                texts += [m["text"] for m in got["messages"]]
            assert texts == [f"m{i}" for i in range(10)] + ["live"]
    finally:
        await stop_gateway(gw)


async def test_http_next_session_rejoins_the_channels_joined_with_the_tools(
    tmp_path: Path,
) -> None:
    """Channels joined (and left) through the tools are where the next session is: after a
    restart it is back in #ops, not in #dev, and gets #ops' messages it missed."""
    limits = Limits(rate_per_s=0)
    gw = await start_gateway(tmp_path, limits=limits)
    try:
        open_mcp = opener("http", gw.http, gw.url)
        bob = await gw.mew("bob")
        for name in ("#ops", "#dev"):
            await bob.send({"kind": "channel/create", "payload": {"channel": name}})
            await bob.next_where(lambda f, n=name: f.get("kind") == "channel/joined"
                                 and f["payload"]["channel"] == n)  # fmt: skip
        async with open_mcp("claude") as s:
            await call(s, "join", channel="#dev")
            await call(s, "leave", channel="#dev")
            await call(s, "join", channel="#ops")
            await bob.send({"kind": "chat", "channel": "#ops", "payload": {"text": "one"}})
            await bob.next_where(lambda f: f.get("payload", {}).get("text") == "one")
        await stop_gateway(gw)
        gw = await start_gateway(tmp_path, limits=limits, port=gw.port)
        bob = await gw.mew("bob", channels=["#ops", "#dev"])
        for name in ("#ops", "#dev"):
            await bob.send({"kind": "chat", "channel": name, "payload": {"text": f"two {name}"}})
        await bob.next_where(lambda f: f.get("payload", {}).get("text") == "two #dev")
        async with open_mcp("claude") as s:
            channels = {c["name"]: c["joined"] for c in (await call(s, "channels"))["channels"]}
            assert channels["#ops"] and not channels["#dev"]
            texts: list[str] = []
            while len(texts) < 2:
                got = await call(s, "listen", timeout_s=10)
                assert not got["nudge"], texts
                texts += [m["text"] for m in got["messages"]]
            assert texts == ["one", "two #ops"]
    finally:
        await stop_gateway(gw)


async def test_concurrent_initializes_of_one_id_one_wins_the_rest_409(
    gateway: RunningGateway, caplog: pytest.LogCaptureFixture
) -> None:
    """30 clients initialize ``/mcp`` as the same participant at once: those that overlap an
    initialize in progress get 409 and a sentence, never a 500; the log has no traceback; a
    later initialize opens a working session."""
    url = gateway.http + "/mcp"
    headers = {**ACCEPT, "X-Hubbub-Participant": "twin"}
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}

    async def one(http: httpx2.AsyncClient) -> list[httpx2.Response]:
        opened = await http.post(url, json=INIT, headers=headers)
        if opened.status_code != 200:
            return [opened]
        more = {**headers, "mcp-session-id": opened.headers["mcp-session-id"],
                "mcp-protocol-version": "2025-06-18"}  # fmt: skip
        return [opened, await http.post(url, json=note, headers=more),
                await http.post(url, json=listing, headers=more)]  # fmt: skip

    async with opener("http", gateway.http, gateway.url)("twin") as s:
        await call(s, "who")  # a cursor: each initialize below resumes from it
    caplog.set_level(logging.INFO)
    clients = [httpx2.AsyncClient(timeout=30) for _ in range(30)]
    try:
        answers = await asyncio.gather(*(one(c) for c in clients))
    finally:
        for c in clients:
            await c.aclose()
    firsts = [a[0] for a in answers]
    assert {r.status_code for r in firsts} <= {200, 409}, [r.text for r in firsts]
    assert any(r.status_code == 200 for r in firsts)
    refused = [r for r in firsts if r.status_code == 409]
    assert refused, "30 initializes at once: some overlap"
    for r in refused:
        body = r.json()
        assert body["error"] == "duplicate_id"
        assert "twin" in body["message"] and "initialize" in body["message"]
    rest = [r for a in answers for r in a[1:]]
    assert {r.status_code for r in rest} <= {200, 202, 404}, [r.text for r in rest]
    for r in rest:  # a session a later initialize replaced is ended at once, and says so
        if r.status_code == 404:
            assert "ended this session" in r.json()["error"]["message"]
    assert "twin" in gateway.router.spaces["default"].online
    async with opener("http", gateway.http, gateway.url)("twin") as s:  # none is left "opening"
        assert {p["id"] for p in (await call(s, "who"))["participants"]} == {"twin"}
    assert not [r for r in caplog.records if r.exc_info or "Traceback" in r.getMessage()]
