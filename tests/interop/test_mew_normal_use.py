"""MEW clients in normal use (issue 24): restarts, spaces as MEW writes them, any kind.

Raw frames in the shapes of MEW v0.4's ``MEWClient`` (ids ``<participant>-<n>`` counted from
1 in every process), its templates' capabilities (``{kind: "*"}``, ``[{kind: chat}]``) and its
CLI, over real sockets to a real gateway.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import websockets

from hubbub.server.config import (
    ConfigError,
    Limits,
    ParticipantConfig,
    SpaceConfig,
    hash_token,
)
from tests.conftest import RunningGateway, start_gateway, stop_gateway
from tests.interop.test_mew_client import MakePeer, MewPeer

Frame = dict[str, Any]
SPACE = "mew-space"


def _mew_space() -> SpaceConfig:
    """A space as MEW's templates write it: a human with ``*``, an agent with ``chat`` only."""
    cfg = SpaceConfig(
        space=SPACE,
        participants={
            "human": ParticipantConfig(
                kind="human",
                role="admin",
                token_hash=hash_token("human-token"),
                capabilities=[{"kind": "*"}],
            ),
            "agent": ParticipantConfig(
                token_hash=hash_token("agent-token"), capabilities=[{"kind": "chat"}]
            ),
        },
    )
    cfg.validate()
    return cfg


@pytest.fixture
async def space(tmp_path: Path) -> AsyncIterator[RunningGateway]:
    gw = await start_gateway(tmp_path, spaces=[_mew_space()])
    yield gw
    await stop_gateway(gw)


async def _join(gw: RunningGateway, pid: str, token: str) -> MewPeer:
    """``MEWClient.connect()`` to the configured space (no ``channels``: MEW has none)."""
    ws = await websockets.connect(gw.url, max_size=None, compression=None)
    peer = MewPeer(ws, pid)
    frame = {"type": "join", "space": SPACE, "token": token, "participantId": pid}
    await ws.send(json.dumps(frame))
    peer.welcome = await peer.expect("system/welcome")
    return peer


def _chat(text: str) -> Frame:
    return {"kind": "chat", "payload": {"text": text}}


# ------------------------------------------------------------------ 1. ids per (sender, id)


async def test_a_restarted_client_counting_from_1_again_is_heard(mew: MakePeer) -> None:
    """``MEWClient`` numbers ``ts-agent-1``, ``-2``… in every process: after a restart its
    first answers are new messages, delivered with the client's ids."""
    alice = await mew("alice")
    agent = await mew("ts-agent")
    first = await agent.send(_chat("before the restart"))
    old = await alice.expect("chat", lambda f: f["from"] == "ts-agent")
    await agent.ws.close()
    agent = await mew("ts-agent")  # a new process: its counter starts at 1 again
    again = await agent.send(_chat("after the restart"))
    assert again["id"] == first["id"] == "ts-agent-1"
    got = await alice.expect("chat", lambda f: f["from"] == "ts-agent")
    assert got["payload"]["text"] == "after the restart" and got["id"] == "ts-agent-1"
    assert got["seq"] > old["seq"]
    echo = await agent.expect("chat")
    assert echo["payload"]["text"] == "after the restart"


async def test_the_same_frame_twice_from_a_mew_client_is_two_messages(mew: MakePeer) -> None:
    """MEW's gateway never deduplicates; resend detection is for senders that opt in."""
    alice, script = await mew("alice"), await mew("script")
    for _ in range(2):
        await script.ws.send(json.dumps({"protocol": "mew/v0.4", "id": "msg-123", **_chat("x")}))
    a = await alice.expect("chat", lambda f: f["from"] == "script")
    b = await alice.expect("chat", lambda f: f["from"] == "script")
    assert a["id"] == b["id"] == "msg-123" and b["seq"] == a["seq"] + 1


async def test_another_senders_id_is_never_refused(mew: MakePeer) -> None:
    alice, bob = await mew("alice"), await mew("bob")
    await alice.ws.send(json.dumps({"protocol": "mew/v0.4", "id": "fixed-1", **_chat("a")}))
    await bob.expect("chat", lambda f: f["from"] == "alice")
    await bob.ws.send(json.dumps({"protocol": "mew/v0.4", "id": "fixed-1", **_chat("b")}))
    got = await alice.expect("chat", lambda f: f["from"] == "bob")
    assert got["id"] == "fixed-1" and got["payload"]["text"] == "b"


async def test_http_same_id_with_new_text_is_a_new_message(gateway: RunningGateway) -> None:
    """Without ``Idempotency-Key`` a second ``msg-123`` with new text is stored and gets its
    own ``seq``; with the key, the same body is answered with the original."""
    url = f"{gateway.http}/participants/cron/messages"
    async with aiohttp.ClientSession() as http:
        seqs = []
        for text in ("one", "two"):
            body = {"id": "msg-123", **_chat(text)}
            async with http.post(url, json=body) as resp:
                assert resp.status == 202
                assert '"status":"accepted"' in await resp.text()  # compact, as MEW's
                seqs.append((await resp.json())["seq"])
        assert seqs[1] == seqs[0] + 1
        key = {"Idempotency-Key": "k-1"}
        answers = []
        for _ in range(2):
            async with http.post(url, json=_chat("same"), headers=key) as resp:
                answers.append(await resp.json())
        assert answers[0] == answers[1]
        async with http.post(url, json=_chat("other"), headers=key) as resp:
            assert (await resp.json())["seq"] == answers[0]["seq"] + 1  # another message


async def test_a_response_to_a_reused_id_reaches_its_latest_request(mew: MakePeer) -> None:
    """Correlation naming a reused id goes with the latest message of that id."""
    asker, tool = await mew("asker"), await mew("tool")
    for n in range(2):  # the asker restarts between its two requests: the same id
        req = {"protocol": "mew/v0.4", "id": "asker-1", "to": ["tool"], "kind": "mcp/request"}
        await asker.ws.send(json.dumps({**req, "payload": {"method": "tools/list"}}))
        got = await tool.expect("mcp/request")
        await tool.respond(got, {"tools": [], "n": n})
        resp = await asker.expect("mcp/response")
        assert resp["correlation_id"] == ["asker-1"] and resp["payload"]["result"]["n"] == n


# ------------------------------------------------------------------ 2, 3. spaces as MEW writes them


async def test_being_in_the_space_means_being_in_general(space: RunningGateway) -> None:
    agent = await _join(space, "agent", "agent-token")  # capabilities: [{kind: chat}]
    joined = await agent.expect("channel/joined")
    assert joined["payload"]["channel"] == "#general"
    await agent.send(_chat("hello"))
    echo = await agent.expect("chat")
    assert echo["payload"]["text"] == "hello"
    async with (  # an HTTP-only participant of the space posts there too
        aiohttp.ClientSession() as http,
        http.post(
            f"{space.http}/participants/human/messages",
            json=_chat("over http"),
            headers={"Authorization": "Bearer human-token"},
        ) as resp,
    ):
        assert resp.status == 202, await resp.text()
    got = await agent.expect("chat", lambda f: f["from"] == "human")
    assert got["payload"]["text"] == "over http"


async def test_a_lone_star_is_every_kind_and_mcp_response_is_everyones(
    space: RunningGateway,
) -> None:
    human = await _join(space, "human", "human-token")
    agent = await _join(space, "agent", "agent-token")
    assert {"kind": "mcp/response"} in agent.welcome["payload"]["you"]["capabilities"]
    req = await human.mcp_request("agent", {"method": "tools/list"})  # "*" allows it
    got = await agent.expect("mcp/request")
    await agent.respond(got, {"tools": []})  # chat-only, yet it may answer
    resp = await human.expect("mcp/response")
    assert resp["correlation_id"] == [req["id"]]
    await agent.send({"kind": "mcp/request", "to": ["human"], "payload": {"method": "x"}})
    err = await agent.expect("system/error")
    assert err["payload"]["error"] == "capability_violation"


# ------------------------------------------------------------------ 4, 8. kinds and proposals


@pytest.mark.parametrize(
    "kind",
    [
        "participant/compact-done",
        "participant/forget",
        "participant/clear",
        "participant/restart",
        "participant/shutdown",
        "space/kick",
        "game/move",
    ],
)
async def test_every_kind_a_capability_allows_is_routed(mew: MakePeer, kind: str) -> None:
    alice, bob = await mew("alice"), await mew("bob")
    sent = await alice.send({"kind": kind, "to": ["bob"], "payload": {"reason": "cli"}})
    got = await bob.expect(kind)
    assert got["id"] == sent["id"] and got["from"] == "alice" and got["payload"]["reason"] == "cli"
    await alice.send({"kind": "system/whatever", "payload": {}})
    err = await alice.expect("system/error")
    assert err["payload"]["error"] == "unknown_kind"


async def test_a_proposal_without_to_is_broadcast(mew: MakePeer) -> None:
    proposer, watcher = await mew("proposer"), await mew("watcher")
    call = {"method": "tools/call", "params": {"name": "add", "arguments": {}}}
    sent = await proposer.send({"kind": "mcp/proposal", "payload": call})
    got = await watcher.expect("mcp/proposal")
    assert got["id"] == sent["id"] and "to" not in got


# ------------------------------------------------------------------ 5, 6, 7. joining


async def test_the_cli_joins_with_a_system_join_envelope(space: RunningGateway) -> None:
    """``mew space connect``: ``{kind: system/join, payload: {space, participant, token}}``."""
    ws = await websockets.connect(space.url, max_size=None, compression=None)
    frame = {
        "protocol": "mew/v0.4",
        "id": "join-1718000000000",
        "ts": "2026-01-01T00:00:00.000Z",
        "kind": "system/join",
        "payload": {"space": SPACE, "participant": "human", "token": "human-token"},
    }
    await ws.send(json.dumps(frame))
    peer = MewPeer(ws, "human")
    welcome = await peer.expect("system/welcome")
    assert welcome["payload"]["you"]["id"] == "human"
    await ws.close()


async def test_one_presence_frame_per_joining_participant(tmp_path: Path) -> None:
    """``MEWAgent`` reads only ``payload.participant``: two joins within the coalescing
    window reach a MEW client as two frames, one participant each."""
    gw = await start_gateway(tmp_path, limits=Limits(presence_coalesce_ms=300))
    try:
        observer = await MewPeer.join(gw, "observer")
        a, b = await asyncio.gather(MewPeer.join(gw, "a"), MewPeer.join(gw, "b"))
        seen: list[str] = []
        while len(seen) < 2:
            frame = await observer.expect(
                "system/presence",
                lambda f: (
                    f["payload"]["event"] == "join"
                    and f["payload"]["participant"]["id"] != "observer"
                ),
            )
            assert "participants" not in frame["payload"]
            seen.append(frame["payload"]["participant"]["id"])
        assert sorted(seen) == ["a", "b"]
        for peer in (observer, a, b):
            await peer.ws.close()
    finally:
        await stop_gateway(gw)


async def test_two_processes_with_one_id_do_not_displace_each_other_forever(
    mew: MakePeer,
) -> None:
    """The newer connection wins; the older is told and left open (``MEWClient`` reconnects
    after any close), and what it sends is refused, not routed."""
    alice = await mew("alice")
    older = await mew("worker")
    newer = await mew("worker")
    told = await older.expect("system/error")
    assert told["payload"]["error"] == "session_displaced"
    await older.send(_chat("from the older process"))
    refused = await older.expect("system/error")
    assert refused["payload"]["error"] == "session_displaced"
    assert "own participant id" in refused["payload"]["message"]
    await newer.send(_chat("from the newer process"))
    got = await alice.expect("chat", lambda f: f["from"] == "worker")
    assert got["payload"]["text"] == "from the newer process"
    assert older.ws.close_code is None  # open: nothing for MEWClient to reconnect after


# ------------------------------------------------------------------ 10. grants


async def test_a_grant_with_mews_keys_and_its_revoke_by_grant_id(space: RunningGateway) -> None:
    """MEW §3.6: a grant's capabilities may carry ``to``; ``capability/revoke`` names the
    grant by ``grant_id`` instead of repeating its capabilities."""
    human = await _join(space, "human", "human-token")
    agent = await _join(space, "agent", "agent-token")
    grant = {
        "protocol": "mew/v0.4",
        "id": "grant-789",
        "kind": "capability/grant",
        "to": ["agent"],
        "payload": {
            "recipient": "agent",
            "capabilities": [{"kind": "mcp/request", "to": ["human"]}],
        },
    }
    await human.ws.send(json.dumps(grant))
    await agent.expect("capability/grant")
    await agent.send({"kind": "mcp/request", "to": ["human"], "payload": {"method": "x"}})
    await human.expect("mcp/request", lambda f: f["from"] == "agent")
    await human.send(
        {
            "kind": "capability/revoke",
            "to": ["agent"],
            "payload": {"recipient": "agent", "grant_id": "grant-789"},
        }
    )
    await agent.expect("capability/revoke")
    await agent.send({"kind": "mcp/request", "to": ["human"], "payload": {"method": "y"}})
    err = await agent.expect("system/error")
    assert err["payload"]["error"] == "capability_violation"
    await human.send(
        {"kind": "capability/revoke", "payload": {"recipient": "agent", "grant_id": "nope"}}
    )
    err = await human.expect("system/error")
    assert "no grant 'nope'" in err["payload"]["message"]


# ------------------------------------------------------------------ 11. space ids


def test_a_template_space_id_is_refused_naming_the_rule() -> None:
    """MEW's templates write ``space: {id: "{{SPACE_NAME}}"}`` until filled in."""
    with pytest.raises(ConfigError) as err:
        SpaceConfig(space="{{SPACE_NAME}}").validate("space.yaml")
    message = str(err.value)
    assert "1-64 of [A-Za-z0-9_.-]" in message and "placeholder" in message
