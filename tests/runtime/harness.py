"""A fake model and fake tools whose every call waits for the test (no wall-clock time)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field

from hubbub.llm.base import Completion, Message, ToolCall
from hubbub.sdk.runtime import AgentMessage, AgentRuntime, Phase, check_history


async def settle(rounds: int = 30) -> None:
    """Let every ready task run (event-loop yields only; no sleeping)."""
    for _ in range(rounds):
        await asyncio.sleep(0)


@dataclass
class Pending:
    """One model call or tool execution, waiting for the test to finish it."""

    history: list[Message]
    call: ToolCall | None
    future: asyncio.Future[object]
    cancelled: bool = False
    released: bool = False
    """Its ``finally`` ran (the resources it held were released)."""

    @property
    def open(self) -> bool:
        return not self.future.done() and not self.cancelled


@dataclass
class FakeAgent:
    """A fake model and fake tools for one agent, driven step by step by the test."""

    agent_id: str
    model_calls: list[Pending] = field(default_factory=list)
    tool_runs: list[Pending] = field(default_factory=list)
    recording_gate: asyncio.Event | None = None
    """When set, recording each tool result waits for this event (non-interruptible phase)."""
    counter: int = 0

    async def model(self, history: Sequence[Message]) -> Completion:
        return await self._wait(self.model_calls, list(history), None)  # type: ignore[return-value]

    async def tool(self, call: ToolCall) -> Message:
        return await self._wait(self.tool_runs, [], call)  # type: ignore[return-value]

    async def on_tool_result(self, call: ToolCall, result: Message) -> None:
        if self.recording_gate is not None:
            await self.recording_gate.wait()

    async def _wait(
        self, into: list[Pending], history: list[Message], call: ToolCall | None
    ) -> object:
        pending = Pending(history, call, asyncio.get_running_loop().create_future())
        into.append(pending)
        try:
            return await pending.future
        except asyncio.CancelledError:
            pending.cancelled = True
            raise
        finally:
            pending.released = True

    def open_model(self) -> Pending | None:
        return next((p for p in self.model_calls if p.open), None)

    def open_tool(self) -> Pending | None:
        return next((p for p in self.tool_runs if p.open), None)

    def answer(self, tool_calls: int = 0, text: str = "done") -> list[ToolCall]:
        """Finish the open model call: ``tool_calls`` calls, or a final ``text`` if 0."""
        pending = self.open_model()
        assert pending is not None, f"{self.agent_id} has no open model call"
        calls = []
        for _ in range(tool_calls):
            self.counter += 1
            calls.append(ToolCall(f"{self.agent_id}-c{self.counter}", "work", {}))
        pending.future.set_result(Completion(text if not calls else "", tuple(calls)))
        return calls

    def finish_tool(self, content: str = "ok") -> ToolCall:
        """Finish the open tool execution with ``content``."""
        pending = self.open_tool()
        assert pending is not None and pending.call is not None, "no open tool call"
        pending.future.set_result(Message.tool_result(pending.call, content))
        return pending.call


def host(runtime: AgentRuntime, agent_id: str, *, gated: bool = False) -> FakeAgent:
    """Register a fake agent with ``runtime``."""
    fake = FakeAgent(agent_id, recording_gate=asyncio.Event() if gated else None)
    runtime.register(agent_id, fake.model, fake.tool, on_tool_result=fake.on_tool_result)
    return fake


def msg(agent_id: str, n: int) -> AgentMessage:
    """A message with unique content."""
    return AgentMessage(agent_id, f"{agent_id} message {n}", id=f"{agent_id}-m{n}")


def assert_sound(runtime: AgentRuntime, fakes: Sequence[FakeAgent]) -> None:
    """The invariants checked after every step: valid histories, consistent state, one sequence."""
    for fake in fakes:
        aid = fake.agent_id
        running = runtime.is_processing(aid)
        check_history(runtime.conversations.history(aid), allow_pending=running)
        assert runtime.inconsistencies_of(aid) == [], runtime.inconsistencies_of(aid)
        assert (aid in runtime.active) == running
        open_calls = [p for p in fake.model_calls + fake.tool_runs if p.open]
        assert len(open_calls) <= 1, "two calls in flight for one agent"
        if not running:
            assert runtime.loop(aid).phase is Phase.IDLE
            assert runtime.bus.size(aid) == 0


async def drain(runtime: AgentRuntime, fakes: Sequence[FakeAgent], limit: int = 500) -> None:
    """Answer everything until every agent is idle, checking invariants after every step."""
    for _ in range(limit):
        await settle()
        assert_sound(runtime, fakes)
        progressed = False
        for fake in fakes:
            if fake.recording_gate is not None:
                fake.recording_gate.set()
            if fake.open_tool() is not None:
                fake.finish_tool()
                progressed = True
            elif fake.open_model() is not None:
                fake.answer(0)
                progressed = True
        if not progressed and not any(runtime.is_processing(f.agent_id) for f in fakes):
            return
    raise AssertionError("the runtime did not become idle")


def user_contents(runtime: AgentRuntime, agent_id: str) -> list[str]:
    """The contents of the user messages in the history of ``agent_id``, in order."""
    return [m.content for m in runtime.conversations.history(agent_id) if m.role == "user"]


def prior_history(agent_id: str, rounds: Sequence[int]) -> list[Message]:
    """A valid earlier conversation: one exchange per item, each with that many tool calls."""
    history: list[Message] = []
    for n, calls in enumerate(rounds):
        history.append(Message.user(f"{agent_id} earlier question {n}"))
        if calls:
            made = [ToolCall(f"{agent_id}-prior-{n}-{k}", "work", {"k": k}) for k in range(calls)]
            history.append(Message.assistant("", made))
            history.extend(Message.tool_result(c, f"earlier result {c.id}") for c in made)
        history.append(Message.assistant(f"earlier answer {n}"))
    check_history(history)
    return history


def host_with_history(
    runtime: AgentRuntime, agent_id: str, rounds: Sequence[int], *, gated: bool = False
) -> FakeAgent:
    """:func:`host` an agent whose conversation already holds :func:`prior_history`."""
    fake = host(runtime, agent_id, gated=gated)
    runtime.conversations.replace(agent_id, prior_history(agent_id, rounds))
    return fake
