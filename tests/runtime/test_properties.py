"""The 14 correctness properties of document 002, as hypothesis tests (>= 100 examples each).

Every example runs in its own event loop; the fake model and tools wait on futures the test
resolves, so each example is deterministic and never waits on real time.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hubbub.llm.base import Message, ToolCall
from hubbub.sdk.runtime import AgentRuntime, Delivery, Phase, check_history
from tests.runtime.harness import (
    FakeAgent,
    assert_sound,
    drain,
    host,
    host_with_history,
    msg,
    settle,
    user_contents,
)
from tests.strength import examples

PROPERTY = settings(
    max_examples=examples(100), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)

# an action of the random scenarios: (what, agent index, argument)
actions = st.lists(
    st.tuples(
        st.sampled_from(["send", "answer", "tool", "gate"]),
        st.integers(0, 2),
        st.integers(0, 3),
    ),
    max_size=30,
)


def run(scenario: Callable[[], Awaitable[None]]) -> None:
    """Run one example in a fresh event loop."""
    asyncio.run(scenario())


async def random_scenario(
    steps: list[tuple[str, int, int]], agents: int, check: Callable[[], None] | None = None
) -> tuple[AgentRuntime, list[FakeAgent], list[str]]:
    """Apply random sends/answers/tool completions, checking the invariants after each step."""
    runtime = AgentRuntime()
    fakes = [host(runtime, f"a{i}", gated=True) for i in range(agents)]
    sent: list[str] = []
    for n, (what, index, arg) in enumerate(steps):
        fake = fakes[index % agents]
        if what == "send":
            message = msg(fake.agent_id, n)
            runtime.send(message)
            sent.append(message.content)
        elif what == "answer" and fake.open_model() is not None:
            fake.answer(arg)
        elif what == "tool" and fake.open_tool() is not None:
            fake.finish_tool()
        elif what == "gate" and fake.recording_gate is not None:
            fake.recording_gate.set()
            fake.recording_gate = asyncio.Event() if arg % 2 else None
        await settle()
        assert_sound(runtime, fakes)
        if check is not None:
            check()
    await drain(runtime, fakes)
    return runtime, fakes, sent


def assert_no_loss(runtime: AgentRuntime, fakes: list[FakeAgent], sent: list[str]) -> None:
    """Every sent message is in its agent's history exactly once, in a valid history."""
    seen: list[str] = []
    for fake in fakes:
        check_history(runtime.conversations.history(fake.agent_id))
        seen.extend(user_contents(runtime, fake.agent_id))
    assert sorted(seen) == sorted(sent)


async def start_tool_round(
    runtime: AgentRuntime, fake: FakeAgent, earlier_rounds: int, calls: int, done: int
) -> list[ToolCall]:
    """Send a first message, run ``earlier_rounds`` complete rounds, then open one with
    ``calls`` tool calls of which ``done`` completed; the next call is left running."""
    runtime.send(msg(fake.agent_id, 0))
    await settle()
    for _ in range(earlier_rounds):
        fake.answer(1)
        await settle()
        fake.finish_tool()
        await settle()
    round_calls = fake.answer(calls)
    await settle()
    for _ in range(done):
        fake.finish_tool()
        await settle()
    assert runtime.loop(fake.agent_id).phase is Phase.TOOL
    return round_calls


round_shape = st.integers(1, 4).flatmap(
    lambda calls: st.tuples(st.integers(0, 3), st.just(calls), st.integers(0, calls - 1))
)
agent_ids = st.text("abcdefghijklmnopqrstuvwxyz0123456789_-", min_size=1, max_size=12)
# the earlier conversation an agent already has: one exchange per item, with that many tool calls
priors = st.lists(st.integers(0, 3), max_size=6)


@PROPERTY
@given(steps=actions, agents=st.integers(1, 3))
def test_property_1_single_active_processing_per_agent(
    steps: list[tuple[str, int, int]], agents: int
) -> None:
    """Feature: agent-concurrent-request-management, Property 1: Single Active Processing Per Agent."""

    async def scenario() -> None:
        runtime, _fakes, sent = await random_scenario(steps, agents)
        # one sequence per agent at a time: a new sequence only ever starts on an idle agent
        assert runtime.sequences_started <= len(sent)
        assert len(runtime.active) == 0

    run(scenario)


@PROPERTY
@given(shape=round_shape, aid=agent_ids, prior=priors)
def test_property_2_message_interruption_cancels_tool_calls(
    shape: tuple[int, int, int], aid: str, prior: list[int]
) -> None:
    """Feature: agent-concurrent-request-management, Property 2: Message Interruption Cancels Tool Calls."""

    async def scenario() -> None:
        runtime = AgentRuntime()
        fake = host_with_history(runtime, aid, prior)
        await start_tool_round(runtime, fake, *shape)
        running = fake.open_tool()
        assert running is not None
        assert runtime.send(msg(aid, 99)) is Delivery.INTERRUPTED
        await settle()
        assert running.cancelled and not running.open
        assert runtime.loop(aid).pending_tool_call() is None
        assert runtime.loop(aid).phase is Phase.MODEL

    run(scenario)


@PROPERTY
@given(shape=round_shape, aid=agent_ids, prior=priors)
def test_property_3_canceled_tool_calls_removed_from_history(
    shape: tuple[int, int, int], aid: str, prior: list[int]
) -> None:
    """Feature: agent-concurrent-request-management, Property 3: Canceled Tool Calls Removed from History."""

    async def scenario() -> None:
        runtime = AgentRuntime()
        fake = host_with_history(runtime, aid, prior)
        cancelled = {c.id for c in await start_tool_round(runtime, fake, *shape)}
        runtime.send(msg(aid, 99))
        await settle()
        history = runtime.conversations.history(aid)
        check_history(history)  # no orphan results, no unanswered calls
        for message in history:
            assert message.tool_call_id not in cancelled
            assert not cancelled & {c.id for c in message.tool_calls}
        assert {c.id for c in runtime.loop(aid).cancelled_calls} == cancelled

    run(scenario)


@PROPERTY
@given(shape=round_shape, in_model=st.booleans(), aid=agent_ids, prior=priors)
def test_property_4_new_message_becomes_latest_content(
    shape: tuple[int, int, int], in_model: bool, aid: str, prior: list[int]
) -> None:
    """Feature: agent-concurrent-request-management, Property 4: New Message Becomes Latest Content."""

    async def scenario() -> None:
        runtime = AgentRuntime()
        fake = host_with_history(runtime, aid, prior)
        earlier, calls, done = shape
        if in_model:  # interrupt the in-flight LLM call instead of a tool call
            runtime.send(msg(aid, 0))
            await settle()
        else:
            await start_tool_round(runtime, fake, earlier, calls, done)
        new = msg(aid, 99)
        assert runtime.send(new) is Delivery.INTERRUPTED
        await settle()
        pending = fake.open_model()
        assert pending is not None
        assert pending.history[-1] == Message.user(new.content)
        await drain(runtime, [fake])
        assert runtime.replies(aid)[-1].message == msg(aid, 0)  # the sequence it joined

    run(scenario)


@PROPERTY
@given(shape=round_shape, aid=agent_ids, prior=priors)
def test_property_5_chat_history_preservation(
    shape: tuple[int, int, int], aid: str, prior: list[int]
) -> None:
    """Feature: agent-concurrent-request-management, Property 5: Chat History Preservation."""

    async def scenario() -> None:
        runtime = AgentRuntime()
        fake = host_with_history(runtime, aid, prior)
        await start_tool_round(runtime, fake, *shape)
        before = fake.model_calls[-1].history  # everything before the cancelled round
        runtime.send(msg(aid, 99))
        await settle()
        after = runtime.conversations.history(aid)
        assert after[: len(before)] == before
        assert after[len(before) :] == [Message.user(msg(aid, 99).content)]

    run(scenario)


@PROPERTY
@given(
    count=st.integers(1, 10),
    interrupts=st.booleans(),
    calls=st.integers(1, 3),
    aid=agent_ids,
    prior=priors,
)
def test_property_6_message_queuing_for_active_agents(
    count: int, interrupts: bool, calls: int, aid: str, prior: list[int]
) -> None:
    """Feature: agent-concurrent-request-management, Property 6: Message Queuing for Active Agents."""

    async def scenario() -> None:
        runtime = AgentRuntime(interrupts=interrupts)
        fake = host_with_history(runtime, aid, prior, gated=True)
        runtime.send(msg(aid, 0))
        await settle()
        if interrupts:  # a completed tool call whose result is being recorded
            fake.answer(calls)
            await settle()
            fake.finish_tool()
            await settle()
            assert runtime.loop(aid).phase is Phase.RECORDING
        model_calls = len(fake.model_calls)
        queued = [msg(aid, n) for n in range(1, count + 1)]
        assert [runtime.send(m) for m in queued] == [Delivery.QUEUED] * count
        await settle()
        assert runtime.bus.pending(aid) == tuple(queued)
        assert len(fake.model_calls) == model_calls  # not processed immediately
        assert runtime.sequences_started == 1

    run(scenario)


@PROPERTY
@given(count=st.integers(1, 10), tools=st.lists(st.integers(0, 2), min_size=10, max_size=10))
def test_property_7_fifo_message_queue_processing(count: int, tools: list[int]) -> None:
    """Feature: agent-concurrent-request-management, Property 7: FIFO Message Queue Processing."""

    async def scenario() -> None:
        runtime = AgentRuntime(interrupts=False)
        fake = host(runtime, "a")
        runtime.send(msg("a", 0))
        await settle()
        queued = [msg("a", n) for n in range(1, count + 1)]
        for m in queued:
            runtime.send(m)
        processed: list[str] = []
        for n in range(count + 1):
            pending = fake.open_model()
            assert pending is not None
            processed.append(pending.history[-1].content)
            for _ in range(tools[n % len(tools)]):
                fake.answer(1)
                await settle()
                fake.finish_tool()
                await settle()
            fake.answer(0)
            await settle()
        assert processed == [msg("a", n).content for n in range(count + 1)]
        assert [r.message for r in runtime.replies("a")] == [msg("a", 0), *queued]

    run(scenario)


@PROPERTY
@given(count=st.integers(1, 6), calls=st.integers(1, 3), aid=agent_ids, prior=priors)
def test_property_8_queue_replacement_on_new_message(
    count: int, calls: int, aid: str, prior: list[int]
) -> None:
    """Feature: agent-concurrent-request-management, Property 8: Queue Replacement on New Message."""

    async def scenario() -> None:
        runtime = AgentRuntime()
        fake = host_with_history(runtime, aid, prior, gated=True)
        runtime.send(msg(aid, 0))
        await settle()
        fake.answer(calls)
        await settle()
        fake.finish_tool()
        await settle()  # recording: the messages below cannot interrupt, they queue
        queued = [msg(aid, n) for n in range(1, count + 1)]
        assert [runtime.send(m) for m in queued] == [Delivery.QUEUED] * count
        assert fake.recording_gate is not None
        fake.recording_gate.set()
        await settle()
        assert runtime.loop(aid).phase in (Phase.TOOL, Phase.MODEL)
        new = msg(aid, 99)
        assert runtime.send(new) is Delivery.INTERRUPTED
        await settle()
        pending = fake.open_model()
        assert pending is not None and pending.history[-1].content == new.content
        assert runtime.bus.pending(aid) == tuple(queued)  # still delivered later, in order
        await drain(runtime, [fake])
        assert [r.message for r in runtime.replies(aid)] == [msg(aid, 0), *queued]

    run(scenario)


@PROPERTY
@given(
    phase=st.sampled_from([Phase.MODEL, Phase.TOOL, Phase.RECORDING]),
    calls=st.integers(1, 4),
    aid=agent_ids,
    prior=priors,
)
def test_property_9_message_bus_integration(
    phase: Phase, calls: int, aid: str, prior: list[int]
) -> None:
    """Feature: agent-concurrent-request-management, Property 9: MessageBus Integration."""

    async def scenario() -> None:
        runtime = AgentRuntime()
        fake = host_with_history(runtime, aid, prior, gated=True)
        assert runtime.bus.send(msg(aid, 0)) is Delivery.STARTED
        await settle()
        if phase is not Phase.MODEL:
            fake.answer(calls)
            await settle()
        if phase is Phase.RECORDING:
            fake.finish_tool()
            await settle()
        assert runtime.loop(aid).phase is phase
        outcome = runtime.bus.send(msg(aid, 1))
        expected = Delivery.QUEUED if phase is Phase.RECORDING else Delivery.INTERRUPTED
        assert outcome is expected
        assert runtime.bus.size(aid) == (1 if expected is Delivery.QUEUED else 0)
        assert runtime.sequences_started == 1
        await drain(runtime, [fake])

    run(scenario)


@PROPERTY
@given(
    agents=st.lists(
        st.tuples(agent_ids, st.integers(0, 3)), min_size=1, max_size=4, unique_by=lambda a: a[0]
    )
)
def test_property_10_backward_compatibility(agents: list[tuple[str, int]]) -> None:
    """Feature: agent-concurrent-request-management, Property 10: Backward Compatibility."""

    async def scenario() -> None:
        runtime = AgentRuntime()
        fakes = [host(runtime, aid) for aid, _ in agents]
        rounds = dict(agents)
        for fake in fakes:
            assert runtime.bus.send(msg(fake.agent_id, 0)) is Delivery.STARTED
            assert runtime.bus.size(fake.agent_id) == 0
        await settle()
        for fake in fakes:
            for _ in range(rounds[fake.agent_id]):
                fake.answer(1)
                await settle()
                fake.finish_tool()
                await settle()
            fake.answer(0, text=f"answer of {fake.agent_id}")
        await settle()
        for fake in fakes:
            assert [(r.message, r.text) for r in runtime.replies(fake.agent_id)] == [
                (msg(fake.agent_id, 0), f"answer of {fake.agent_id}")
            ]
            assert runtime.loop(fake.agent_id).cancelled_calls == []
            assert (
                len(runtime.conversations.history(fake.agent_id)) == 2 + 2 * rounds[fake.agent_id]
            )
        assert_sound(runtime, fakes)

    run(scenario)


@PROPERTY
@given(shape=round_shape, aid=agent_ids, prior=priors)
def test_property_11_tool_call_identification_and_cancellation(
    shape: tuple[int, int, int], aid: str, prior: list[int]
) -> None:
    """Feature: agent-concurrent-request-management, Property 11: Tool Call Identification and Cancellation."""

    async def scenario() -> None:
        runtime = AgentRuntime()
        fake = host_with_history(runtime, aid, prior)
        calls = await start_tool_round(runtime, fake, *shape)
        running = fake.open_tool()
        assert running is not None
        handler = runtime.loop(aid)
        assert handler.pending_tool_call() == running.call == calls[shape[2]]
        assert runtime.conversations.get_last_tool_call(aid) == running.call
        runtime.send(msg(aid, 99))
        await settle()
        assert running.released and running.cancelled
        assert handler.pending_tool_call() is None
        assert runtime.conversations.get_last_tool_call(aid) is None

    run(scenario)


@PROPERTY
@given(shape=round_shape, while_recording=st.booleans(), extra=st.integers(1, 5))
def test_property_12_fallback_queuing_for_completed_tool_calls(
    shape: tuple[int, int, int], while_recording: bool, extra: int
) -> None:
    """Feature: agent-concurrent-request-management, Property 12: Fallback Queuing for Completed Tool Calls."""

    async def scenario() -> None:
        runtime = AgentRuntime()
        fake = host(runtime, "a")
        await start_tool_round(runtime, fake, *shape)
        if while_recording:
            fake.recording_gate = asyncio.Event()
        completed = fake.finish_tool()
        if while_recording:
            await settle()
            assert runtime.loop("a").phase is Phase.RECORDING
        else:
            await asyncio.sleep(0)  # one step: the tool call finished, the loop not yet resumed
            assert runtime.loop("a").phase is Phase.TOOL
        late = [msg("a", 100 + n) for n in range(extra)]
        assert [runtime.send(m) for m in late] == [Delivery.QUEUED] * extra
        await settle()
        history = runtime.conversations.history("a")
        assert any(m.tool_call_id == completed.id for m in history)  # the result was kept
        await drain(runtime, [fake])
        assert [r.message for r in runtime.replies("a")] == [msg("a", 0), *late]

    run(scenario)


@PROPERTY
@given(steps=actions, agents=st.integers(1, 3))
def test_property_13_state_consistency_after_interruption(
    steps: list[tuple[str, int, int]], agents: int
) -> None:
    """Feature: agent-concurrent-request-management, Property 13: State Consistency After Interruption."""

    async def scenario() -> None:
        runtime, fakes, sent = await random_scenario(steps, agents)
        assert runtime.inconsistencies == []
        assert_no_loss(runtime, fakes, sent)

    run(scenario)


corruptions = st.sampled_from(
    ["ghost_active", "lost_active", "stray_queued", "orphan_result", "dangling_call"]
)


class _Errors(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@PROPERTY
@given(corruption=corruptions, steps=actions, via_send=st.booleans())
def test_property_14_error_detection_and_recovery(
    corruption: str, steps: list[tuple[str, int, int]], via_send: bool
) -> None:
    """Feature: agent-concurrent-request-management, Property 14: Error Detection and Recovery."""

    async def scenario() -> None:
        runtime, fakes, sent = await random_scenario(steps, 1)
        sent.append(msg("a0", 500).content)
        if corruption == "lost_active":
            runtime.send(msg("a0", 500))
            await settle()
            runtime.active.discard("a0")
        elif corruption == "ghost_active":
            runtime.active.add("a0")
        elif corruption == "stray_queued":
            runtime.bus.enqueue(msg("a0", 500))
        else:
            call = ToolCall("broken", "work", {})
            broken = (
                Message.tool_result(call, "orphan")
                if corruption == "orphan_result"
                else Message.assistant("", [call])
            )
            history = runtime.conversations.history("a0")
            runtime.conversations.replace("a0", [*history, broken])
        if corruption != "lost_active" and corruption != "stray_queued":
            sent.pop()
        errors = _Errors()
        logger = logging.getLogger("hubbub.sdk.runtime")
        logger.addHandler(errors)
        seen: list[tuple[str, list[str]]] = []
        runtime.on_inconsistency = lambda aid, problems: seen.append((aid, problems))
        try:
            if via_send:
                runtime.send(msg("a0", 600))
                sent.append(msg("a0", 600).content)
            else:
                runtime.check_consistency()
        finally:
            logger.removeHandler(errors)
        assert [aid for aid, _ in seen] == ["a0"]
        assert any("State inconsistency detected for agent a0" in m for m in errors.messages)
        await settle()
        assert runtime.inconsistencies_of("a0") == []
        await drain(runtime, fakes)
        assert_no_loss(runtime, fakes, sent)

    run(scenario)
