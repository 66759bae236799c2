"""A real Agent (offline model, real gateway, a real remote tool) hosted by the runtime and
interrupted mid tool call by a new message: its history stays one a strict provider accepts."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from hubbub.llm.base import Completion, Message, ToolCall
from hubbub.protocol.envelope import Envelope
from hubbub.sdk.react import Turn
from hubbub.sdk.runtime import AgentMessage, AgentRuntime, Delivery, check_history
from tests.agent.conftest import MakeAgent
from tests.sdk.conftest import MakeParticipant


async def test_a_real_agent_interrupted_mid_tool_call_keeps_a_valid_history(
    participant: MakeParticipant, agent: MakeAgent
) -> None:
    calc = await participant("calculator", connect=False, kind="service")
    entered = asyncio.Event()
    release = asyncio.Event()
    ran: list[str] = []

    @calc.tool
    async def multiply(a: int, b: int) -> int:
        """Multiply two integers (slowly: it waits for the test)."""
        entered.set()
        await release.wait()
        ran.append(f"multiply {a} {b}")
        return a * b

    @calc.tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        ran.append(f"add {a} {b}")
        return a + b

    await calc.connect()
    bot = await agent("assistant")
    await bot.wait_for_tools("calculator")

    async def model(history: Sequence[Message]) -> Completion:
        return await bot.model.complete(
            [Message.system("You are assistant."), *history], bot.specs()
        )

    async def tool(call: ToolCall) -> Message:
        return await bot.run(Turn(Envelope(kind="chat"), ""), call)

    runtime = AgentRuntime()
    runtime.register("assistant", model, tool)
    assert runtime.send(AgentMessage("assistant", "alice: what is 12*7")) is Delivery.STARTED
    await asyncio.wait_for(entered.wait(), 5)  # the remote multiply is running
    pending = runtime.handler("assistant").pending_tool_call()
    assert pending is not None and pending.name == "calculator__multiply"
    check_history(runtime.conversations.history("assistant"), allow_pending=True)

    new = AgentMessage("assistant", "alice: what is 2+3")
    assert runtime.send(new) is Delivery.INTERRUPTED
    await asyncio.wait_for(runtime.idle(), 5)
    release.set()

    history = runtime.conversations.history("assistant")
    check_history(history)
    assert history[0] == Message.user("alice: what is 12*7")
    assert history[1] == Message.user("alice: what is 2+3")  # the multiply round is gone
    assert all(pending.id not in (m.tool_call_id, *(c.id for c in m.tool_calls)) for m in history)
    assert history[-1] == Message.assistant("2 + 3 = 5.")
    assert [r.text for r in runtime.replies("assistant")] == ["2 + 3 = 5."]
    assert ran == ["add 2 3"]  # the interrupted multiply never finished
