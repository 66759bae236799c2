"""A real local HTTP server speaking the Anthropic Messages streaming API, for provider tests.

``POST /v1/messages`` with ``stream: true`` answers with the SSE events of the Messages API:
``message_start``, per block ``content_block_start`` / ``content_block_delta`` (``text_delta``
or ``input_json_delta`` in pieces) / ``content_block_stop``, ``message_delta`` with the
``stop_reason``, ``message_stop``. ``hang=True`` stops after the first text and waits; the
server records when the client disconnects (``time.monotonic()``).
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
class Turn:
    """One scripted answer: text, then tool uses ``(id, name, input JSON text)``."""

    text: str = ""
    tool_uses: list[tuple[str, str, str]] = field(default_factory=list)
    chunk_size: int = 3
    hang: bool = False
    status: int = 200
    error: str = ""


class FakeAnthropicServer(FakeModelServer):
    """``async with FakeAnthropicServer() as server: server.base_url``."""

    path = "/v1/messages"

    def __init__(self, model: str = "claude-fake") -> None:
        super().__init__(model)
        self.turns: deque[Turn] = deque()

    @property
    def base_url(self) -> str:
        """What to pass to the anthropic client as ``base_url``."""
        return f"http://127.0.0.1:{self.port}"

    async def handle(self, request: web.Request) -> web.StreamResponse:
        """Answer one request."""
        return await self._messages(request)

    @staticmethod
    def _event(name: str, data: dict[str, Any]) -> bytes:
        return f"event: {name}\ndata: {json.dumps({'type': name, **data})}\n\n".encode()

    async def _messages(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.requests.append(body)
        self.headers.append({k.lower(): v for k, v in request.headers.items()})
        turn = self.turns.popleft() if self.turns else Turn(text="ok")
        if turn.status != 200:
            error = {"type": "error", "error": {"type": "api_error", "message": turn.error}}
            return web.json_response(error, status=turn.status)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        send = response.write
        size = turn.chunk_size
        try:
            message = {
                "id": "msg_fake", "type": "message", "role": "assistant", "content": [],
                "model": self.model, "stop_reason": None, "stop_sequence": None,
                "usage": {"input_tokens": 25, "output_tokens": 1},
            }  # fmt: skip
            await send(self._event("message_start", {"message": message}))
            index = 0
            if turn.text:
                block = {"type": "text", "text": ""}
                await send(self._event("content_block_start", {"index": 0, "content_block": block}))
                for i in range(0, len(turn.text), size):
                    delta = {"type": "text_delta", "text": turn.text[i : i + size]}
                    await send(self._event("content_block_delta", {"index": 0, "delta": delta}))
                    if turn.hang:
                        self.streaming.set()
                        await asyncio.Event().wait()
                await send(self._event("content_block_stop", {"index": 0}))
                index = 1
            for use_id, name, raw in turn.tool_uses:
                block = {"type": "tool_use", "id": use_id, "name": name, "input": {}}
                start = {"index": index, "content_block": block}
                await send(self._event("content_block_start", start))
                for i in range(0, len(raw), size):
                    delta = {"type": "input_json_delta", "partial_json": raw[i : i + size]}
                    await send(self._event("content_block_delta", {"index": index, "delta": delta}))
                await send(self._event("content_block_stop", {"index": index}))
                index += 1
            stop = "tool_use" if turn.tool_uses else "end_turn"
            delta = {"delta": {"stop_reason": stop, "stop_sequence": None},
                     "usage": {"output_tokens": 17}}  # fmt: skip
            await send(self._event("message_delta", delta))
            await send(self._event("message_stop", {}))
        except (asyncio.CancelledError, ConnectionResetError):
            self.disconnected_at = time.monotonic()
            self.disconnected.set()
            raise
        return response
