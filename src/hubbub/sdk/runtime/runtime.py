"""The agent runtime: hosts agents in one process, one processing sequence per agent at most.

A message for an idle agent starts a sequence; one for an agent inside its tool-calling loop
interrupts it (the in-flight call is cancelled, the pending tool round is removed from the
history and the message is processed next); one that cannot interrupt (the tool call already
completed, or cannot be cancelled) waits in the agent's FIFO inbox. The guide is
``docs/runtime.md``.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

from hubbub.llm.base import ToolCall
from hubbub.sdk.runtime.active import ActiveSet
from hubbub.sdk.runtime.bus import (
    DEFAULT_MAX_QUEUE,
    AgentMessage,
    Delivery,
    MessageBus,
    UnknownAgent,
)
from hubbub.sdk.runtime.conversation import Conversations, history_problems
from hubbub.sdk.runtime.tool_loop import (
    DEFAULT_MAX_ROUNDS,
    Aborted,
    CancelOutcome,
    InputHook,
    ModelFn,
    Phase,
    ResultHook,
    ToolFn,
    ToolLoop,
)

log = logging.getLogger("hubbub.sdk.runtime")

T = TypeVar("T")

ReplyHook = Callable[[AgentMessage, str], Awaitable[None] | None]
"""Called (and awaited, if async) with the message a sequence started with and the final text."""
ErrorHook = Callable[[AgentMessage, BaseException], Awaitable[None] | None]
"""Called (and awaited, if async) when processing a message failed."""
InconsistencyHook = Callable[[str, list[str]], None]
"""Called with an agent id and the inconsistencies found (and repaired) for it."""


@dataclass(frozen=True)
class Reply:
    """The final answer of one processing sequence."""

    message: AgentMessage
    text: str


@dataclass
class _Hosted:
    loop: ToolLoop
    on_reply: ReplyHook | None
    on_error: ErrorHook | None = None
    task: asyncio.Task[None] | None = None
    retry_interrupt: bool = False
    replies: list[Reply] = field(default_factory=list)


def _always(_call: ToolCall) -> bool:
    return True


class AgentRuntime:
    """Message bus, active set, tool loops and conversations for many agents."""

    def __init__(
        self,
        *,
        max_queue: int = DEFAULT_MAX_QUEUE,
        interrupts: bool = True,
        on_error: ErrorHook | None = None,
        on_inconsistency: InconsistencyHook | None = None,
    ) -> None:
        self.bus = MessageBus(max_queue)
        self.active = ActiveSet()
        self.conversations = Conversations()
        self.interrupts = interrupts
        """``False``: never interrupt; every message for a busy agent waits in its inbox."""
        self.on_error = on_error
        self.on_inconsistency = on_inconsistency
        self.inconsistencies: list[tuple[str, list[str]]] = []
        """Every inconsistency detected and repaired, oldest first."""
        self.sequences_started = 0
        self._agents: dict[str, _Hosted] = {}
        self.bus.attach(self._route)

    # ------------------------------------------------------------------ hosting

    def register(
        self,
        agent_id: str,
        model: ModelFn,
        tools: ToolFn,
        *,
        cancellable: Callable[[ToolCall], bool] = _always,
        waiting: Callable[[], bool] | None = None,
        on_tool_result: ResultHook | None = None,
        on_input: InputHook | None = None,
        on_reply: ReplyHook | None = None,
        on_error: ErrorHook | None = None,
        max_rounds: int = DEFAULT_MAX_ROUNDS,
    ) -> ToolLoop:
        """Host ``agent_id`` with its model and tool executor; return its tool loop.

        ``on_input`` is awaited whenever a message becomes the agent's latest content (at the
        start of a sequence and for every interrupting message); ``on_error`` is this agent's
        own error hook (besides the runtime's); while ``waiting()`` is true (the tool call waits for
        an operator, a proposal) a new message is queued, never an interruption."""
        if agent_id in self._agents:
            raise ValueError(f"agent {agent_id!r} is already hosted by this runtime")
        loop = ToolLoop(
            agent_id,
            self.conversations,
            model,
            tools,
            cancellable=cancellable,
            waiting=waiting or (lambda: False),
            on_tool_result=on_tool_result,
            on_input=on_input,
            next_message=lambda: self._retried(agent_id),
            max_rounds=max_rounds,
        )
        self._agents[agent_id] = _Hosted(loop, on_reply, on_error)
        return loop

    async def unregister(self, agent_id: str) -> None:
        """Stop hosting ``agent_id``: its sequence is cancelled and waiting messages dropped."""
        hosted = self._agents.pop(agent_id, None)
        if hosted is None:
            return
        if hosted.task is not None:
            hosted.task.cancel()
            await asyncio.gather(hosted.task, return_exceptions=True)
        while self.bus.pop(agent_id) is not None:
            pass
        self.active.discard(agent_id)

    def cancel(self, agent_id: str) -> bool:
        """Abandon the message ``agent_id`` is processing (its error hook gets
        :class:`Aborted`); waiting messages are still delivered. ``False`` if it is idle."""
        return self._hosted(agent_id).loop.abort()

    def loop(self, agent_id: str) -> ToolLoop:
        """The tool loop of ``agent_id``."""
        return self._hosted(agent_id).loop

    def replies(self, agent_id: str) -> list[Reply]:
        """The final answers of ``agent_id``'s sequences, oldest first."""
        return list(self._hosted(agent_id).replies)

    def is_processing(self, agent_id: str) -> bool:
        """Whether a processing sequence of ``agent_id`` is running."""
        task = self._hosted(agent_id).task
        return task is not None and not task.done()

    # ------------------------------------------------------------------ sending

    def send(self, message: AgentMessage) -> Delivery:
        """Deliver ``message`` via the bus (raises :class:`QueueFull` or :class:`UnknownAgent`)."""
        return self.bus.send(message)

    def _route(self, message: AgentMessage) -> Delivery:
        hosted = self._hosted(message.agent_id)
        agent_id = message.agent_id
        self.check_consistency(agent_id)
        if agent_id not in self.active:
            if self.bus.size(agent_id):  # older messages first (FIFO)
                self.bus.enqueue(message)
                self._start(agent_id, None)
                return Delivery.QUEUED
            self._start(agent_id, message)
            return Delivery.STARTED
        if self.interrupts:
            outcome = hosted.loop.interrupt(message)
            if outcome is CancelOutcome.CANCELLED:
                log.info("%s: message %s interrupts the current processing", agent_id, message.id)
                return Delivery.INTERRUPTED
            self.bus.enqueue(message)
            if outcome is CancelOutcome.WAITING:
                log.info("%s: waits for an operator; queuing message %s", agent_id, message.id)
            elif outcome is CancelOutcome.FAILED:
                log.warning("Failed to cancel tool call, queuing message %s", message.id)
                hosted.retry_interrupt = True
            else:
                log.info("Tool call already completed, queuing message %s", message.id)
            return Delivery.QUEUED
        self.bus.enqueue(message)
        return Delivery.QUEUED

    def _retried(self, agent_id: str) -> AgentMessage | None:
        hosted = self._agents[agent_id]
        if not hosted.retry_interrupt:
            return None
        hosted.retry_interrupt = False
        return self.bus.pop(agent_id)

    # ------------------------------------------------------------------ processing

    def _start(self, agent_id: str, first: AgentMessage | None) -> None:
        hosted = self._agents[agent_id]
        if not self.active.add(agent_id):
            raise RuntimeError(f"agent {agent_id!r} already has an active processing sequence")
        self.sequences_started += 1
        hosted.task = asyncio.get_running_loop().create_task(
            self._drive(agent_id, first), name=f"hubbub-runtime-{agent_id}"
        )

    async def _drive(self, agent_id: str, first: AgentMessage | None) -> None:
        hosted = self._agents[agent_id]
        message = first if first is not None else self.bus.pop(agent_id)
        try:
            while message is not None:
                try:
                    text = await hosted.loop.process(message)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    if isinstance(exc, Aborted):
                        log.info("%s: processing of message %s abandoned", agent_id, message.id)
                    else:
                        log.exception("%s: processing message %s failed", agent_id, message.id)
                    for on_error in (self.on_error, hosted.on_error):
                        if on_error is not None:
                            await _call(on_error, message, exc)
                else:
                    reply = Reply(message, text)
                    hosted.replies.append(reply)
                    if hosted.on_reply is not None:
                        await _call(hosted.on_reply, message, text)
                finally:
                    self._requeue_orphans(hosted)
                hosted.retry_interrupt = False
                message = self.bus.pop(agent_id)
        finally:
            if hosted.task is asyncio.current_task() and self._agents.get(agent_id) is hosted:
                self.active.discard(agent_id)
                hosted.task = None

    def _requeue_orphans(self, hosted: _Hosted) -> None:
        orphans, hosted.loop.orphaned = hosted.loop.orphaned, []
        for message in reversed(orphans):
            self.bus.requeue(message)

    async def idle(self) -> None:
        """Return once no agent is processing and no message waits (tests, shutdown)."""
        while True:
            tasks = [h.task for h in self._agents.values() if h.task is not None]
            if not tasks:
                return
            await asyncio.gather(*tasks, return_exceptions=True)

    async def aclose(self) -> None:
        """Cancel every processing sequence (waiting messages stay in the inboxes)."""
        tasks = [h.task for h in self._agents.values() if h.task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    # ------------------------------------------------------------------ consistency

    def inconsistencies_of(self, agent_id: str) -> list[str]:
        """What is inconsistent about ``agent_id`` now (empty when consistent)."""
        hosted = self._hosted(agent_id)
        running = hosted.task is not None and not hosted.task.done()
        active = agent_id in self.active
        found: list[str] = []
        if active and not running:
            found.append("marked active but no processing sequence is running")
        if running and not active:
            found.append("a processing sequence is running but the agent is not marked active")
        if not running and hosted.loop.phase is not Phase.IDLE:
            found.append(f"tool loop in phase {hosted.loop.phase.value} with no sequence")
        if not running and self.bus.size(agent_id):
            found.append(f"{self.bus.size(agent_id)} message(s) waiting with no sequence")
        if not running:  # a running sequence's history is checked when it ends
            found.extend(history_problems(self.conversations.history(agent_id)))
        return found

    def check_consistency(self, agent_id: str | None = None) -> dict[str, list[str]]:
        """Detect, log and repair inconsistencies (of one agent or all); return what was found.

        Repair never drops a message: the agent is marked as it really is, an orphaned tool loop
        is reset, the history loses only broken tool-call rounds, and waiting messages are
        delivered by a new sequence.
        """
        ids = [agent_id] if agent_id is not None else list(self._agents)
        found: dict[str, list[str]] = {}
        for aid in ids:
            problems = self.inconsistencies_of(aid)
            if problems:
                log.error("State inconsistency detected for agent %s: %s", aid, "; ".join(problems))
                self._recover(aid)
                found[aid] = problems
                self.inconsistencies.append((aid, problems))
                if self.on_inconsistency is not None:
                    self.on_inconsistency(aid, problems)
        return found

    def _recover(self, agent_id: str) -> None:
        hosted = self._agents[agent_id]
        running = hosted.task is not None and not hosted.task.done()
        if running:
            self.active.add(agent_id)
        else:
            self.active.discard(agent_id)
            hosted.task = None
            hosted.loop.reset()
            removed = self.conversations.repair(agent_id)
            if removed:
                log.warning("%s: removed %d broken history message(s)", agent_id, len(removed))
            if self.bus.size(agent_id):
                self._start(agent_id, None)

    def _hosted(self, agent_id: str) -> _Hosted:
        try:
            return self._agents[agent_id]
        except KeyError:
            raise UnknownAgent(f"no agent {agent_id!r} is hosted by this runtime") from None


async def _call(
    hook: Callable[[AgentMessage, T], Awaitable[None] | None], message: AgentMessage, arg: T
) -> None:
    """Run a reply or error hook (awaited if async); a failing hook is logged, not raised."""
    try:
        result = hook(message, arg)
        if inspect.isawaitable(result):
            await result
    except Exception:
        log.exception("%s: a hook failed for message %s", message.agent_id, message.id)


__all__ = ["AgentRuntime", "ErrorHook", "InconsistencyHook", "Reply", "ReplyHook"]
