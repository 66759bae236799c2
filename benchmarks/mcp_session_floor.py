"""The memory floor of an idle Streamable HTTP MCP session: the ``mcp`` SDK alone vs ``/mcp``.

Usage::

    .venv/bin/python benchmarks/mcp_session_floor.py [--sessions 200] [--json out.json]

Opens ``--sessions`` idle sessions (``initialize``, then the client's standing GET event
stream, as ``benchmarks/mcp_listen.py`` does) against three servers, each in its own process,
and reports the server's RSS growth per session and its asyncio tasks per session:

- ``sdk-uvicorn``: a bare ``MCPServer`` (one tool) served by its own
  ``streamable_http_app()`` on uvicorn: what the SDK costs, hosted as its docs show;
- ``sdk-aiohttp``: the same bare server behind hubbub's aiohttp→ASGI bridge
  (``serve_asgi``), no gateway: what the SDK costs where ``/mcp`` runs it;
- ``hubbub``: ``hubbub serve``'s ``/mcp`` (memory store): the SDK, the bridge and a
  participant (session, connection, desk) per MCP session.

Target (issue 23): <= 64 KiB per idle session.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx2
import psutil
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from _fanout.servers import hubbub_env, reserve_port, wait_listening

HUBBUB = str(Path(sys.executable).with_name("hubbub"))


def bare_server() -> Any:
    """A bare MCPServer with one tool, and ``tasks``: the server's asyncio tasks now."""
    from mcp.server.mcpserver import MCPServer

    srv = MCPServer("bare", log_level="WARNING")

    @srv.tool()
    async def tasks() -> int:
        """How many asyncio tasks the server runs."""
        return len(asyncio.all_tasks())

    return srv


JSON_RESPONSE = os.environ.get("FLOOR_JSON_RESPONSE") == "1"
"""Serve POST answers as JSON instead of an SSE stream (the SDK's ``json_response``)."""
NO_GET_STREAM = os.environ.get("FLOOR_NO_GET_STREAM") == "1"
"""``sdk-aiohttp`` answers the client's standing GET event stream with 405 (what an idle
session costs without it)."""


def serve_uvicorn(port: int) -> None:
    import uvicorn

    # host 0.0.0.0: no DNS-rebinding check (the clients are local anyway)
    app = bare_server().streamable_http_app(host="0.0.0.0", json_response=JSON_RESPONSE)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


def serve_aiohttp(port: int) -> None:
    from aiohttp import web

    from hubbub.server.http.asgi_bridge import serve_asgi

    srv = bare_server()
    srv.streamable_http_app(host="0.0.0.0", json_response=JSON_RESPONSE)
    manager = srv.session_manager

    async def endpoint(request: web.Request) -> web.StreamResponse:
        if NO_GET_STREAM and request.method == "GET":
            return web.Response(status=405)  # allowed by the spec: no standalone stream
        return await serve_asgi(request, manager.handle_request)

    async def run_manager(app: web.Application) -> Any:
        async with manager.run():
            yield

    app = web.Application()
    app.router.add_route("*", "/mcp", endpoint)
    app.cleanup_ctx.append(run_manager)
    web.run_app(app, host="127.0.0.1", port=port, print=None)


async def measure(kind: str, sessions: int) -> dict[str, Any]:
    port = reserve_port()
    env = hubbub_env() | {"HUBBUB_RATE_PER_S": "0"}
    if kind == "hubbub":
        argv = [HUBBUB, "serve", "--port", str(port), "--store", "memory"]
    else:
        argv = [sys.executable, __file__, "--serve", kind, "--port", str(port)]
    proc = subprocess.Popen(argv, env=env, stderr=subprocess.DEVNULL)
    stop = asyncio.Event()
    opened: list[ClientSession] = []
    ready, first_open = asyncio.Event(), asyncio.Event()
    try:
        await wait_listening(port)
        url = f"http://127.0.0.1:{port}/mcp"
        server = psutil.Process(proc.pid)

        async def hold(i: int) -> None:
            headers = {"X-Hubbub-Participant": f"idle-{i}"}
            async with (
                httpx2.AsyncClient(headers=headers, timeout=60) as http,
                streamable_http_client(url, http_client=http) as (r, w),
                ClientSession(r, w) as s,
            ):
                await s.initialize()
                opened.append(s)
                first_open.set()
                if len(opened) == sessions + 1:
                    ready.set()
                await stop.wait()

        # one session first: the SDK's import and first-request costs are not per session
        first = asyncio.create_task(hold(-1))
        await first_open.wait()
        await asyncio.sleep(1.0)
        before = server.memory_info().rss
        tasks_before = await _tasks(opened[0]) if kind != "hubbub" else None
        holders = [asyncio.create_task(hold(i)) for i in range(sessions)]
        await ready.wait()
        await asyncio.sleep(2.0)
        after = server.memory_info().rss
        out: dict[str, Any] = {"rss_per_session_kib": (after - before) / sessions / 1024}
        if tasks_before is not None:
            out["tasks_per_session"] = (await _tasks(opened[0]) - tasks_before) / sessions
        stop.set()
        await asyncio.gather(first, *holders, return_exceptions=True)
        return out
    finally:
        proc.terminate()
        proc.wait(10)


async def _tasks(s: ClientSession) -> int:
    result = await s.call_tool("tasks", {})
    sc = result.structured_content or {}
    return int(sc.get("result", 0))


async def main(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {"sessions": args.sessions}
    for kind in args.servers:
        out[kind] = await measure(kind, args.sessions)
        print(kind, out[kind], file=sys.stderr, flush=True)
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--sessions", type=int, default=200)
    ap.add_argument("--servers", nargs="+", default=["sdk-uvicorn", "sdk-aiohttp", "hubbub"])
    ap.add_argument("--serve", choices=["sdk-uvicorn", "sdk-aiohttp"])
    ap.add_argument("--port", type=int)
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    if a.serve == "sdk-uvicorn":
        serve_uvicorn(a.port)
    elif a.serve == "sdk-aiohttp":
        serve_aiohttp(a.port)
    else:
        result = asyncio.run(main(a))
        print(json.dumps(result, indent=2))
        if a.json:
            a.json.write_text(json.dumps(result, indent=2))
