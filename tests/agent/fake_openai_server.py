"""A real local HTTP server speaking the OpenAI chat-completions API, for provider tests.

``POST /v1/chat/completions`` answers with the next scripted :class:`Reply`: streamed as SSE
``chat.completion.chunk`` events (content in small deltas, tool calls as ``tool_calls`` deltas
whose arguments arrive in pieces, then ``finish_reason`` and ``data: [DONE]``), or as one JSON
completion when the request does not ask for ``stream``. A reply with ``hang=True`` stops after
its first chunks and waits; the server records the moment (``time.monotonic()``) the client
closes the connection, so a test can measure how fast cancellation reaches the wire.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from tests.agent.fake_server_base import FakeModelServer


@dataclass
class Reply:
    """One scripted answer."""

    text: str = ""
    tool_calls: list[tuple[str, str, str]] = field(default_factory=list)
    """``(id, name, arguments JSON text)`` per call."""
    chunk_size: int = 3
    hang: bool = False
    status: int = 200
    error: str = ""


def _pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


class FakeOpenAIServer(FakeModelServer):
    """The server; ``async with FakeOpenAIServer() as server: server.base_url``."""

    path = "/v1/chat/completions"

    def __init__(self, model: str = "fake-model") -> None:
        super().__init__(model)
        self.replies: deque[Reply] = deque()
        self.default = Reply(text="ok")

    @property
    def base_url(self) -> str:
        """What to pass to the openai client as ``base_url``."""
        return f"http://127.0.0.1:{self.port}/v1"

    async def handle(self, request: web.Request) -> web.StreamResponse:
        """Answer one request."""
        return await self._completions(request)

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> bytes:
        body = {
            "id": "chatcmpl-fake",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": self.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        return f"data: {json.dumps(body)}\n\n".encode()

    async def _completions(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.requests.append(body)
        self.headers.append({k.lower(): v for k, v in request.headers.items()})
        reply = self.replies.popleft() if self.replies else self.default
        if reply.status != 200:
            error = {"message": reply.error, "type": "invalid_request_error", "code": None}
            return web.json_response({"error": error}, status=reply.status)
        if not body.get("stream"):
            return web.json_response(self._whole(reply))
        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        await response.prepare(request)
        try:
            await response.write(self._chunk({"role": "assistant", "content": ""}))
            for piece in _pieces(reply.text, reply.chunk_size):
                await response.write(self._chunk({"content": piece}))
            for index, (call_id, name, arguments) in enumerate(reply.tool_calls):
                first = {"index": index, "id": call_id, "type": "function",
                         "function": {"name": name, "arguments": ""}}  # fmt: skip
                await response.write(self._chunk({"tool_calls": [first]}))
                for piece in _pieces(arguments, reply.chunk_size):
                    delta = {"index": index, "function": {"arguments": piece}}
                    await response.write(self._chunk({"tool_calls": [delta]}))
            if reply.hang:
                self.streaming.set()
                await asyncio.Event().wait()
            finish = "tool_calls" if reply.tool_calls else "stop"
            await response.write(self._chunk({}, finish))
            await response.write(b"data: [DONE]\n\n")
        except (asyncio.CancelledError, ConnectionResetError):
            self.disconnected_at = time.monotonic()
            self.disconnected.set()
            raise
        return response

    def _whole(self, reply: Reply) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
        if reply.tool_calls:
            message["tool_calls"] = [
                {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
                for i, n, a in reply.tool_calls
            ]
        return {
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": "tool_calls" if reply.tool_calls else "stop",
                }
            ],
        }
