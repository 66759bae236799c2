"""The error scenarios of document 002, one unit test (or more) each."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence

import pytest

from hubbub.llm.base import Completion, Message, ToolCall
from hubbub.sdk.runtime import (
    DEFAULT_MAX_QUEUE,
    AgentMessage,
    AgentRuntime,
    Delivery,
    MessageBus,
    Phase,
    QueueFull,
    UnknownAgent,
    check_history,
)
from tests.runtime.harness import assert_sound, drain, host, msg, settle, user_contents


async def test_scenario_1_tool_call_already_completed_queues_the_message(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="hubbub.sdk.runtime")
    runtime = AgentRuntime()
    fake = host(runtime, "a")
    runtime.send(msg("a", 0))
    await settle()
    fake.answer(1)
    await settle()
    done = fake.finish_tool()
    await asyncio.sleep(0)  # the tool call finished; the loop has not recorded it yet
    assert runtime.send(msg("a", 1)) is Delivery.QUEUED
    assert "Tool call already completed, queuing message" in caplog.text
    await settle()
    assert any(m.tool_call_id == done.id for m in runtime.conversations.history("a"))
    await drain(runtime, [fake])
    assert [r.message for r in runtime.replies("a")] == [msg("a", 0), msg("a", 1)]


async def test_scenario_2_history_corruption_removes_what_is_there(
    caplog: pytest.LogCaptureFixture,
) -> None:
    runtime = AgentRuntime()
    fake = host(runtime, "a")
    runtime.send(msg("a", 0))
    await settle()
    calls = fake.answer(2)
    await settle()
    fake.finish_tool()
    await settle()
    # someone removed the pending assistant message: only the partial result is left
    conversations = runtime.conversations
    assert conversations.remove_tool_call_entry("a", calls[0].id)
    assert runtime.send(msg("a", 1)) is Delivery.INTERRUPTED
    await settle()
    assert "Tool call reference not found in history" in caplog.text
    history = conversations.history("a")
    check_history(history)
    assert user_contents(runtime, "a") == [msg("a", 0).content, msg("a", 1).content]
    assert not conversations.remove_tool_response_entry("a", "nope")
    assert not conversations.remove_tool_call_entry("a", "nope")
    await drain(runtime, [fake])


async def test_scenario_3_state_inconsistency_is_logged_and_repaired_without_loss(
    caplog: pytest.LogCaptureFixture,
) -> None:
    runtime = AgentRuntime()
    fake = host(runtime, "a")
    runtime.active.add("a")  # marked active, but nothing runs
    runtime.bus.enqueue(msg("a", 0))  # and a message waits with no sequence to deliver it
    found = runtime.check_consistency()
    assert "State inconsistency detected for agent a" in caplog.text
    assert "marked active but no processing sequence is running" in found["a"]
    assert runtime.is_processing("a")  # the waiting message is being delivered
    await drain(runtime, [fake])
    assert [r.message for r in runtime.replies("a")] == [msg("a", 0)]
    assert runtime.inconsistencies == [("a", found["a"])]


async def test_scenario_3_a_running_sequence_missing_from_the_active_set_is_readded() -> None:
    runtime = AgentRuntime()
    fake = host(runtime, "a")
    runtime.send(msg("a", 0))
    await settle()
    runtime.active.discard("a")
    # without the check, this would start a second sequence for the agent
    assert runtime.send(msg("a", 1)) is Delivery.INTERRUPTED
    assert runtime.sequences_started == 1
    assert "a" in runtime.active
    await drain(runtime, [fake])


async def test_scenario_4_a_full_queue_rejects_and_tells_the_sender(
    caplog: pytest.LogCaptureFixture,
) -> None:
    assert MessageBus().max_queue == DEFAULT_MAX_QUEUE == 100
    runtime = AgentRuntime(max_queue=3, interrupts=False)
    fake = host(runtime, "a")
    runtime.send(msg("a", 0))
    for n in (1, 2, 3):
        assert runtime.send(msg("a", n)) is Delivery.QUEUED
    with pytest.raises(QueueFull) as raised:
        runtime.send(msg("a", 4))
    assert raised.value.message == msg("a", 4) and raised.value.limit == 3
    assert str(raised.value) == (
        "message a-m4 from user rejected: the inbox of agent 'a' is full "
        "(3 messages waiting); retry later"
    )
    assert "Message queue full for agent a" in caplog.text
    assert runtime.bus.pending("a") == (msg("a", 1), msg("a", 2), msg("a", 3))
    await drain(runtime, [fake])
    assert len(runtime.replies("a")) == 4


async def test_scenario_4_an_interrupting_message_needs_no_queue_slot() -> None:
    runtime = AgentRuntime(max_queue=1)
    fake = host(runtime, "a", gated=True)
    runtime.send(msg("a", 0))
    await settle()
    fake.answer(1)
    await settle()
    fake.finish_tool()
    await settle()
    assert runtime.send(msg("a", 1)) is Delivery.QUEUED  # recording: not interruptible
    with pytest.raises(QueueFull):
        runtime.send(msg("a", 2))
    assert fake.recording_gate is not None
    fake.recording_gate.set()
    await settle()
    assert runtime.send(msg("a", 3)) is Delivery.INTERRUPTED  # the model call is cancellable
    await drain(runtime, [fake])


async def test_scenario_5_a_tool_that_cannot_be_cancelled_queues_and_retries_next_cycle(
    caplog: pytest.LogCaptureFixture,
) -> None:
    runtime = AgentRuntime()
    fake = host(runtime, "b")  # an ordinary agent next to it
    stubborn = host(runtime, "s")
    runtime.loop("s").cancellable = lambda call: False
    runtime.send(msg("s", 0))
    await settle()
    fake_done = stubborn.answer(1)
    await settle()
    assert runtime.send(msg("s", 1)) is Delivery.QUEUED
    assert "Failed to cancel tool call, queuing message" in caplog.text
    assert runtime.loop("s").phase is Phase.TOOL  # still running
    stubborn.finish_tool()
    await settle()
    # next cycle: the queued message is taken in before the next model call
    pending = stubborn.open_model()
    assert pending is not None and pending.history[-1] == Message.user(msg("s", 1).content)
    assert any(m.tool_call_id == fake_done[0].id for m in pending.history)  # completed: kept
    assert runtime.bus.size("s") == 0
    await drain(runtime, [fake, stubborn])
    assert [r.message for r in runtime.replies("s")] == [msg("s", 0)]


async def test_a_model_error_is_reported_and_the_next_message_still_processed() -> None:
    errors: list[tuple[AgentMessage, BaseException]] = []
    runtime = AgentRuntime(interrupts=False, on_error=lambda m, e: errors.append((m, e)))
    fake = host(runtime, "a")
    runtime.send(msg("a", 0))
    runtime.send(msg("a", 1))
    await settle()
    pending = fake.open_model()
    assert pending is not None
    pending.future.set_exception(RuntimeError("provider down"))
    await drain(runtime, [fake])
    assert [(m, str(e)) for m, e in errors] == [(msg("a", 0), "provider down")]
    assert [r.message for r in runtime.replies("a")] == [msg("a", 1)]


async def test_unknown_agents_and_double_registration_are_refused() -> None:
    runtime = AgentRuntime()
    host(runtime, "a")
    with pytest.raises(UnknownAgent, match="no agent 'x' is hosted by this runtime"):
        runtime.send(msg("x", 0))
    with pytest.raises(ValueError, match="already hosted"):
        host(runtime, "a")
    with pytest.raises(ValueError, match="at least 1"):
        MessageBus(0)


async def test_close_cancels_sequences_and_keeps_the_history_valid() -> None:
    runtime = AgentRuntime()
    fake = host(runtime, "a")
    runtime.send(msg("a", 0))
    await settle()
    fake.answer(2)
    await settle()
    await runtime.aclose()
    check_history(runtime.conversations.history("a"))
    assert_sound(runtime, [fake])


async def test_a_tool_that_ignores_cancellation_is_still_interrupted() -> None:
    release = asyncio.Event()

    async def model(history: Sequence[Message]) -> Completion:
        if history[-1].role == "user" and history[-1].content == "go":
            return Completion("", (ToolCall("c1", "slow", {}),))
        return Completion("fine")

    async def tool(call: ToolCall) -> Message:
        with contextlib.suppress(asyncio.CancelledError):  # a badly behaved tool: swallows it
            await release.wait()
        return Message.tool_result(call, "late")

    runtime = AgentRuntime()
    runtime.register("a", model, tool)
    runtime.send(AgentMessage("a", "go"))
    await settle()
    assert runtime.send(AgentMessage("a", "stop")) is Delivery.INTERRUPTED
    await runtime.idle()
    history = runtime.conversations.history("a")
    assert history == [Message.user("go"), Message.user("stop"), Message.assistant("fine")]
