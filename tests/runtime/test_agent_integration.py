"""A real Agent (offline model, real gateway, a real remote tool) in the runtime: interrupted
mid tool call by a new message its history stays one a strict provider accepts; a shared
runtime queues FIFO and a full inbox refuses a message with a DM to its sender."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from hubbub.llm.base import Completion, Message, ToolCall
from hubbub.protocol.envelope import Envelope
from hubbub.sdk.react import Turn
from hubbub.sdk.runtime import AgentMessage, AgentRuntime, Delivery, check_history
from tests.agent.conftest import MakeAgent
from tests.agent.test_agent import next_from, say, until_answer
from tests.sdk.conftest import MakeParticipant


async def test_a_real_agent_interrupted_mid_tool_call_keeps_a_valid_history(
    participant: MakeParticipant, agent: MakeAgent
) -> None:
    calc = await participant("calculator", connect=False, kind="service")
    entered = asyncio.Event()
    release = asyncio.Event()
    stopped = asyncio.Event()
    ran: list[str] = []

    @calc.tool
    async def multiply(a: int, b: int) -> int:
        """Multiply two integers (slowly: it waits for the test)."""
        entered.set()
        try:
            await release.wait()
        except asyncio.CancelledError:
            stopped.set()  # the agent's notifications/cancelled reached the calculator
            raise
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
    pending = runtime.loop("assistant").pending_tool_call()
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
    await asyncio.wait_for(stopped.wait(), 5)
    assert ran == ["add 2 3"]  # the interrupted multiply was stopped where it ran


async def slow_calculator(participant: MakeParticipant) -> tuple[asyncio.Event, asyncio.Event]:
    """A calculator whose multiply waits for the test; returns (entered, release)."""
    calc = await participant("calculator", connect=False, kind="service")
    entered = asyncio.Event()
    release = asyncio.Event()

    @calc.tool
    async def multiply(a: int, b: int) -> int:
        """Multiply two integers (slowly: it waits for the test)."""
        entered.set()
        await release.wait()
        return a * b

    @calc.tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    await calc.connect()
    return entered, release


async def test_a_second_mention_interrupts_the_agents_slow_tool_call(
    participant: MakeParticipant, agent: MakeAgent
) -> None:
    entered, release = await slow_calculator(participant)
    bot = await agent("assistant")
    await bot.wait_for_tools("calculator")
    human = await participant("alice", kind="human")
    stream = human.client.messages()
    first = await say(human.client, stream, "@assistant what is 12*7")
    start = await next_from(stream, "assistant", ("reasoning/start",))
    assert start.correlation_ids() == [first.id]
    await asyncio.wait_for(entered.wait(), 5)  # the remote multiply is running
    second = await say(human.client, stream, "@assistant what is 2+3")
    events = await until_answer(stream, "assistant")
    release.set()
    kinds = [e.kind for e in events]
    cancel = events[kinds.index("reasoning/cancel")]
    assert cancel.context == start.id
    assert cancel.payload == {"reason": "interrupted", "message": f"interrupted by message "
                              f"{second.id}"}  # fmt: skip
    after = events[kinds.index("reasoning/cancel") + 1 :]
    assert [e.kind for e in after] == [
        "reasoning/start",
        "reasoning/thought",
        "reasoning/thought",
        "reasoning/conclusion",
        "chat",
    ]
    # both went to #general: the one answer answers both (it correlates to both)
    assert after[0].correlation_ids() == [first.id, second.id]
    assert {e.context for e in after[1:4]} == {after[0].id}
    answer = after[-1]
    assert answer.payload["text"] == "2 + 3 = 5."
    assert answer.correlation_ids() == [first.id, second.id]
    history = bot.history
    check_history(history)
    assert [m.role for m in history] == ["user", "user", "assistant", "tool", "assistant"]
    assert history[0] == Message.user(f"alice: {first.payload['text']}")
    assert history[1] == Message.user(f"alice: {second.payload['text']}")
    assert [c.name for c in history[2].tool_calls] == ["calculator__add"]
    assert bot.runtime.sequences_started == 1  # one processing sequence answered both


async def test_a_shared_runtime_queues_fifo_and_refuses_when_the_inbox_is_full(
    participant: MakeParticipant, agent: MakeAgent
) -> None:
    entered, release = await slow_calculator(participant)
    runtime = AgentRuntime(max_queue=1, interrupts=False)
    bot = await agent("assistant", runtime=runtime, reasoning_enabled=False)
    assert bot.runtime is runtime
    await bot.wait_for_tools("calculator")
    human = await participant("alice", kind="human")
    stream = human.client.messages()
    first = await say(human.client, stream, "@assistant what is 12*7")
    await asyncio.wait_for(entered.wait(), 5)
    second = await say(human.client, stream, "@assistant what is 2+3")
    await bot.wait_until(lambda: runtime.bus.size("assistant") == 1)
    third = await say(human.client, stream, "@assistant what is 1+1")
    refusal = await next_from(stream, "assistant", ("chat",))
    assert refusal.to == ["alice"] and refusal.correlation_ids() == [third.id]
    assert refusal.payload["error"] == "queue_full"
    assert "my inbox is full (1 waiting)" in refusal.payload["text"]
    release.set()
    answers = [await next_from(stream, "assistant", ("chat",)) for _ in range(2)]
    assert [(a.payload["text"], a.correlation_ids()) for a in answers] == [
        ("12 * 7 = 84.", [first.id]),
        ("2 + 3 = 5.", [second.id]),
    ]
    check_history(bot.history)
