"""The one interface every model provider implements: a streamed chat completion with tools.

Messages are in a neutral format (:class:`Message`: system / user / assistant with tool calls /
tool results); a provider converts them to its own API at the edge, as a dialect codec does.

```python
async with contextlib.aclosing(model.stream(messages, tools)) as events:
    async for event in events:
        if isinstance(event, TextDelta): print(event.text, end="")
        elif isinstance(event, Done): completion = event.completion
```

Cancellation: :meth:`ChatModel.stream` and :meth:`ChatModel.complete` may be cancelled at any
moment (``task.cancel()``); a provider then closes its HTTP response at once, so the server
sees the connection close, and re-raises :class:`asyncio.CancelledError`.
"""

from __future__ import annotations

import contextlib
import json
from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from hubbub.errors import HubbubError

Role = Literal["system", "user", "assistant", "tool"]


class LLMError(HubbubError):
    """A model provider failed: unreachable, refused the request, or answered nonsense."""

    def __init__(self, message: str, *, provider: str = "", status: int | None = None) -> None:
        super().__init__(message)
        self.provider = provider
        self.status = status


@dataclass(frozen=True)
class ToolCall:
    """A call the model wants made: ``name`` is the provider-safe tool name."""

    id: str
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    """Set when the model's arguments were not a JSON object (``arguments`` is then empty)."""


@dataclass(frozen=True)
class Message:
    """One message of a conversation in the neutral format.

    ``assistant`` messages may carry ``tool_calls``; every such call is answered by one
    ``tool`` message with the same ``tool_call_id`` before the next assistant message.
    """

    role: Role
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    tool_name: str | None = None
    """For ``tool`` messages: the provider-safe name of the tool that answered."""
    is_error: bool = False
    """For ``tool`` messages: the tool failed and ``content`` says why."""

    @classmethod
    def system(cls, text: str) -> Message:
        """A system (instructions) message."""
        return cls("system", text)

    @classmethod
    def user(cls, text: str) -> Message:
        """A user message."""
        return cls("user", text)

    @classmethod
    def assistant(cls, text: str = "", tool_calls: Sequence[ToolCall] = ()) -> Message:
        """An assistant message, possibly with tool calls."""
        return cls("assistant", text, tuple(tool_calls))

    @classmethod
    def tool_result(cls, call: ToolCall, content: str, *, is_error: bool = False) -> Message:
        """The result of ``call``."""
        return cls("tool", content, tool_call_id=call.id, tool_name=call.name, is_error=is_error)


@dataclass(frozen=True)
class ToolSpec:
    """A tool offered to the model: provider-safe ``name``, description, JSON Schema."""

    name: str
    description: str = ""
    parameters: dict[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})
    display_name: str = ""
    """What people call the tool (``calculator/multiply``); providers send ``name``."""


@dataclass(frozen=True)
class Usage:
    """Token counts, when the provider reports them."""

    input_tokens: int = 0
    output_tokens: int = 0


@dataclass(frozen=True)
class Completion:
    """The model's whole answer to one call: its text and its tool calls."""

    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    finish_reason: str = "stop"
    model: str = ""
    usage: Usage | None = None

    def message(self) -> Message:
        """The answer as an assistant message for the conversation history."""
        return Message.assistant(self.text, self.tool_calls)


@dataclass(frozen=True)
class TextDelta:
    """A piece of the answer's text, as it streams."""

    text: str


@dataclass(frozen=True)
class ToolCallEvent:
    """A complete tool call (its arguments fully streamed)."""

    call: ToolCall


@dataclass(frozen=True)
class Done:
    """The end of the stream, with the whole completion."""

    completion: Completion


StreamEvent = TextDelta | ToolCallEvent | Done


class ChatModel(ABC):
    """A chat model: ``stream`` yields :data:`StreamEvent` items ending with :class:`Done`."""

    provider: ClassVar[str] = ""
    model: str = ""

    @abstractmethod
    def stream(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec] = ()
    ) -> AsyncGenerator[StreamEvent, None]:
        """Stream one completion; cancelling the consumer closes the request at once."""

    async def complete(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec] = ()
    ) -> Completion:
        """The whole completion of one call (consumes :meth:`stream`)."""
        async with contextlib.aclosing(self.stream(messages, tools)) as events:
            async for event in events:
                if isinstance(event, Done):
                    return event.completion
        raise LLMError(f"{self.provider} stream ended without a completion", provider=self.provider)

    async def aclose(self) -> None:  # noqa: B027 - optional for providers without resources
        """Release the provider's resources (HTTP connection pool)."""

    def describe(self) -> str:
        """``provider:model`` for logs."""
        return f"{self.provider}:{self.model}"


def parse_arguments(raw: str) -> tuple[dict[str, Any], str | None]:
    """Tool-call arguments from the model's JSON text: ``(arguments, None)`` or ``({}, why)``."""
    if not raw.strip():
        return {}, None
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        return {}, f"the arguments are not valid JSON ({exc.msg}): {raw[:200]}"
    if not isinstance(value, dict):
        return {}, f"the arguments must be a JSON object, not {type(value).__name__}: {raw[:200]}"
    return value, None


def collect(
    text_parts: Sequence[str],
    calls: Sequence[ToolCall],
    finish_reason: str,
    model: str,
    usage: Usage | None = None,
) -> Completion:
    """A :class:`Completion` from the pieces a provider accumulated while streaming."""
    return Completion("".join(text_parts), tuple(calls), finish_reason, model, usage)


__all__ = [
    "ChatModel",
    "Completion",
    "Done",
    "LLMError",
    "Message",
    "Role",
    "StreamEvent",
    "TextDelta",
    "ToolCall",
    "ToolCallEvent",
    "ToolSpec",
    "Usage",
    "collect",
    "parse_arguments",
]
