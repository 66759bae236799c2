"""Participants across a real gateway: MCP tools and resources, capabilities, chat, hooks."""

from __future__ import annotations

import asyncio
import random

import mcp.types as mt
import pytest

from hubbub.errors import (
    CapabilityDenied,
    GatewayError,
    InvalidArguments,
    RequestFailed,
    RequestTimeout,
    ToolError,
)
from hubbub.protocol.capabilities import CapabilitySet
from hubbub.protocol.envelope import Envelope
from hubbub.sdk import Participant, Resource, Tool, Unsubscribe
from tests.conftest import RunningGateway
from tests.sdk.conftest import PROPOSER_CAPS, MakeClient, MakeParticipant


async def calculator(make: MakeParticipant, pid: str = "calc") -> Participant:
    """A participant offering a few tools and a resource."""
    calc = await make(pid, connect=False, kind="service")

    @calc.tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @calc.tool(name="divide", description="Divide a by b.")
    async def divide(a: float, b: float) -> float:
        if b == 0:
            raise ZeroDivisionError("cannot divide by zero")
        return a / b

    @calc.tool
    async def slow_echo(text: str, delay: float) -> str:
        """Echo after a delay."""
        await asyncio.sleep(delay)
        return text

    calc.register_tool(
        Tool(
            name="shout",
            description="Upper-case a text.",
            execute=lambda args: args["text"].upper(),
            input_schema={
                "type": "object",
                "properties": {"text": {"type": "string"}},
                "required": ["text"],
            },
        )
    )

    @calc.resource("calc://constants", mime_type="application/json", description="Constants")
    def constants() -> dict[str, float]:
        return {"pi": 3.14159}

    calc.register_resource(Resource(uri="calc://readme", read=lambda: "a calculator"))
    await calc.connect()
    return calc


async def test_tools_list_and_call_across_participants(participant: MakeParticipant) -> None:
    await calculator(participant)
    agent = await participant("agent")
    tools = {t.name: t for t in await agent.list_tools("calc")}
    assert set(tools) == {"add", "divide", "slow_echo", "shout"}
    assert tools["add"].description == "Add two integers."
    assert tools["add"].input_schema["properties"]["a"]["type"] == "integer"
    assert tools["divide"].description == "Divide a by b."
    result = await agent.call_tool("calc", "add", {"a": 2, "b": 40})
    assert result.content == [mt.TextContent(text="42")] and not result.is_error
    result = await agent.call_tool("calc", "shout", {"text": "hi"})
    assert result.content == [mt.TextContent(text="HI")]
    raw = await agent.mcp_request(
        "calc", {"method": "tools/call", "params": {"name": "add", "arguments": {"a": 1, "b": 1}}}
    )
    assert raw["content"] == [{"type": "text", "text": "2"}] and raw["isError"] is False


async def test_a_participant_can_call_its_own_tools(participant: MakeParticipant) -> None:
    calc = await calculator(participant)
    assert (await calc.call_tool("calc", "add", {"a": 1, "b": 1}, timeout=2)).content[0].text == "2"


async def test_invalid_arguments_are_refused_before_the_tool_runs(
    participant: MakeParticipant,
) -> None:
    calc = await calculator(participant)
    ran: list[object] = []
    calc.register_tool(Tool.from_function(lambda n: ran.append(n), name="record"))
    agent = await participant("agent")
    with pytest.raises(InvalidArguments) as info:
        await agent.call_tool("calc", "add", {"a": "one"})
    assert "a: 'one' is not of type 'integer'" in str(info.value)
    assert "'b' is a required property" in str(info.value)
    assert info.value.result is not None and info.value.result.is_error
    with pytest.raises(InvalidArguments, match="'x' was unexpected"):
        await agent.call_tool("calc", "add", {"a": 1, "b": 2, "x": 3})
    with pytest.raises(InvalidArguments, match="'n' is a required property"):
        await agent.call_tool("calc", "record", {})
    assert ran == []
    assert (await agent.call_tool("calc", "add", {"a": 1, "b": 2})).content[0].text == "3"


async def test_a_tool_exception_is_an_mcp_error_and_the_participant_survives(
    participant: MakeParticipant,
) -> None:
    await calculator(participant)
    agent = await participant("agent")
    with pytest.raises(ToolError, match=r"^cannot divide by zero$") as info:
        await agent.call_tool("calc", "divide", {"a": 1, "b": 0})
    assert not isinstance(info.value, InvalidArguments)
    result = await agent.call_tool("calc", "divide", {"a": 1, "b": 0}, raise_on_error=False)
    assert result.is_error and result.content == [mt.TextContent(text="cannot divide by zero")]
    assert (await agent.call_tool("calc", "divide", {"a": 1, "b": 4})).content[0].text == "0.25"


async def test_protocol_errors_unknown_tool_method_and_resource(
    participant: MakeParticipant,
) -> None:
    await calculator(participant)
    agent = await participant("agent")
    with pytest.raises(RequestFailed, match="Unknown tool: 'nope'; calc offers: add") as info:
        await agent.call_tool("calc", "nope", {})
    assert info.value.code == mt.INVALID_PARAMS and info.value.target == "calc"
    with pytest.raises(RequestFailed) as method:
        await agent.mcp_request("calc", {"method": "prompts/list"})
    assert method.value.code == mt.METHOD_NOT_FOUND
    with pytest.raises(RequestFailed, match="Resource not found: calc://nope"):
        await agent.read_resource("calc", "calc://nope")
    assert await agent.mcp_request("calc", {"method": "ping"}) == {}


async def test_resources_list_and_read(participant: MakeParticipant) -> None:
    await calculator(participant)
    agent = await participant("agent")
    listed = {r.uri: r for r in await agent.list_resources("calc")}
    assert set(listed) == {"calc://constants", "calc://readme"}
    assert listed["calc://constants"].description == "Constants"
    read = await agent.read_resource("calc", "calc://constants")
    first = read.contents[0]
    assert isinstance(first, mt.TextResourceContents)
    assert first.text == '{"pi": 3.14159}' and first.mime_type == "application/json"
    readme = (await agent.read_resource("calc", "calc://readme")).contents[0]
    assert isinstance(readme, mt.TextResourceContents) and readme.text == "a calculator"


async def test_many_requests_in_flight_each_get_their_own_answer(
    participant: MakeParticipant,
) -> None:
    await calculator(participant)
    agent = await participant("agent")
    rng = random.Random(7)

    async def one(i: int) -> str:
        result = await agent.call_tool(
            "calc", "slow_echo", {"text": f"#{i}", "delay": rng.random() / 50}
        )
        assert isinstance(result.content[0], mt.TextContent)
        return result.content[0].text

    assert await asyncio.gather(*(one(i) for i in range(64))) == [f"#{i}" for i in range(64)]


async def test_a_cancelled_call_stops_the_tool_at_its_provider(
    participant: MakeParticipant,
) -> None:
    calc = await participant("calc", connect=False, kind="service")
    entered, stopped = asyncio.Event(), asyncio.Event()

    @calc.tool
    async def ponder(topic: str) -> str:
        """Think about a topic for a long time."""
        entered.set()
        try:
            await asyncio.Event().wait()
        finally:
            stopped.set()
        return topic

    await calc.connect()
    agent = await participant("agent")
    call = asyncio.create_task(agent.call_tool("calc", "ponder", {"topic": "life"}, timeout=30))
    await asyncio.wait_for(entered.wait(), 5)
    call.cancel()
    await asyncio.wait_for(stopped.wait(), 5)  # MCP notifications/cancelled reached calc
    assert calc.server.in_progress == 0 and len(agent.requests) == 0


async def test_requests_time_out_and_unknown_targets_fail_fast(
    participant: MakeParticipant, client: MakeClient
) -> None:
    await client("mute")  # online, never answers
    agent = await participant("agent")
    with pytest.raises(RequestTimeout, match=r"no response for tools/list from mute within 0\.1s"):
        await agent.mcp_request("mute", {"method": "tools/list"}, timeout=0.1)
    with pytest.raises(GatewayError, match="unknown_participant") as info:
        await agent.mcp_request("ghost", {"method": "tools/list"}, timeout=2)
    assert info.value.code == "unknown_participant"
    assert len(agent.requests) == 0  # nothing left behind


async def test_capability_violations_surface_as_exceptions(
    participant: MakeParticipant,
) -> None:
    await calculator(participant)
    chatter = await participant("chatter", capabilities=[{"kind": "chat"}])
    assert chatter.can_send({"kind": "chat", "payload": {"text": "hi"}})
    assert not chatter.can_send({"kind": "mcp/request", "payload": {"method": "tools/list"}})
    with pytest.raises(CapabilityDenied, match="may send neither mcp/request nor mcp/proposal"):
        await chatter.list_tools("calc")
    with pytest.raises(PermissionError, match="ask an admin for a capability/grant"):
        await chatter.join("#general")
    # a stale local view: the gateway still refuses, and the refusal is the same exception
    chatter.capabilities = CapabilitySet([{"kind": "**"}])
    with pytest.raises(CapabilityDenied, match="you may not send kind 'mcp/request'") as info:
        await chatter.list_tools("calc", timeout=2)
    assert info.value.kind == "mcp/request"


async def test_payload_patterns_choose_between_request_and_proposal(
    participant: MakeParticipant,
) -> None:
    await calculator(participant)
    reader = await participant(
        "reader",
        capabilities=[
            {"kind": "mcp/request", "payload": {"method": "tools/list"}},
            {"kind": "mcp/proposal"},
            {"kind": "chat"},
            {"kind": "channel/*"},
        ],
    )
    human = await participant("human", kind="human")
    assert "add" in {t.name for t in await reader.list_tools("calc")}  # sent directly
    call = asyncio.create_task(reader.call_tool("calc", "add", {"a": 1, "b": 1}, timeout=3))
    proposal = await human.proposals.next(timeout=2)  # a tools/call becomes a proposal
    assert proposal.proposer == "reader" and proposal.method == "tools/call"
    await human.reject(proposal, "not now")
    with pytest.raises(Exception, match="Proposal rejected by human: not now"):
        await call


async def test_granted_capabilities_apply_at_once(
    gw: RunningGateway, participant: MakeParticipant
) -> None:
    # open-mode participants have role participant: this space lets that role grant, as
    # `grant_roles: [admin, participant]` in a space.yaml would
    gw.router.spaces["default"].config.grant_roles = ["admin", "participant"]
    await calculator(participant)
    agent = await participant("agent", capabilities=PROPOSER_CAPS)
    human = await participant("human", kind="human")
    grant = {"kind": "mcp/request", "payload": {"method": "tools/*"}}
    assert not agent.can_send({"kind": "mcp/request", "payload": {"method": "tools/call"}})
    acked = human.client.expect("capability/grant-ack")
    await human.client.send(
        Envelope(
            kind="capability/grant",
            to=["agent"],
            payload={"recipient": "agent", "capabilities": [grant]},
        )
    )
    ack = await asyncio.wait_for(acked, 2)
    assert ack.from_ == "agent"
    assert agent.can_send({"kind": "mcp/request", "payload": {"method": "tools/call"}})
    result = await agent.call_tool("calc", "add", {"a": 20, "b": 22}, timeout=2)  # now direct
    assert result.content[0].text == "42" and len(human.proposals) == 0
    revoked = agent.client.expect("capability/revoke")
    await human.client.send(
        Envelope(
            kind="capability/revoke",
            to=["agent"],
            payload={"recipient": "agent", "capabilities": [grant]},
        )
    )
    await asyncio.wait_for(revoked, 2)
    assert not agent.can_send({"kind": "mcp/request", "payload": {"method": "tools/call"}})


async def test_capabilities_of_follows_welcome_presence_and_grants(
    participant: MakeParticipant, gw: RunningGateway
) -> None:
    gw.router.spaces["default"].config.grant_roles = ["admin", "participant"]  # watcher grants
    watcher = await participant("watcher")
    asked = [{"kind": "chat"}, {"kind": "channel/join"}]
    limited = await participant("limited", capabilities=asked)
    held = [*asked, {"kind": "mcp/response"}]  # MEW's baseline: everyone may answer
    assert limited.capabilities_of("watcher") == [{"kind": "**"}]  # from the welcome
    assert limited.capabilities_of("limited") == held
    await watcher.client.wait_for_participant("limited", timeout=5)
    assert watcher.capabilities_of("limited") == held  # from the join's presence
    granted = [*held, {"kind": "mcp/proposal"}]
    announced = watcher.client.expect(
        "system/presence", lambda _env: watcher.capabilities_of("limited") == granted
    )
    await watcher.client.send(
        Envelope(
            kind="capability/grant",
            to=["limited"],
            payload={"recipient": "limited", "capabilities": [{"kind": "mcp/proposal"}]},
        )
    )
    await asyncio.wait_for(announced, 5)
    assert watcher.capabilities_of("nobody") is None


async def test_capabilities_of_survives_a_reconnect_announced_by_digest(
    participant: MakeParticipant,
) -> None:
    watcher = await participant("watcher")
    asked = [{"kind": "chat"}, {"kind": "channel/join"}]
    held = [*asked, {"kind": "mcp/response"}]  # MEW's baseline: everyone may answer
    limited = await participant("limited", capabilities=asked)
    await watcher.client.wait_for_participant("limited", timeout=5)
    assert watcher.capabilities_of("limited") == held
    gone = watcher.client.expect(
        "system/presence", lambda _e: "limited" not in watcher.client.participants
    )
    await limited.disconnect()
    await asyncio.wait_for(gone, 5)
    back = watcher.client.expect(
        "system/presence", lambda _e: "limited" in watcher.client.participants
    )
    await participant("limited", capabilities=asked)
    presence = await asyncio.wait_for(back, 5)
    sent = presence.payload.get("participants") or [presence.payload["participant"]]
    assert [e for e in sent if e["id"] == "limited" and "capabilities" not in e]
    assert watcher.capabilities_of("limited") == held  # the presence named the list by digest


async def test_answers_mcp_initialize_and_ping(participant: MakeParticipant) -> None:
    await calculator(participant)
    client = await participant("mcp-client")
    params = {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "some-mcp-client", "version": "1.0"},
    }
    init = await client.mcp_request("calc", {"method": "initialize", "params": params})
    assert init["protocolVersion"] == "2025-06-18"
    assert init["serverInfo"]["name"] == "calc"
    assert "tools" in init["capabilities"] and "resources" in init["capabilities"]
    future = await client.mcp_request(
        "calc", {"method": "initialize", "params": {**params, "protocolVersion": "2099-01-01"}}
    )
    assert future["protocolVersion"] == "2025-11-25"  # unknown version: the latest it speaks
    assert await client.mcp_request("calc", {"method": "ping"}) == {}


async def test_chat_join_leave_and_hooks(participant: MakeParticipant) -> None:
    listener = await participant("listener")
    heard = listener.client.messages()
    talker = await participant("talker", connect=False)
    order: list[str] = []

    async def next_chat() -> Envelope:
        async with asyncio.timeout(2):
            async for env in heard:
                if env.kind == "chat" and env.from_ == "talker":
                    return env
        raise AssertionError("stream ended")

    @talker.on_ready
    async def hello() -> None:
        order.append("ready")
        await talker.chat("hello everyone")

    @talker.on_shutdown
    async def goodbye() -> None:
        order.append("shutdown")
        await talker.chat("bye", to="listener")

    await talker.connect()
    first = await next_chat()
    assert first.payload["text"] == "hello everyone" and first.channel == "#general"
    await talker.chat("just you", to="listener")
    dm = await next_chat()
    assert dm.channel is None and dm.to == ["listener"]
    await talker.chat("addressed", to=["listener"], channel="#general")
    addressed = await next_chat()
    assert addressed.channel == "#general" and addressed.to == ["listener"]
    await talker.leave("#general")
    assert talker.client.channels == []
    await talker.join("#general")
    assert talker.client.channels == ["#general"]
    await talker.disconnect()
    bye = await next_chat()
    assert bye.payload["text"] == "bye"
    assert order == ["ready", "shutdown"]


async def test_every_on_registration_returns_an_unsubscribe(participant: MakeParticipant) -> None:
    """Document 003: ``onMCPRequest(handler): () => void`` — calling the result removes the
    handler (once; again is harmless), and a decorated name keeps the function as ``handler``."""
    calc = await participant("calc2", connect=False, kind="service")
    calc.register_tool(Tool(name="echo", execute=lambda args: args.get("text", "")))
    order: list[str] = []
    requests: list[Envelope] = []
    calc.on_ready(lambda: order.append("ready 1"))
    calc.on_ready(lambda: order.append("ready 2"))()
    calc.on_shutdown(lambda: order.append("shutdown 1"))()
    calc.on_shutdown(lambda: order.append("shutdown 2"))
    stop = calc.on_mcp_request(requests.append)

    @calc.on_mcp_request
    def also(env: Envelope) -> None:
        order.append(f"request {env.payload['method']}")

    assert isinstance(also, Unsubscribe) and also.handler.__name__ == "also" and also.active
    await calc.connect()
    caller = await participant("caller")
    await caller.call_tool("calc2", "echo", {"text": "one"})
    stop()
    stop()  # again: nothing happens
    also()
    assert not stop.active and repr(also).endswith("(removed)>")
    await caller.call_tool("calc2", "echo", {"text": "two"})  # still served, nobody told
    assert [e.payload["params"]["arguments"] for e in requests] == [{"text": "one"}]
    await calc.disconnect()
    assert order == ["ready 1", "request tools/call", "shutdown 2"]
