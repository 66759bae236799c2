"""The anthropic provider: the official ``anthropic`` SDK, Messages API with streaming.

System messages become the ``system`` parameter; tool results become ``tool_result`` blocks
in a user turn; consecutive messages of one role are merged, as the Messages API wants
strictly alternating turns.
"""

from __future__ import annotations

import os
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, cast

import anthropic

from hubbub.llm.base import (
    ChatModel,
    Done,
    LLMError,
    Message,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolCallEvent,
    ToolSpec,
    Usage,
    collect,
    parse_arguments,
)

DEFAULT_ANTHROPIC_MODEL = "claude-sonnet-4-5"


def _blocks(message: Message) -> list[dict[str, Any]]:
    if message.role == "tool":
        block: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": message.tool_call_id or "",
            "content": message.content,
        }
        if message.is_error:
            block["is_error"] = True
        return [block]
    blocks: list[dict[str, Any]] = []
    if message.content:
        blocks.append({"type": "text", "text": message.content})
    for call in message.tool_calls:
        blocks.append(
            {"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments}
        )
    return blocks


def to_anthropic_messages(messages: Sequence[Message]) -> tuple[str, list[dict[str, Any]]]:
    """Neutral messages as ``(system, messages)`` of the Messages API."""
    system = "\n\n".join(m.content for m in messages if m.role == "system" and m.content)
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "system":
            continue
        role = "assistant" if m.role == "assistant" else "user"
        blocks = _blocks(m)
        if not blocks:
            continue
        if out and out[-1]["role"] == role:
            previous = out[-1]["content"]
            if isinstance(previous, str):
                previous = [{"type": "text", "text": previous}]
            out[-1]["content"] = previous + blocks
        elif role == "user" and len(blocks) == 1 and blocks[0]["type"] == "text":
            out.append({"role": role, "content": blocks[0]["text"]})
        else:
            out.append({"role": role, "content": blocks})
    return system, out


def to_anthropic_tools(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    """Tool specs as Messages API ``tools``."""
    return [
        {"name": t.name, "description": t.description, "input_schema": t.parameters} for t in tools
    ]


@dataclass
class _PartialUse:
    id: str
    name: str
    json: list[str] = field(default_factory=list)
    initial: dict[str, Any] = field(default_factory=dict)


class AnthropicModel(ChatModel):
    """A Claude model through the Messages API."""

    provider: ClassVar[str] = "anthropic"

    def __init__(
        self,
        model: str = DEFAULT_ANTHROPIC_MODEL,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        temperature: float | None = None,
        max_tokens: int = 1024,
        timeout: float = 120.0,
        max_retries: int = 2,
    ) -> None:
        self.model = model
        self.base_url = base_url or os.environ.get("ANTHROPIC_BASE_URL") or None
        self.temperature = temperature
        self.max_tokens = max_tokens
        self._client = anthropic.AsyncAnthropic(
            api_key=api_key or os.environ.get("ANTHROPIC_API_KEY") or "not-set",
            base_url=self.base_url,
            timeout=timeout,
            max_retries=max_retries,
        )

    async def aclose(self) -> None:
        """Close the HTTP connection pool."""
        await self._client.close()

    def _error(self, exc: anthropic.APIError) -> LLMError:
        where = self.base_url or "api.anthropic.com"
        if isinstance(exc, anthropic.APIStatusError):
            hint = " (check ANTHROPIC_API_KEY)" if exc.status_code in (401, 403) else ""
            return LLMError(
                f"{where} answered {exc.status_code}: {exc.message}{hint}",
                provider=self.provider,
                status=exc.status_code,
            )
        if isinstance(exc, anthropic.APIConnectionError):
            return LLMError(f"could not reach {where}: {exc.message}", provider=self.provider)
        return LLMError(f"{where} failed: {exc.message}", provider=self.provider)

    async def stream(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec] = ()
    ) -> AsyncGenerator[StreamEvent, None]:
        """Stream one completion; on cancellation the HTTP response is closed at once."""
        system, converted = to_anthropic_messages(messages)
        # this SDK no longer types ``temperature``; the API still takes it
        extra = {"temperature": self.temperature} if self.temperature is not None else None
        try:
            response = await self._client.messages.create(
                model=self.model,
                max_tokens=self.max_tokens,
                messages=cast(Any, converted),
                system=system if system else anthropic.omit,
                tools=cast(Any, to_anthropic_tools(tools)) if tools else anthropic.omit,
                extra_body=extra,
                stream=True,
            )
        except anthropic.APIError as exc:
            raise self._error(exc) from exc
        text: list[str] = []
        uses: dict[int, _PartialUse] = {}
        finish = "stop"
        model = self.model
        input_tokens = output_tokens = 0
        try:
            async for event in response:
                if event.type == "message_start":
                    model = event.message.model or model
                    input_tokens = event.message.usage.input_tokens or 0
                elif event.type == "content_block_start":
                    block = event.content_block
                    if block.type == "tool_use":
                        initial = block.input if isinstance(block.input, dict) else {}
                        uses[event.index] = _PartialUse(block.id, block.name, initial=initial)
                elif event.type == "content_block_delta":
                    delta = event.delta
                    if delta.type == "text_delta":
                        text.append(delta.text)
                        yield TextDelta(delta.text)
                    elif delta.type == "input_json_delta" and event.index in uses:
                        uses[event.index].json.append(delta.partial_json)
                elif event.type == "message_delta":
                    if event.delta.stop_reason:
                        finish = event.delta.stop_reason
                    output_tokens = event.usage.output_tokens or output_tokens
        except anthropic.APIError as exc:
            raise self._error(exc) from exc
        finally:
            await response.close()
        calls: list[ToolCall] = []
        for index in sorted(uses):
            use = uses[index]
            raw = "".join(use.json)
            arguments, error = parse_arguments(raw) if raw else (use.initial, None)
            call = ToolCall(use.id, use.name, arguments, error)
            calls.append(call)
            yield ToolCallEvent(call)
        usage = Usage(input_tokens, output_tokens)
        yield Done(collect(text, calls, finish, model, usage))


__all__ = [
    "DEFAULT_ANTHROPIC_MODEL",
    "AnthropicModel",
    "to_anthropic_messages",
    "to_anthropic_tools",
]
