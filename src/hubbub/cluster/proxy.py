"""HTTP requests reaching a node: answered by the leader's gateway, streamed through."""

from __future__ import annotations

import asyncio
import logging

import aiohttp
from aiohttp import web

from hubbub.cluster import wire

log = logging.getLogger("hubbub.cluster")

_HOP_BY_HOP = frozenset(
    h.lower()
    for h in (
        "Connection",
        "Keep-Alive",
        "Proxy-Authenticate",
        "Proxy-Authorization",
        "TE",
        "Trailers",
        "Transfer-Encoding",
        "Upgrade",
        "Content-Length",
        wire.SECRET_HEADER,
    )
)


def unavailable(why: str) -> web.Response:
    """503 with the gateway's error shape: the cluster cannot answer right now."""
    return web.json_response(
        {"error": "unavailable", "message": why}, status=503, headers={"Retry-After": "2"}
    )


async def forward(
    request: web.Request, http: aiohttp.ClientSession, target: str, secret: str
) -> web.StreamResponse:
    """Send ``request`` to the gateway at ``target`` and stream its answer back."""
    headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP_BY_HOP}
    headers[wire.SECRET_HEADER] = secret
    headers["X-Forwarded-For"] = str(request.remote)
    body = await request.read()
    try:
        upstream = await http.request(
            request.method,
            f"http://{target}{request.rel_url}",
            headers=headers,
            data=body or None,
            allow_redirects=False,
            auto_decompress=False,
        )
    except (aiohttp.ClientError, OSError, TimeoutError) as exc:
        log.info("leader at %s did not answer %s %s: %s", target, request.method, request.path, exc)
        return unavailable("the cluster's leader is changing; retry in a few seconds")
    async with upstream:
        out = web.StreamResponse(status=upstream.status, reason=upstream.reason)
        for k, v in upstream.headers.items():
            if k.lower() not in _HOP_BY_HOP:
                out.headers.add(k, v)
        if upstream.headers.get("Content-Length") is not None:
            out.content_length = int(upstream.headers["Content-Length"])
        await out.prepare(request)
        try:
            async for chunk in upstream.content.iter_any():
                await out.write(chunk)
        except (aiohttp.ClientError, asyncio.CancelledError, ConnectionResetError):
            pass  # the leader went away mid-stream (an event stream): the browser reconnects
        await out.write_eof()
        return out
