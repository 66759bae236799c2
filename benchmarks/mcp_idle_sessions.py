"""Idle ``/mcp`` sessions under a burst of big chats: the gateway's RSS and what each session
is told afterwards.

Usage::

    .venv/bin/python benchmarks/mcp_idle_sessions.py [--sessions 30] [--messages 300]
        [--kib 60] [--json out.json]

The gateway runs as ``hubbub serve --store memory`` (rate limit off) in its own process.
``--sessions`` MCP sessions (the official ``mcp`` SDK over Streamable HTTP) initialize and
never call ``listen``; a WebSocket sender then posts ``--messages`` chats of ``--kib`` KiB
each to ``#general``. The gateway's RSS (psutil) is read before the sessions open, after they
opened and after the burst (once the sender's own fence answered: every message is
delivered). Then each session calls ``listen`` once: it returns the messages, or says the
session was closed (a slow consumer: docs/mcp.md), or reports a gap.

Target (issue h32p): RSS after the burst <= before + 100 MiB; every session told (closed or a
gap notice) rather than holding the whole burst.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx2
import psutil
import websockets
from mcp import ClientSession

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.ports
from tests.ports import reserve_port

from mcp_listen import http_session  # the script's directory is on sys.path

HUBBUB = str(Path(sys.executable).with_name("hubbub"))
ENV = {**os.environ, "HUBBUB_RATE_PER_S": "0", "HUBBUB_MCP_SETTLE_MS": "0",
       "HUBBUB_MCP_NUDGE_S": "2", "HUBBUB_MCP_JITTER": "0"}  # fmt: skip
MIB = 1024 * 1024


async def wait_healthy(base: str) -> None:
    for _ in range(200):
        with contextlib.suppress(Exception):
            async with httpx2.AsyncClient() as c:
                if (await c.get(base + "/health")).status_code == 200:
                    return
        await asyncio.sleep(0.05)
    raise SystemExit("the gateway did not start")


async def settle_rss(proc: psutil.Process) -> int:
    """The gateway's RSS once it stopped moving (a short quiet period)."""
    last = proc.memory_info().rss
    for _ in range(20):
        await asyncio.sleep(0.25)
        now = proc.memory_info().rss
        if abs(now - last) < MIB:
            return now
        last = now
    return last


async def listen_once(session: ClientSession) -> str:
    """What one ``listen`` tells the session: ``messages:N``, ``gap``, or ``closed: why``."""
    try:
        result = await session.call_tool("listen", {"timeout_s": 1})
    except Exception as exc:  # the session is gone: the client is told why
        return f"closed: {exc}"
    if result.is_error:
        text = result.content[0].text if result.content else ""  # type: ignore[union-attr]
        return f"closed: {text}"
    got = result.structured_content or {}
    if got.get("gap"):
        return "gap"
    return f"messages:{len(got.get('messages') or [])}"


async def main(args: argparse.Namespace) -> dict[str, Any]:
    port = reserve_port()
    cmd = [HUBBUB, "serve", "--port", str(port), "--store", "memory"]
    proc = subprocess.Popen(cmd, env=ENV, stderr=subprocess.DEVNULL)
    base, ws_url = f"http://127.0.0.1:{port}", f"ws://127.0.0.1:{port}/ws"
    out: dict[str, Any] = {"sessions": args.sessions, "messages": args.messages, "kib": args.kib}
    try:
        await wait_healthy(base)
        gw = psutil.Process(proc.pid)
        async with contextlib.AsyncExitStack() as stack:
            warm = await stack.enter_async_context(http_session(base, "warm-up"))
            await warm.list_tools()  # the gateway's MCP server is built
            before = await settle_rss(gw)
            sessions = [
                await stack.enter_async_context(http_session(base, f"idle-{i}"))
                for i in range(args.sessions)
            ]
            opened = await settle_rss(gw)
            ws = await websockets.connect(ws_url, ping_interval=None, max_size=None)
            hello = {"type": "join", "participantId": "bench-sender", "space": "default"}
            await ws.send(json.dumps(hello))
            text = "x" * (args.kib * 1024)

            async def fenced() -> None:  # the sender reads its echoes as they come
                while True:  # everything before the fence is delivered once it is answered
                    frame = json.loads(await ws.recv())
                    if frame.get("kind") == "channel/list-response":
                        return

            reader = asyncio.create_task(fenced())
            t0 = time.perf_counter()
            for i in range(args.messages):
                chat = {"kind": "chat", "channel": "#general", "payload": {"text": f"{i} {text}"}}
                await ws.send(json.dumps(chat))
            await ws.send(json.dumps({"kind": "channel/list", "id": "fence"}))
            await reader
            burst_s = time.perf_counter() - t0
            after = await settle_rss(gw)
            told = [await listen_once(s) for s in sessions]
            await ws.close()
        out |= {
            "rss_before_mib": before / MIB,
            "rss_sessions_open_mib": opened / MIB,
            "rss_after_burst_mib": after / MIB,
            "rss_growth_mib": (after - before) / MIB,
            "burst_s": burst_s,
            "told": {k: sum(t.startswith(k) for t in told) for k in ("messages", "gap", "closed")},
            "messages_per_listen": sorted({t for t in told if t.startswith("messages")}),
            "closed_reason": next((t for t in told if t.startswith("closed")), None),
        }
    finally:
        proc.terminate()
        proc.wait(10)
    return out


def cli() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sessions", type=int, default=30)
    ap.add_argument("--messages", type=int, default=300)
    ap.add_argument("--kib", type=int, default=60)
    ap.add_argument("--json", help="write the results here too")
    args = ap.parse_args()
    results = asyncio.run(main(args))
    text = json.dumps(results, indent=2)
    print(text)
    if args.json:
        Path(args.json).write_text(text + "\n")


if __name__ == "__main__":
    cli()
