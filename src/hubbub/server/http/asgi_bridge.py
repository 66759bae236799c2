"""Serving an ASGI application (the ``mcp`` SDK's session manager) from an aiohttp handler."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from aiohttp import web

DISCONNECT_POLL_S = 2.0
"""How often an open response looks whether its client has gone (aiohttp has no event)."""


async def serve_asgi(
    request: web.Request,
    app: Callable[..., Awaitable[None]],
    on_start: Callable[[int, list[tuple[bytes, bytes]]], None] | None = None,
) -> web.StreamResponse:
    """Serve ``request`` with the ASGI application ``app`` (HTTP only, streaming bodies)."""
    body = await request.read()
    sockname = request.transport.get_extra_info("sockname") if request.transport else None
    scope: MutableMapping[str, Any] = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": f"{request.version.major}.{request.version.minor}",
        "method": request.method,
        "scheme": request.scheme,
        "path": request.path,
        "raw_path": request.raw_path.encode(),
        "root_path": "",
        "query_string": request.query_string.encode(),
        "headers": [(k.lower(), v) for k, v in request.raw_headers],
        "client": (request.remote or "", 0),
        "server": tuple(sockname[:2]) if sockname else None,
    }
    done = asyncio.Event()
    body_sent = False
    response: web.StreamResponse | None = None

    async def receive() -> dict[str, Any]:
        nonlocal body_sent
        if not body_sent:
            body_sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        # then only the client's going away: aiohttp has no event for it, so look at the
        # connection now and then (an open event stream must end when its reader has gone)
        while not done.is_set():
            t = request.transport
            if t is None or t.is_closing():
                break
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(DISCONNECT_POLL_S):
                    await done.wait()
        done.set()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        try:
            await _send(message)
        except ConnectionError:
            # the client has gone: as ASGI servers do, later sends go nowhere, and the
            # application hears http.disconnect
            done.set()

    async def _send(message: dict[str, Any]) -> None:
        nonlocal response
        if done.is_set():
            return
        if message["type"] == "http.response.start":
            headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in message["headers"]]
            if on_start is not None:
                on_start(message["status"], message["headers"])
            response = web.StreamResponse(status=message["status"])
            for k, v in headers:
                response.headers.add(k, v)
            await response.prepare(request)
        elif message["type"] == "http.response.body" and response is not None:
            chunk = message.get("body", b"")
            if chunk:
                await response.write(chunk)
            if not message.get("more_body", False):
                await response.write_eof()

    try:
        await app(scope, receive, send)
    finally:
        done.set()
    if response is None:
        return web.Response(status=500, text="the MCP server sent no response\n")
    return response
