"""The MCP server side of a participant: the tools and resources it offers, and the requests
it is answering.

:class:`ToolServer` answers ``tools/list``, ``tools/call``, ``resources/list`` and
``resources/read`` (through :func:`hubbub.sdk.provider.answer`) with a JSON-RPC response body,
and keeps the requests being answered by (sender, JSON-RPC id) so that the sender's
``notifications/cancelled`` stops the right one (MCP: no response is sent for it). Sending
the response, and whether the participant may, is :class:`~hubbub.sdk.Participant`'s part.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Final

import mcp.types as mt
from mcp import MCPError

from hubbub.errors import RequestFailed
from hubbub.protocol.envelope import Envelope
from hubbub.sdk.provider import JSONRPC, answer, error_body, is_notification
from hubbub.sdk.tools import Resource, Tool

log = logging.getLogger("hubbub.sdk.participant")

CANCELLED: Final = "notifications/cancelled"
"""The MCP notification that stops a request being answered."""


class ToolServer:
    """The tools and resources one participant offers, and the requests it is answering."""

    def __init__(self) -> None:
        self.tools: dict[str, Tool] = {}
        """The tools offered, by name."""
        self.resources: dict[str, Resource] = {}
        """The resources offered, by uri."""
        self._running: dict[tuple[str, str], asyncio.Task[Any]] = {}

    @property
    def in_progress(self) -> int:
        """How many requests are being answered now."""
        return len(self._running)

    def register_tool(self, tool: Tool) -> None:
        """Offer ``tool`` (replacing a tool of the same name)."""
        self.tools[tool.name] = tool

    def remove_tool(self, name: str) -> None:
        """Stop offering a tool."""
        self.tools.pop(name, None)

    def register_resource(self, resource: Resource) -> None:
        """Offer ``resource`` (replacing one with the same uri)."""
        self.resources[resource.uri] = resource

    async def respond(self, env: Envelope, me: str) -> dict[str, Any] | None:
        """The JSON-RPC response body to the request ``env`` (an error body when it fails);
        None for a notification, which gets no response. Never raises."""
        payload = env.payload
        request_id = payload.get("id")
        try:
            result = await answer(
                payload.get("method"), payload.get("params"), self.tools, self.resources, me
            )
            body: dict[str, Any] = {"jsonrpc": JSONRPC, "id": request_id, "result": result}
        except (RequestFailed, MCPError) as exc:
            body = error_body(request_id, exc.code, exc.message, exc.data)
        except Exception as exc:
            log.exception("%s failed to answer %s", me, payload.get("method"))
            body = error_body(request_id, mt.INTERNAL_ERROR, f"internal error: {exc}")
        return None if is_notification(payload) else body

    def answering(self, env: Envelope, task: asyncio.Task[Any]) -> None:
        """``task`` answers the request ``env`` (until it ends, a cancellation stops it)."""
        if "id" not in env.payload:
            return
        key = (env.from_, str(env.payload["id"]))
        self._running[key] = task
        task.add_done_callback(lambda _t: self._running.pop(key, None))

    def cancel(self, env: Envelope, me: str) -> bool:
        """Stop answering the request a ``notifications/cancelled`` names; False when it is not
        being answered (already answered, or never ours)."""
        params = env.payload.get("params")
        request_id = params.get("requestId") if isinstance(params, dict) else None
        task = self._running.get((env.from_, str(request_id)))
        if task is None:
            return False
        reason = params.get("reason") if isinstance(params, dict) else None
        log.info("%s: %s cancelled request %s (%s)", me, env.from_, request_id, reason)
        task.cancel()
        return True


__all__ = ["CANCELLED", "ToolServer"]
