"""One agent's tool-calling loop (document 002's LlmHandler), run so that a new message can
interrupt it.

The loop calls the model, records its answer, runs every tool call and records each result,
until the model answers without tool calls. Each model call and each tool execution runs as
a child task: that is the *interruptible* phase, and :meth:`ToolLoop.interrupt` cancels the
child (a provider closes its HTTP request at once). Between a tool's completion and the end
of recording its result the loop is in the *non-interruptible* phase: the call already
happened, so an arriving message must wait in the queue instead.
"""

from __future__ import annotations

import asyncio
import enum
import inspect
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final, TypeVar

from hubbub.errors import HubbubError
from hubbub.llm.base import Completion, Message, ToolCall
from hubbub.sdk.runtime.bus import AgentMessage
from hubbub.sdk.runtime.conversation import Conversations

log = logging.getLogger("hubbub.sdk.runtime")

T = TypeVar("T")

ModelFn = Callable[[Sequence[Message]], Awaitable[Completion]]
"""Answer a history (the model call; cancellable)."""
ToolFn = Callable[[ToolCall], Awaitable[Message]]
"""Execute one tool call and return its ``tool`` result message (cancellable)."""
ResultHook = Callable[[ToolCall, Message], Awaitable[None]]
"""Awaited after a result is recorded (reporting it); part of the non-interruptible phase."""
InputHook = Callable[[AgentMessage], Awaitable[None]]
"""Awaited when a message becomes the latest content (a new turn starts); not interruptible."""
NextMessage = Callable[[], AgentMessage | None]
"""Asked before each model call: a message to take in now (a retried interruption)."""

DEFAULT_MAX_ROUNDS: Final = 10


class Phase(enum.Enum):
    """Where the loop is."""

    IDLE = "idle"
    MODEL = "model"
    """Awaiting the model (interruptible)."""
    TOOL = "tool"
    """Awaiting a tool call (interruptible if the tool is cancellable)."""
    RECORDING = "recording"
    """A tool call completed and its result is being recorded (not interruptible)."""


class CancelOutcome(enum.Enum):
    """The answer of :meth:`ToolLoop.interrupt`."""

    CANCELLED = "cancelled"
    """The in-flight call was cancelled; the message is processed next."""
    ALREADY_COMPLETED = "already_completed"
    """The call had already completed (or its result is being recorded): queue the message."""
    FAILED = "failed"
    """The call cannot be cancelled (a non-cancellable tool): queue, retry next cycle."""
    NOT_RUNNING = "not_running"
    """No sequence is running."""
    WAITING = "waiting"
    """The call waits for an operator (a proposal): queue the message behind the turn; the
    proposal is not withdrawn by whatever else arrives."""


class Aborted(HubbubError):
    """The processing of a message was abandoned (:meth:`ToolLoop.abort`)."""


class _Interrupted(Exception):
    """Internal: the child call was cancelled by an interruption."""


def _always(_call: ToolCall) -> bool:
    return True


def _never() -> bool:
    return False


class ToolLoop:
    """Runs the tool-calling loop of one agent over its :class:`Conversations` history."""

    def __init__(
        self,
        agent_id: str,
        conversation: Conversations,
        model: ModelFn,
        tools: ToolFn,
        *,
        cancellable: Callable[[ToolCall], bool] = _always,
        waiting: Callable[[], bool] = _never,
        on_tool_result: ResultHook | None = None,
        on_input: InputHook | None = None,
        next_message: NextMessage | None = None,
        max_rounds: int = DEFAULT_MAX_ROUNDS,
    ) -> None:
        self.agent_id = agent_id
        self.conversation = conversation
        self.model = model
        self.tools = tools
        self.cancellable = cancellable
        self.waiting = waiting
        """Whether the call in flight waits for an operator (it is then not interrupted)."""
        self.on_tool_result = on_tool_result
        self.on_input = on_input
        self.next_message = next_message
        self.max_rounds = max_rounds
        self.phase = Phase.IDLE
        self.current_call: ToolCall | None = None
        """The tool call being executed (``TOOL`` phase) or recorded (``RECORDING``)."""
        self.cancelled_calls: list[ToolCall] = []
        """Tool calls removed by interruptions, oldest first (for inspection and logs)."""
        self.orphaned: list[AgentMessage] = []
        """Interrupting messages accepted but not taken in (the sequence died first)."""
        self._child: asyncio.Future[Any] | None = None
        self._interrupts: list[AgentMessage] = []
        self._aborted = False

    # ------------------------------------------------------------------ public

    def pending_tool_call(self) -> ToolCall | None:
        """The tool call in flight (``detectPendingToolCall``), if any."""
        return self.current_call if self.phase is Phase.TOOL else None

    def interrupt(self, message: AgentMessage) -> CancelOutcome:
        """Cancel the in-flight model or tool call so ``message`` is processed next."""
        child = self._child
        if self.phase is Phase.IDLE:
            return CancelOutcome.NOT_RUNNING
        if self.phase is Phase.RECORDING or child is None or child.done():
            return CancelOutcome.ALREADY_COMPLETED
        call = self.current_call
        if self.phase is Phase.TOOL and self.waiting():
            return CancelOutcome.WAITING
        if self.phase is Phase.TOOL and call is not None and not self.cancellable(call):
            return CancelOutcome.FAILED
        if not child.cancel():
            return CancelOutcome.ALREADY_COMPLETED
        self._interrupts.append(message)
        return CancelOutcome.CANCELLED

    def abort(self) -> bool:
        """Abandon the message being processed: cancel the in-flight call, roll back its
        pending tool round and end :meth:`process` with :class:`Aborted`. ``False`` when
        nothing is being processed."""
        if self.phase is Phase.IDLE:
            return False
        self._aborted = True
        if self._child is not None and not self._child.done():
            self._child.cancel()
        return True

    def reset(self) -> None:
        """Forget any in-flight state (state recovery after the sequence died)."""
        if self._child is not None and not self._child.done():
            self._child.cancel()
        self._child = None
        self._interrupts.clear()
        self.phase = Phase.IDLE
        self.current_call = None

    async def process(self, message: AgentMessage) -> str:
        """Answer ``message`` (and any message that interrupts it); return the final text."""
        self.conversation.append(self.agent_id, Message.user(message.content))
        try:
            await self._took_in([message])
            return await self._loop()
        finally:
            self._aborted = False
            if self.conversation.has_checkpoint(self.agent_id):
                self.conversation.rollback_pending_tool_calls(self.agent_id)
            self.orphaned.extend(self._interrupts)  # the runtime queues them again
            self._interrupts.clear()
            self.phase = Phase.IDLE
            self.current_call = None

    # ------------------------------------------------------------------ the loop

    async def _loop(self) -> str:
        rounds = 0
        while True:
            if self.next_message is not None:
                taken = self.next_message()
                if taken is not None:
                    log.info(
                        "%s: taking in message %s (retried interruption)", self.agent_id, taken.id
                    )
                    self.conversation.append(self.agent_id, Message.user(taken.content))
                    rounds = 0
                    await self._took_in([taken])
            try:
                history = self.conversation.history(self.agent_id)
                completion = await self._child_call(Phase.MODEL, None, self.model(history))
                if rounds >= self.max_rounds and completion.tool_calls:
                    log.warning(
                        "%s: %d tool rounds; ignoring more tool calls", self.agent_id, rounds
                    )
                    completion = Completion(completion.text)
                self.phase = Phase.RECORDING
                if not completion.tool_calls:
                    self.conversation.append(self.agent_id, Message.assistant(completion.text))
                    return completion.text.strip()
                rounds += 1
                self.conversation.checkpoint(self.agent_id)
                self.conversation.append(self.agent_id, completion.message())
                for call in completion.tool_calls:
                    result = await self._child_call(Phase.TOOL, call, self.tools(call))
                    self.phase = Phase.RECORDING
                    self.conversation.append(self.agent_id, result)
                    if self.on_tool_result is not None:
                        await self.on_tool_result(call, result)
                self.conversation.commit(self.agent_id)
                self.current_call = None
            except _Interrupted:
                rounds = 0
                await self._took_in(self._take_interrupts())

    async def _took_in(self, messages: list[AgentMessage]) -> None:
        """Tell ``on_input`` about each message taken in (not interruptible: it queues)."""
        if self.on_input is None:
            return
        self.phase = Phase.RECORDING
        for message in messages:
            await self.on_input(message)

    async def _child_call(self, phase: Phase, call: ToolCall | None, work: Awaitable[T]) -> T:
        if self._aborted:
            _close(work)
            raise Aborted(f"{self.agent_id}: processing abandoned")
        child: asyncio.Future[T] = asyncio.ensure_future(_wrap(work))
        self._child = child
        self.phase = phase
        self.current_call = call
        try:
            result = await child
        except asyncio.CancelledError:
            me = asyncio.current_task()
            if self._aborted and not (me is not None and me.cancelling()):
                raise Aborted(f"{self.agent_id}: processing abandoned") from None
            if not self._interrupts or (me is not None and me.cancelling()):
                raise
            raise _Interrupted from None
        finally:
            self._child = None
            _close(work)  # cancelled before it started: never awaited
        if self._interrupts:  # the call ignored its cancellation: the interruption still wins
            raise _Interrupted
        return result

    def _take_interrupts(self) -> list[AgentMessage]:
        pending = self.current_call if self.phase is Phase.TOOL else None
        removed = self.conversation.rollback_pending_tool_calls(self.agent_id)
        for gone in removed:
            self.cancelled_calls.extend(gone.tool_calls)
        self.current_call = None
        messages, self._interrupts = self._interrupts, []
        for message in messages:
            self.conversation.append(self.agent_id, Message.user(message.content))
        log.info(
            "%s: interrupted%s by %s; removed %d history message(s)",
            self.agent_id,
            f" during tool call {pending.id}" if pending else "",
            ", ".join(m.id for m in messages),
            len(removed),
        )
        return messages


async def _wrap(work: Awaitable[T]) -> T:
    return await work


def _close(work: Awaitable[Any]) -> None:
    """Close ``work`` if it is a coroutine that never started (no "never awaited" warning)."""
    if inspect.iscoroutine(work) and inspect.getcoroutinestate(work) == inspect.CORO_CREATED:
        work.close()


__all__ = [
    "DEFAULT_MAX_ROUNDS",
    "Aborted",
    "CancelOutcome",
    "InputHook",
    "ModelFn",
    "NextMessage",
    "Phase",
    "ResultHook",
    "ToolFn",
    "ToolLoop",
]
