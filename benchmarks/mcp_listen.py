"""MCP listen benchmark: a message sent → ``listen`` returns it, over HTTP and stdio; and 200
concurrent HTTP MCP sessions listening in one channel (gateway RSS per session, delivery p99).

Usage::

    .venv/bin/python benchmarks/mcp_listen.py [--messages 200] [--sessions 200]
        [--store memory|sqlite] [--json out.json]

The gateway runs as ``hubbub serve`` (``--store``: memory, or SQLite in a temporary folder;
rate limit off) in its own process, so its RSS is the gateway's alone. ``--sessions 0``
skips the 200-session part. Each ``listen`` that returns messages first stores the
participant's listen cursor (``/mcp``; docs/mcp.md), so with SQLite it includes a commit.
The settle window is 0 here: a real listen adds it (document 001's 5 s by default).
Targets (issue 23): p99 <= 20 ms + settle window; <= 64 KiB per idle session.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx2
import psutil
import websockets
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

HUBBUB = str(Path(sys.executable).with_name("hubbub"))
ENV = {**os.environ, "HUBBUB_MCP_SETTLE_MS": "0", "HUBBUB_MCP_NUDGE_S": "30",
       "HUBBUB_RATE_PER_S": "0"}  # fmt: skip


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100 * len(xs)))]


async def sender(url: str) -> Any:
    ws = await websockets.connect(url, ping_interval=None)
    await ws.send(json.dumps({"type": "join", "participantId": "bench-sender", "space": "default"}))
    return ws


async def one_by_one(session: ClientSession, ws: Any, n: int) -> list[float]:
    out = []
    for i in range(n):
        listening = asyncio.create_task(session.call_tool("listen", {"timeout_s": 30}))
        await asyncio.sleep(0.005)  # the listen is waiting before the message leaves
        t0 = time.perf_counter()
        await ws.send(
            json.dumps({"kind": "chat", "channel": "#general", "payload": {"text": f"m{i}"}})
        )
        result = await listening
        assert result.structured_content and result.structured_content["messages"], result
        out.append((time.perf_counter() - t0) * 1000)
    return out


@contextlib.asynccontextmanager
async def http_session(base: str, pid: str) -> Any:
    async with (
        httpx2.AsyncClient(headers={"X-Hubbub-Participant": pid}, timeout=60) as http,
        streamable_http_client(base + "/mcp", http_client=http) as (r, w),
        ClientSession(r, w) as s,
    ):
        await s.initialize()
        yield s


async def main(args: argparse.Namespace) -> dict[str, Any]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    data = tempfile.TemporaryDirectory(prefix="mcp-listen-")
    store = ["--store", "memory"] if args.store == "memory" else ["--data-dir", data.name]
    proc = subprocess.Popen([HUBBUB, "serve", "--port", str(port), *store], env=ENV,
                            stderr=subprocess.DEVNULL)  # fmt: skip
    results: dict[str, Any] = {"store": args.store, "load_average": os.getloadavg()}
    base, ws_url = f"http://127.0.0.1:{port}", f"ws://127.0.0.1:{port}/ws"
    try:
        for _ in range(100):
            with contextlib.suppress(Exception):
                async with httpx2.AsyncClient() as c:
                    if (await c.get(base + "/health")).status_code == 200:
                        break
            await asyncio.sleep(0.1)
        ws = await sender(ws_url)
        async with http_session(base, "bench-http") as s:
            lat = await one_by_one(s, ws, args.messages)
        results["http"] = {"p50_ms": statistics.median(lat), "p99_ms": pct(lat, 99)}
        args_ = ["mcp", "--gateway", ws_url, "--id", "bench-stdio"]
        params = StdioServerParameters(command=HUBBUB, env=ENV, args=args_)
        async with stdio_client(params) as (r, w), ClientSession(r, w) as s:
            await s.initialize()
            lat = await one_by_one(s, ws, args.messages)
        results["stdio"] = {"p50_ms": statistics.median(lat), "p99_ms": pct(lat, 99)}
        if not args.sessions:
            await ws.close()
            return results
        gw = psutil.Process(proc.pid)
        before = gw.memory_info().rss
        sessions: list[ClientSession] = []
        ready, stop = asyncio.Event(), asyncio.Event()

        async def hold(i: int) -> None:
            async with http_session(base, f"idle-{i}") as s:
                sessions.append(s)
                if len(sessions) == args.sessions:
                    ready.set()
                await stop.wait()

        holders = [asyncio.create_task(hold(i)) for i in range(args.sessions)]
        await ready.wait()
        await asyncio.sleep(1.0)
        after = gw.memory_info().rss
        results["sessions"] = args.sessions
        results["rss_per_session_kib"] = (after - before) / args.sessions / 1024
        lat: list[float] = []
        me = psutil.Process()
        gw_cpu0, me_cpu0 = sum(gw.cpu_times()[:2]), sum(me.cpu_times()[:2])
        for round_ in range(5):
            calls = [
                asyncio.create_task(s.call_tool("listen", {"timeout_s": 30})) for s in sessions
            ]
            await asyncio.sleep(1.0)
            t0 = time.perf_counter()
            await ws.send(json.dumps({"kind": "chat", "channel": "#general",
                                      "payload": {"text": f"all{round_}"}}))  # fmt: skip
            for done in asyncio.as_completed(calls):
                await done
                lat.append((time.perf_counter() - t0) * 1000)
        results["fanout_gateway_cpu_s"] = sum(gw.cpu_times()[:2]) - gw_cpu0
        results["fanout_clients_cpu_s"] = sum(me.cpu_times()[:2]) - me_cpu0
        results["fanout_p50_ms"] = statistics.median(lat)
        results["fanout_p99_ms"] = pct(lat, 99)
        stop.set()
        await asyncio.gather(*holders, return_exceptions=True)
        await ws.close()
    finally:
        proc.terminate()
        proc.wait(10)
        data.cleanup()
    return results


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=200)
    ap.add_argument("--sessions", type=int, default=200)
    ap.add_argument("--store", choices=["memory", "sqlite"], default="memory")
    ap.add_argument("--json", type=Path)
    out = asyncio.run(main(ap.parse_args()))
    print(json.dumps(out, indent=2))
    if ap.parse_args().json:
        ap.parse_args().json.write_text(json.dumps(out, indent=2))
