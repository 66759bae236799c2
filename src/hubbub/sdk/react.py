"""The agent's reasoning loop (document 003, layer 3, "ReAct Loop"), independent of the wire.

One turn answers one message. With ``reasoning_enabled`` (ReAct), each iteration is one model
call with the tools offered: the model's text is the *thought*, its tool calls the *actions*;
every call is executed and its result (the *observation*) appended before the next iteration;
an answer without tool calls ends the turn. The first call gets the ``reason`` prompt, later
ones the ``act`` prompt; when ``max_iterations`` runs out, one last call with the ``respond``
prompt writes the answer. Without reasoning (models that reason internally) the same loop
runs with the system prompt alone and reports no thoughts.

Each iteration is two overridable steps of the :class:`~hubbub.sdk.Agent` (document 003):
``reason(turn, history) -> Thought`` makes one model call and returns a :class:`Thought` (the
model's text and the tool calls it chose; native tool calling stays the engine), and
``act(turn, call) -> Message`` executes one of the thought's tool calls and returns its result
(the observation). The tool-calling loop and its history belong to the agent runtime
(:mod:`hubbub.sdk.runtime`), which can interrupt a turn between and during these steps.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
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


@dataclass(frozen=True)
class Thought:
    """One ReAct step (document 003 ``Thought``): what the model reasoned and the actions it
    chose. A thought without calls is the turn's answer (``reasoning`` is its text).

    Native tool calling may choose several actions in one step; :attr:`action` and
    :attr:`action_input` are document 003's single action: the first call, or ``respond`` and
    the answer when there is none."""

    reasoning: str
    """The model's text: its reasoning, or the answer when there are no calls."""
    calls: tuple[ToolCall, ...] = ()
    """The actions, in order; a call's ``name`` is ``participant/tool`` or provider-safe."""
    completion: Completion | None = None
    """The model answer it came from (``None`` for a thought an override made up)."""

    @classmethod
    def of(cls, completion: Completion) -> Thought:
        """The thought of one model answer."""
        return cls(completion.text, completion.tool_calls, completion)

    @property
    def final(self) -> bool:
        """Whether this thought answers (no actions)."""
        return not self.calls

    @property
    def action(self) -> str:
        """The first action's tool name, or ``respond``."""
        return self.calls[0].name if self.calls else "respond"

    @property
    def action_input(self) -> Any:
        """The first action's arguments, or the answer text."""
        return self.calls[0].arguments if self.calls else self.reasoning


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
    observations: list[str] = field(default_factory=list)
    """``participant/tool: result`` of every tool call, in order (for the ``act`` prompt)."""
    iterations: int = 0
    final: bool = False
    """Whether the current model call must answer (``max_iterations`` ran out)."""
    thoughts: list[Thought] = field(default_factory=list)
    """The thoughts of this turn so far, oldest first (document 003's ``previousThoughts``)."""
    cancelled_by: str | None = None
    """Who sent the ``reasoning/cancel`` that stopped this turn, if anyone did."""
    answers: list[str] | None = None
    """The ids its answer correlates to (default: the trigger's; ``[]``: none)."""
    floor_key: str | None = None
    """The floor-control batch this turn answers (channel messages under CSMA/claims)."""
    floor_outcome: str | None = None
    """``skipped``, ``yielded`` or ``discarded`` when floor control stopped the turn."""
    floor_reason: str = ""
    winner: str | None = None
    """Who holds the floor after this turn yielded."""

    def correlation(self) -> list[str]:
        """The ``correlation_id`` of the answer and of ``reasoning/start``."""
        return [self.trigger.id] if self.answers is None else list(self.answers)


class ReActLoop:
    """The prompts and model calls of one agent's ReAct turns.

    The tool-calling loop itself and the conversation history belong to the agent runtime
    (:mod:`hubbub.sdk.runtime`), which can interrupt it; this class builds each call's
    messages (system prompt plus the ``reason``/``act``/``respond`` instruction) and the
    ``reasoning/thought`` payloads.
    """

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
    ) -> None:
        self.model = model
        self.tools = tools
        self.name = name
        self.prompts = prompts or Prompts()
        self.system_prompt = self.prompts.system or system_prompt or DEFAULT_SYSTEM_PROMPT
        self.max_iterations = max_iterations
        self.reasoning_enabled = reasoning_enabled

    # ------------------------------------------------------------------ model calls

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

    # ------------------------------------------------------------------ helpers

    def request(
        self, turn: Turn, history: Sequence[Message], specs: Sequence[ToolSpec], *, final: bool
    ) -> list[Message]:
        """The messages of model call ``turn.iterations`` over ``history`` (an agent hosted
        by the runtime builds each call with this): system prompt, then the ``reason``
        (first call), ``act`` (later calls) or ``respond`` (``final``) instruction."""
        instruction = None
        if final:
            instruction = self._fill(self.prompts.respond, turn, specs, turn.observations)
        elif self.reasoning_enabled:
            template = self.prompts.reason if turn.iterations <= 1 else self.prompts.act
            instruction = self._fill(template, turn, specs, turn.observations)
        return self._messages(instruction, specs, history)

    def _messages(
        self,
        instruction: str | None,
        specs: Sequence[ToolSpec],
        history: Sequence[Message],
    ) -> list[Message]:
        system = fill(self.system_prompt, {"name": self.name, "tools": _names(specs)})
        if instruction:
            system = f"{system}\n\n{instruction}"
        return [Message.system(system), *history]

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

    def thought(self, completion: Completion) -> dict[str, Any]:
        labels = [self.tools.label(c.name) for c in completion.tool_calls]
        actions: list[dict[str, Any]] = [
            {"tool": label, "arguments": c.arguments}
            for label, c in zip(labels, completion.tool_calls, strict=True)
        ]
        names = ", ".join(labels)
        return {"message": completion.text.strip() or f"I will call {names}.", "actions": actions}

    def observation(self, label: str, result: Message) -> dict[str, Any]:
        outcome = "failed" if result.is_error else "returned"
        return {
            "message": f"{label} {outcome}: {_short(result.content)}",
            "observation": {"tool": label, "result": result.content, "is_error": result.is_error},
        }


def _names(specs: Sequence[ToolSpec]) -> str:
    named = (f"{s.name} ({s.display_name})" if s.display_name else s.name for s in specs)
    return ", ".join(named) or "none"


def _short(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


__all__ = ["ReActLoop", "Thought", "ToolRunner", "Turn"]
