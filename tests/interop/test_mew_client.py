"""MEW's own clients against hubbub, frame by frame, over real sockets to a real gateway.

Each test replays a flow exactly as MEW's TypeScript SDK (``MEWClient``, ``MEWParticipant``,
MEW protocol v0.4) puts it on the wire, from a raw ``websockets`` client: the join frame
``{type:"join", space, token, participantId, capabilities: []}``, envelopes completed by
``MEWClient.send`` (``protocol``, ``id = <participant>-<n>``, ``ts``, ``from``), MCP requests
with the client-chosen uuid ids of ``MEWParticipant.mcpRequest`` and bare payloads
(``{"method": "tools/list"}``), and responses correlated by the request's envelope ``id``.

:class:`MewPeer` also reads the way ``MEWClient`` reads: an envelope without ``protocol``
is dropped (only the welcome is recognised by its ``kind`` alone), so a frame MEW's client
would never see is never seen here either.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import websockets

from hubbub.sdk import Participant
from hubbub.server.config import Limits
from tests.conftest import RunningGateway, WsClient, start_gateway, stop_gateway

PROTOCOL = "mew/v0.4"
DEFAULTS = [{"kind": "**"}]  # an open space's defaults
PROPOSAL_ONLY = [{"kind": "mcp/proposal"}, {"kind": "chat"}]  # MEW spec §4.1, example 2
ADD = {"name": "add", "arguments": {"a": 2, "b": 3}}

Frame = dict[str, Any]


def now_iso() -> str:
    """``new Date().toISOString()``."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class MewPeer:
    """A raw WebSocket that sends and reads exactly what MEW's SDK does."""

    def __init__(self, ws: Any, pid: str) -> None:
        self.ws = ws
        self.id = pid
        self.counter = 0
        self.welcome: Frame = {}
        self.dropped: list[Frame] = []
        """Frames ``MEWClient.handleMessage`` ignores: envelopes without ``protocol``."""
        self.stream_frames: list[str] = []
        """Stream data frames read while looking for an envelope, oldest first."""
        self.held: list[str] = []
        """Envelopes read while looking for a stream frame, read again first."""
        self.door: RunningGateway | None = None

    @classmethod
    async def join(
        cls,
        gw: RunningGateway,
        pid: str,
        *,
        token: str = "mew-generated-token",
        capabilities: list[Frame] | None = None,
    ) -> MewPeer:
        """``new MEWClient({gateway, space, token, participant_id}).connect()``."""
        ws = await websockets.connect(gw.url, max_size=None, compression=None)
        peer = cls(ws, pid)
        peer.door = gw
        join = {
            "type": "join",
            "space": "default",
            "token": token,
            "participantId": pid,
            "capabilities": capabilities or [],
        }
        await ws.send(json.dumps(join))
        peer.welcome = await peer.expect("system/welcome")
        return peer

    async def send(self, envelope: Frame) -> Frame:
        """``MEWClient.send``: fill in protocol, id, ts and from; the caller's fields win."""
        self.counter += 1
        full = {
            "protocol": PROTOCOL,
            "id": f"{self.id}-{self.counter}",
            "ts": now_iso(),
            "from": self.id,
            **envelope,
        }
        await self.ws.send(json.dumps(full))
        return full

    async def mcp_request(self, target: str, payload: Frame, *, kind: str = "mcp/request") -> Frame:
        """``MEWParticipant.mcpRequest``: a uuid id, ``to: [target]``, the payload as given
        (``mcp/proposal`` when its capabilities do not allow the request)."""
        return await self.send(
            {
                "protocol": PROTOCOL,
                "id": str(uuid.uuid4()),
                "ts": now_iso(),
                "from": self.id,
                "to": [target],
                "kind": kind,
                "payload": payload,
            }
        )

    async def respond(self, request: Frame, result: Frame) -> Frame:
        """``MEWParticipant.handleMCPRequest``'s answer."""
        return await self.send(
            {
                "protocol": PROTOCOL,
                "id": str(uuid.uuid4()),
                "ts": now_iso(),
                "from": self.id,
                "to": [request["from"]],
                "correlation_id": [request["id"]],
                "kind": "mcp/response",
                "payload": {"result": result},
            }
        )

    async def next_where(self, pred: Callable[[Frame], bool], timeout: float = 5.0) -> Frame:
        """The next envelope ``MEWClient`` would emit for which ``pred`` holds."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            left = deadline - loop.time()
            try:
                if self.held:
                    raw = self.held.pop(0)
                elif left <= 0:
                    raise TimeoutError
                else:
                    raw = await asyncio.wait_for(self.ws.recv(), left)
            except TimeoutError:
                raise AssertionError(
                    f"{self.id}: no matching envelope within {timeout}s; frames MEWClient "
                    f"dropped for lacking 'protocol': {self.dropped[-3:]}"
                ) from None
            if raw.startswith("#"):  # a stream's data frame (MEW §3.10.3)
                self.stream_frames.append(raw)
                continue
            frame = json.loads(raw)
            if frame.get("kind") != "system/welcome" and not (
                frame.get("protocol") and frame.get("kind")
            ):
                self.dropped.append(frame)
                continue
            if pred(frame):
                return frame

    async def stream_frame(self, timeout: float = 5.0) -> str:
        """The next raw stream data frame ``#<stream_id>#<data>``; envelopes that arrive
        before it are kept for :meth:`next_where`."""
        if self.stream_frames:
            return self.stream_frames.pop(0)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            left = deadline - loop.time()
            try:
                if left <= 0:
                    raise TimeoutError
                raw = await asyncio.wait_for(self.ws.recv(), left)
            except TimeoutError:
                raise AssertionError(f"{self.id}: no stream frame within {timeout}s") from None
            if raw.startswith("#"):
                return str(raw)
            self.held.append(raw)

    async def expect(self, kind: str, where: Callable[[Frame], bool] | None = None) -> Frame:
        """The next envelope of ``kind`` (and ``where``)."""
        return await self.next_where(lambda f: f["kind"] == kind and (where is None or where(f)))

    async def silent(self, pred: Callable[[Frame], bool]) -> None:
        """Assert that no envelope ``MEWClient`` would emit matching ``pred`` came (the
        harness's barrier, :meth:`tests.conftest.WsClient.silent`)."""
        await WsClient(self.ws, self.door).silent(lambda f: bool(f.get("protocol")) and pred(f))


MakePeer = Callable[..., Awaitable[MewPeer]]


@pytest.fixture
async def calc(gateway: RunningGateway) -> AsyncIterator[Participant]:
    """A hubbub Participant offering ``add``."""
    p = Participant(gateway=gateway.url, participant_id="calc", kind="service")

    @p.tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    await p.connect()
    yield p
    await p.disconnect()


def presence_of(frame: Frame, event: str) -> dict[str, Frame]:
    """The participants a space-wide ``system/presence`` of ``event`` announces, by id."""
    p = frame["payload"]
    if frame["kind"] != "system/presence" or p.get("event") != event or "channel" in p:
        return {}
    return {e["id"]: e for e in p.get("participants") or [p["participant"]]}


# ------------------------------------------------------------------ joining


async def test_join_with_a_token_in_open_mode(mew: MakePeer) -> None:
    peer = await mew("client-1718000000000-abc123xyz", token="3f9a…from .mew/tokens")
    welcome = peer.welcome
    assert welcome["protocol"] == PROTOCOL and welcome["from"] == "system:gateway"
    assert welcome["to"] == [peer.id]
    assert welcome["payload"]["you"] == {
        "id": peer.id,
        "kind": "agent",
        "capabilities": DEFAULTS,  # capabilities: [] means the space's defaults
    }
    sent = await peer.send({"kind": "chat", "payload": {"text": "hello"}})
    echo = await peer.expect("chat")  # not mute: it sees its own message in the space
    assert echo["from"] == peer.id and echo["payload"]["text"] == "hello"
    assert echo["id"] == sent["id"]


async def test_welcome_lists_participants_with_capabilities(mew: MakePeer) -> None:
    first = await mew("first")
    second = await mew("second", capabilities=PROPOSAL_ONLY)
    listed = {p["id"]: p for p in second.welcome["payload"]["participants"]}
    assert listed["first"]["capabilities"] == DEFAULTS
    # MEW's baseline: everyone may answer a request (mcp/response), listed as held
    with_baseline = [*PROPOSAL_ONLY, {"kind": "mcp/response"}]
    assert second.welcome["payload"]["you"]["capabilities"] == with_baseline
    joined = await first.next_where(lambda f: "second" in presence_of(f, "join"))
    assert presence_of(joined, "join")["second"]["capabilities"] == with_baseline


async def test_every_presence_names_a_participant(tmp_path: Path) -> None:
    """MEWParticipant and MEWAgent read ``payload.participant.id`` of every presence: a burst
    of joins coalesced into ``participants`` still carries ``participant``."""
    gw = await start_gateway(tmp_path, limits=Limits(presence_coalesce_ms=300))
    try:
        observer = await MewPeer.join(gw, "observer")
        a, b = await asyncio.gather(MewPeer.join(gw, "a"), MewPeer.join(gw, "b"))
        seen: set[str] = set()
        while not {"a", "b"} <= seen:
            frame = await observer.expect("system/presence")
            assert isinstance(frame["payload"]["participant"]["id"], str)
            seen |= set(presence_of(frame, "join"))
        for peer in (observer, a, b):
            await peer.ws.close()
    finally:
        await stop_gateway(gw)


# ------------------------------------------------------------------ chat


async def test_chat_both_ways_with_an_agentchat_client(
    gateway: RunningGateway, mew: MakePeer
) -> None:
    peer = await mew("mew-user")
    ac = await gateway.agentchat("ac-user")
    await peer.send({"kind": "chat", "payload": {"text": "hello from MEW"}})
    msg = await ac.expect_type("MSG")
    assert msg["from"] == "@mew-user" and msg["to"] == "#general"
    assert msg["content"] == "hello from MEW"
    await ac.send({"type": "MSG", "to": "#general", "content": "hello from agentchat"})
    chat = await peer.expect("chat", lambda f: f["from"] == "ac-user")
    assert chat["payload"]["text"] == "hello from agentchat"


async def test_to_addresses_a_message_in_the_space_and_private_is_asked_for(
    mew: MakePeer,
) -> None:
    alice, bob, carol = await mew("alice"), await mew("bob"), await mew("carol")
    # MEWParticipant.chat(text, "bob"): addressed to bob, visible to the space (MEW §2.2)
    sent = await alice.send({"kind": "chat", "payload": {"text": "psst bob"}, "to": ["bob"]})
    for who in (bob, carol):
        got = await who.expect("chat", lambda f: f["payload"]["text"] == "psst bob")
        assert got["id"] == sent["id"] and got["to"] == ["bob"] and got["from"] == "alice"
    # a private DM is a hubbub extension, asked for explicitly
    await alice.send(
        {"kind": "chat", "payload": {"text": "secret"}, "to": ["bob"], "private": True}
    )
    got = await bob.expect("chat", lambda f: f["payload"]["text"] == "secret")
    assert got["to"] == ["bob"]
    await carol.silent(lambda f: f["kind"] == "chat" and f["payload"]["text"] == "secret")


# ------------------------------------------------------------------ MCP between participants


async def test_tools_list_and_call_between_two_mew_participants(mew: MakePeer) -> None:
    alice, bob = await mew("alice"), await mew("bob")
    tools = [{"name": "add", "description": "Add", "inputSchema": {"type": "object"}}]
    # MEWParticipant.discoverTools: a bare payload, correlated by the envelope id
    req = await alice.mcp_request("bob", {"method": "tools/list"})
    got = await bob.expect("mcp/request")
    assert got["id"] == req["id"] and got["from"] == "alice" and got["to"] == ["bob"]
    await bob.respond(got, {"tools": tools})
    resp = await alice.expect("mcp/response")
    assert resp["correlation_id"] == [req["id"]] and resp["payload"]["result"]["tools"] == tools
    req = await alice.mcp_request("bob", {"method": "tools/call", "params": ADD})
    got = await bob.expect("mcp/request")
    assert got["id"] == req["id"] and got["payload"] == {"method": "tools/call", "params": ADD}
    await bob.respond(got, {"content": [{"type": "text", "text": "5"}]})
    resp = await alice.expect("mcp/response", lambda f: f["correlation_id"] == [req["id"]])
    assert resp["payload"]["result"]["content"][0]["text"] == "5"


async def test_tools_list_and_call_answered_by_a_hubbub_participant(
    mew: MakePeer, calc: Participant
) -> None:
    alice = await mew("alice")
    req = await alice.mcp_request("calc", {"method": "tools/list"})
    resp = await alice.expect("mcp/response", lambda f: f["from"] == "calc")
    assert resp["correlation_id"] == [req["id"]] and resp["to"] == ["alice"]
    assert [t["name"] for t in resp["payload"]["result"]["tools"]] == ["add"]
    req = await alice.mcp_request("calc", {"method": "tools/call", "params": ADD})
    resp = await alice.expect("mcp/response", lambda f: f["correlation_id"] == [req["id"]])
    assert resp["payload"]["result"]["content"] == [{"type": "text", "text": "5"}]


async def test_initialize_and_ping_answered_by_a_hubbub_participant(
    mew: MakePeer, calc: Participant
) -> None:
    client = await mew("mcp-client")
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "mew-bridge", "version": "0.11.0"},
        },
    }
    req = await client.mcp_request("calc", init)
    resp = await client.expect("mcp/response", lambda f: f["correlation_id"] == [req["id"]])
    body = resp["payload"]
    assert body["jsonrpc"] == "2.0" and body["id"] == 1
    assert body["result"]["protocolVersion"] == "2025-06-18"
    assert body["result"]["serverInfo"]["name"] == "calc"
    assert "tools" in body["result"]["capabilities"]
    await client.mcp_request("calc", {"jsonrpc": "2.0", "method": "notifications/initialized"})
    req = await client.mcp_request("calc", {"jsonrpc": "2.0", "id": 2, "method": "ping"})
    resp = await client.expect("mcp/response", lambda f: f["from"] == "calc")
    assert resp["correlation_id"] == [req["id"]]  # nothing answered the notification
    assert resp["payload"] == {"jsonrpc": "2.0", "id": 2, "result": {}}


# ------------------------------------------------------------------ proposals and capabilities


async def test_a_proposal_fulfilled_by_a_third_participant(
    mew: MakePeer, calc: Participant
) -> None:
    proposer = await mew("proposer", capabilities=PROPOSAL_ONLY)
    human = await mew("human")
    call = {"method": "tools/call", "params": ADD}
    # MEWParticipant.mcpRequest without mcp/request capability: a proposal to the target
    proposal = await proposer.mcp_request("calc", call, kind="mcp/proposal")
    seen = await human.expect("mcp/proposal")
    assert seen["id"] == proposal["id"] and seen["to"] == ["calc"]
    assert seen["from"] == "proposer" and seen["payload"] == call
    # the human fulfils it: the real request, to the proposal's target, correlated to it
    fulfil = await human.send(
        {"kind": "mcp/request", "to": ["calc"], "correlation_id": [seen["id"]], "payload": call}
    )
    # the proposer sees the fulfilment (MEWParticipant.proposalFulfillments) ...
    watched = await proposer.expect("mcp/request")
    assert watched["id"] == fulfil["id"] and watched["correlation_id"] == [proposal["id"]]
    # ... and the response to the fulfiller, which ends its wait
    for who in (human, proposer):
        resp = await who.expect("mcp/response")
        assert resp["from"] == "calc" and resp["to"] == ["human"]
        assert resp["correlation_id"] == [fulfil["id"]]
        assert resp["payload"]["result"]["content"] == [{"type": "text", "text": "5"}]


async def test_capability_denial_reaches_the_client_as_system_error(mew: MakePeer) -> None:
    limited = await mew("limited", capabilities=PROPOSAL_ONLY)
    req = await limited.mcp_request("limited", {"method": "tools/call", "params": ADD})
    err = await limited.expect("system/error")
    assert err["from"] == "system:gateway" and err["to"] == ["limited"]
    assert err["correlation_id"] == [req["id"]]
    assert err["payload"]["error"] == "capability_violation"
    assert err["payload"]["attempted_kind"] == "mcp/request"
    assert err["payload"]["your_capabilities"] == [*PROPOSAL_ONLY, {"kind": "mcp/response"}]
