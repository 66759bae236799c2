"""The agent's reasoning loop (document 003, layer 3, "ReAct Loop"), independent of the wire.

One turn answers one message. With ``reasoning_enabled`` (ReAct), each iteration is one model
call with the tools offered: the model's text is the *thought*, its tool calls the *actions*;
every call is executed and its result (the *observation*) appended before the next iteration;
an answer without tool calls ends the turn. The first call gets the ``reason`` prompt, later
ones the ``act`` prompt; when ``max_iterations`` runs out, one last call with the ``respond``
prompt writes the answer. Without reasoning (models that reason internally) the same loop
runs with the system prompt alone and reports no thoughts.

The loop owns the conversation history (neutral :class:`~hubbub.llm.Message` items, where every
assistant tool call is followed by its result) and has one method per model call
(:meth:`ReActLoop.call_model`) and one per tool execution (:meth:`ReActLoop.execute_tool`):
the seams where a runtime can interrupt a turn.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from hubbub.llm.base import ChatModel, Completion, Message, ToolCall, ToolSpec
from hubbub.llm.offline import fill
from hubbub.protocol.envelope import Envelope
from hubbub.sdk.agent_config import DEFAULT_SYSTEM_PROMPT, Prompts

log = logging.getLogger("hubbub.sdk.react")


class ToolRunner(Protocol):
    """What the loop needs to offer and run tools (the agent implements it)."""

    def specs(self) -> list[ToolSpec]:
        """The tools to offer the model now."""

    def label(self, provider_name: str) -> str:
        """How people name a tool the model called (``calculator/multiply``)."""

    async def run(self, turn: Turn, call: ToolCall) -> Message:
        """Execute one call; return its ``tool`` result message (never raises for tool errors)."""


@dataclass
class Turn:
    """One message being answered."""

    trigger: Envelope
    input: str
    """The message as the model sees it: ``sender: text``."""
    reasoning_id: str | None = None
    """Id of this turn's ``reasoning/start`` (the ``context`` of its reasoning events)."""
    actions: list[str] = field(default_factory=list)
    """``participant/tool`` of every tool called, in order."""
    iterations: int = 0
    cancelled_by: str | None = None
    """Who sent the ``reasoning/cancel`` that stopped this turn, if anyone did."""


ThoughtSink = Callable[[Turn, dict[str, Any]], Awaitable[None]]


async def _no_thoughts(turn: Turn, payload: dict[str, Any]) -> None:
    return None


class ReActLoop:
    """The reason-act-observe loop of one agent, with its conversation history."""

    def __init__(
        self,
        model: ChatModel,
        tools: ToolRunner,
        *,
        name: str,
        system_prompt: str | None = None,
        prompts: Prompts | None = None,
        max_iterations: int = 5,
        reasoning_enabled: bool = True,
        history_limit: int = 60,
        on_thought: ThoughtSink = _no_thoughts,
    ) -> None:
        self.model = model
        self.tools = tools
        self.name = name
        self.prompts = prompts or Prompts()
        self.system_prompt = self.prompts.system or system_prompt or DEFAULT_SYSTEM_PROMPT
        self.max_iterations = max_iterations
        self.reasoning_enabled = reasoning_enabled
        self.history_limit = history_limit
        self.on_thought = on_thought
        self.history: list[Message] = []
        """The conversation so far (system prompts are not stored; they are built per call)."""

    # ------------------------------------------------------------------ the loop

    async def run(self, turn: Turn) -> str:
        """Answer ``turn``; return the final text (may be empty).

        If the turn is cancelled or fails, tool calls left without a result get one saying
        so, so the history stays a valid conversation for the next turn.
        """
        self._trim()
        self.history.append(Message.user(turn.input))
        try:
            return await self._iterate(turn)
        except BaseException:
            self._close_open_calls()
            raise

    async def _iterate(self, turn: Turn) -> str:
        observations: list[str] = []
        for iteration in range(1, self.max_iterations + 1):
            turn.iterations = iteration
            specs = self.tools.specs()
            instruction = None
            if self.reasoning_enabled:
                template = self.prompts.reason if iteration == 1 else self.prompts.act
                instruction = self._fill(template, turn, specs, observations)
            completion = await self.call_model(self._messages(instruction, specs), specs)
            self.history.append(completion.message())
            if not completion.tool_calls:
                return completion.text.strip()
            if self.reasoning_enabled:
                await self.on_thought(turn, self._thought(completion))
            for call in completion.tool_calls:  # every call of the turn, in order
                result = await self.execute_tool(turn, call)
                self.history.append(result)
                label = self.tools.label(call.name)
                observations.append(f"{label}: {result.content}")
                if self.reasoning_enabled:
                    await self.on_thought(turn, self._observation(label, result))
        # out of iterations: one last call asks for the answer from what was observed
        specs = self.tools.specs()
        instruction = self._fill(self.prompts.respond, turn, specs, observations)
        completion = await self.call_model(self._messages(instruction, specs), specs)
        self.history.append(Message.assistant(completion.text))  # further calls are dropped
        return completion.text.strip()

    async def call_model(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> Completion:
        """One model call (cancellable: the provider closes its request at once)."""
        completion = await self.model.complete(messages, tools)
        log.debug(
            "%s: model answered %d chars and %d tool call(s)",
            self.name,
            len(completion.text),
            len(completion.tool_calls),
        )
        return completion

    async def execute_tool(self, turn: Turn, call: ToolCall) -> Message:
        """One tool execution; its result message (tool failures are results, not raises)."""
        turn.actions.append(self.tools.label(call.name))
        return await self.tools.run(turn, call)

    # ------------------------------------------------------------------ helpers

    def _messages(self, instruction: str | None, specs: Sequence[ToolSpec]) -> list[Message]:
        system = fill(self.system_prompt, {"name": self.name, "tools": _names(specs)})
        if instruction:
            system = f"{system}\n\n{instruction}"
        return [Message.system(system), *self.history]

    def _fill(
        self, template: str, turn: Turn, specs: Sequence[ToolSpec], observations: list[str]
    ) -> str:
        return fill(
            template,
            {
                "input": turn.input,
                "objective": turn.input,
                "tools": _names(specs),
                "observation": "\n".join(observations) or "(none yet)",
                "name": self.name,
            },
        )

    def _thought(self, completion: Completion) -> dict[str, Any]:
        labels = [self.tools.label(c.name) for c in completion.tool_calls]
        actions: list[dict[str, Any]] = [
            {"tool": label, "arguments": c.arguments}
            for label, c in zip(labels, completion.tool_calls, strict=True)
        ]
        names = ", ".join(labels)
        return {"message": completion.text.strip() or f"I will call {names}.", "actions": actions}

    def _observation(self, label: str, result: Message) -> dict[str, Any]:
        outcome = "failed" if result.is_error else "returned"
        return {
            "message": f"{label} {outcome}: {_short(result.content)}",
            "observation": {"tool": label, "result": result.content, "is_error": result.is_error},
        }

    def _close_open_calls(self) -> None:
        """Answer the last assistant message's tool calls that have no result yet."""
        for index in range(len(self.history) - 1, -1, -1):
            message = self.history[index]
            if message.role == "assistant":
                answered = {m.tool_call_id for m in self.history[index + 1 :]}
                for call in message.tool_calls:
                    if call.id not in answered:
                        text = "not run: the turn was interrupted before this call finished"
                        self.history.append(Message.tool_result(call, text, is_error=True))
                return
            if message.role == "user":
                return

    def _trim(self) -> None:
        """Keep at most ``history_limit`` messages, starting at a user message."""
        if len(self.history) <= self.history_limit:
            return
        kept = self.history[-self.history_limit :]
        while kept and kept[0].role != "user":
            kept.pop(0)
        self.history = kept


def _names(specs: Sequence[ToolSpec]) -> str:
    named = (f"{s.name} ({s.display_name})" if s.display_name else s.name for s in specs)
    return ", ".join(named) or "none"


def _short(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


__all__ = ["ReActLoop", "ThoughtSink", "ToolRunner", "Turn"]
