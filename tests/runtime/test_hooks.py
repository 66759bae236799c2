"""The hooks an Agent uses: on_input per message taken in, async on_reply/on_error, cancel()
(Aborted, waiting messages still delivered) and unregister()."""

from __future__ import annotations

from hubbub.llm.base import Message
from hubbub.sdk.runtime import AgentMessage, AgentRuntime, Delivery, check_history
from tests.runtime.harness import FakeAgent, msg, settle


def hosted(runtime: AgentRuntime, log: list[str]) -> FakeAgent:
    fake = FakeAgent("a")

    async def on_input(message: AgentMessage) -> None:
        log.append(f"input {message.id}")

    async def on_reply(message: AgentMessage, text: str) -> None:
        log.append(f"reply {message.id} {text}")

    async def on_error(message: AgentMessage, exc: BaseException) -> None:
        log.append(f"error {message.id} {type(exc).__name__}")

    runtime.register(
        "a", fake.model, fake.tool, on_input=on_input, on_reply=on_reply, on_error=on_error
    )
    return fake


async def test_on_input_is_awaited_for_each_message_taken_in() -> None:
    runtime = AgentRuntime()
    log: list[str] = []
    fake = hosted(runtime, log)
    assert runtime.send(msg("a", 0)) is Delivery.STARTED
    await settle()
    fake.answer(1)
    await settle()
    assert runtime.send(msg("a", 1)) is Delivery.INTERRUPTED
    await settle()
    fake.answer(0, text="answer")
    await settle()
    assert log == ["input a-m0", "input a-m1", "reply a-m0 answer"]
    check_history(runtime.conversations.history("a"))


async def test_cancel_aborts_the_message_and_the_next_one_is_still_processed() -> None:
    runtime = AgentRuntime(interrupts=False)
    log: list[str] = []
    fake = hosted(runtime, log)
    runtime.send(msg("a", 0))
    await settle()
    fake.answer(2)
    await settle()
    assert runtime.send(msg("a", 1)) is Delivery.QUEUED
    assert runtime.cancel("a")
    await settle()
    assert log == ["input a-m0", "error a-m0 Aborted", "input a-m1"]
    assert runtime.conversations.history("a") == [
        Message.user(msg("a", 0).content),
        Message.user(msg("a", 1).content),
    ]
    fake.answer(0)
    await settle()
    assert not runtime.cancel("a")  # idle: nothing to abandon
    assert runtime.inconsistencies == []


async def test_unregister_cancels_the_sequence_and_frees_the_id() -> None:
    runtime = AgentRuntime()
    fake = hosted(runtime, [])
    runtime.send(msg("a", 0))
    await settle()
    await runtime.unregister("a")
    assert fake.model_calls[0].cancelled and "a" not in runtime.active
    hosted(runtime, [])  # the id can be registered again
