"""The openai-compatible provider: the official ``openai`` SDK against any chat-completions API.

``base_url`` picks the server: OpenAI itself, Ollama (``http://localhost:11434/v1``), vLLM,
llama.cpp server, LM Studio (``http://localhost:1234/v1``)... Local servers ignore the API key;
the SDK still wants one, so a placeholder is sent when none is configured.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, cast

import openai

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

DEFAULT_OPENAI_MODEL = "gpt-4o-mini"
_PLACEHOLDER_KEY = "not-needed"


def to_openai_messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Neutral messages as chat-completions ``messages``."""
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "tool":
            out.append({"role": "tool", "tool_call_id": m.tool_call_id or "", "content": m.content})
        elif m.role == "assistant":
            item: dict[str, Any] = {"role": "assistant", "content": m.content or None}
            if m.tool_calls:
                item["tool_calls"] = [
                    {
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.name, "arguments": json.dumps(c.arguments)},
                    }
                    for c in m.tool_calls
                ]
            out.append(item)
        else:
            out.append({"role": m.role, "content": m.content})
    return out


def to_openai_tools(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    """Tool specs as chat-completions ``tools`` (function tools)."""
    return [
        {
            "type": "function",
            "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
        }
        for t in tools
    ]


@dataclass
class _PartialCall:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


class OpenAICompatible(ChatModel):
    """A chat model behind an OpenAI-compatible ``/v1/chat/completions`` endpoint."""

    provider: ClassVar[str] = "openai"

    def __init__(
        self,
        model: str = DEFAULT_OPENAI_MODEL,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        timeout: float = 120.0,
        max_retries: int = 2,
    ) -> None:
        self.model = model
        self.base_url = base_url or os.environ.get("OPENAI_BASE_URL") or None
        self.temperature = temperature
        self.max_tokens = max_tokens
        self._client = openai.AsyncOpenAI(
            api_key=api_key or os.environ.get("OPENAI_API_KEY") or _PLACEHOLDER_KEY,
            base_url=self.base_url,
            timeout=timeout,
            max_retries=max_retries,
        )

    async def aclose(self) -> None:
        """Close the HTTP connection pool."""
        await self._client.close()

    def _error(self, exc: openai.APIError) -> LLMError:
        where = self.base_url or "api.openai.com"
        if isinstance(exc, openai.APIStatusError):
            hint = ""
            if exc.status_code in (401, 403):
                hint = " (check OPENAI_API_KEY or the api_key setting)"
            elif exc.status_code == 404:
                hint = f" (is model {self.model!r} served there, and base_url right?)"
            return LLMError(
                f"the model server at {where} answered {exc.status_code}: {exc.message}{hint}",
                provider=self.provider,
                status=exc.status_code,
            )
        if isinstance(exc, openai.APIConnectionError):
            return LLMError(
                f"could not reach the model server at {where}: {exc.message} "
                "(is it running? check base_url / OPENAI_BASE_URL)",
                provider=self.provider,
            )
        return LLMError(f"the model server at {where} failed: {exc.message}", provider="openai")

    async def stream(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec] = ()
    ) -> AsyncGenerator[StreamEvent, None]:
        """Stream one completion; on cancellation the HTTP response is closed at once."""
        try:
            response = await self._client.chat.completions.create(
                model=self.model,
                messages=cast(Any, to_openai_messages(messages)),
                tools=cast(Any, to_openai_tools(tools)) if tools else openai.omit,
                temperature=self.temperature if self.temperature is not None else openai.omit,
                max_tokens=self.max_tokens if self.max_tokens is not None else openai.omit,
                stream=True,
            )
        except openai.APIError as exc:
            raise self._error(exc) from exc
        text: list[str] = []
        partial: dict[int, _PartialCall] = {}
        finish = "stop"
        usage: Usage | None = None
        model = self.model
        try:
            async for chunk in response:
                model = chunk.model or model
                if chunk.usage is not None:
                    usage = Usage(chunk.usage.prompt_tokens, chunk.usage.completion_tokens)
                for choice in chunk.choices:
                    delta = choice.delta
                    if delta.content:
                        text.append(delta.content)
                        yield TextDelta(delta.content)
                    for tc in delta.tool_calls or ():
                        slot = partial.setdefault(tc.index, _PartialCall())
                        if tc.id:
                            slot.id = tc.id
                        if tc.function is not None:
                            if tc.function.name:
                                slot.name += tc.function.name
                            if tc.function.arguments:
                                slot.arguments.append(tc.function.arguments)
                    if choice.finish_reason:
                        finish = choice.finish_reason
        except openai.APIError as exc:
            raise self._error(exc) from exc
        finally:
            await response.close()
        calls: list[ToolCall] = []
        for index in sorted(partial):
            slot = partial[index]
            arguments, error = parse_arguments("".join(slot.arguments))
            call = ToolCall(slot.id or f"call_{index}", slot.name, arguments, error)
            calls.append(call)
            yield ToolCallEvent(call)
        yield Done(collect(text, calls, finish, model, usage))


__all__ = ["DEFAULT_OPENAI_MODEL", "OpenAICompatible", "to_openai_messages", "to_openai_tools"]
