"""MCP listen benchmark: a message sent → ``listen`` returns it, over HTTP and stdio; and 200
concurrent HTTP MCP sessions listening in one channel (gateway RSS per session, delivery p50 /
p99, gateway CPU per ``listen`` round trip).

Usage::

    .venv/bin/python benchmarks/mcp_listen.py [--messages 200] [--sessions 200]
        [--workers 4] [--rounds 5] [--store memory|sqlite] [--profile gw.txt] [--json out.json]

The gateway runs as ``hubbub serve`` (``--store``: memory, or SQLite in a temporary folder;
rate limit off) in its own process, so its RSS and CPU are the gateway's alone. ``--messages
0`` skips the one-session part, ``--sessions 0`` the fan-out. Each ``listen`` that returns
messages first stores the participant's listen cursor (``/mcp``; docs/mcp.md), so with
SQLite it includes a commit. The settle window is 0 here: a real listen adds it (document
001's 5 s by default).

The fan-out's MCP clients (the official ``mcp`` SDK) run in ``--workers`` processes of their
own, so the measurement is not bound by one client process; each stamps its results with
``time.monotonic()`` (CLOCK_MONOTONIC: one clock for every process on Linux) against the
sender's stamp. One unmeasured warm-up round comes first: the SDK client lists the tools and
compiles a tool's ``outputSchema`` validator on a session's first call of it. ``--profile``
records the gateway (and the first client process, ``<path>.client``) with py-spy (``pip
install py-spy``) during the measured rounds, as raw collapsed stacks.
Targets (issue 23): p99 <= 20 ms + settle window; <= 64 KiB per idle session.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from subprocess import DEVNULL, PIPE
from typing import Any

import httpx2
import psutil
import websockets
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.ports
from tests.ports import reserve_port

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
    port = reserve_port()
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
        if args.messages:
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
            await ws.close()
        if args.sessions:
            results |= await fan_out(args, base, ws_url, psutil.Process(proc.pid))
    finally:
        proc.terminate()
        proc.wait(10)
        data.cleanup()
    return results


async def fan_out(
    args: argparse.Namespace, base: str, ws_url: str, gw: psutil.Process
) -> dict[str, Any]:
    """``--sessions`` idle sessions spread over ``--workers`` client processes, then rounds
    of one message to all of them listening (latency on the system-wide monotonic clock)."""
    results: dict[str, Any] = {"sessions": args.sessions, "workers": args.workers}
    ws = await sender(ws_url)
    async with http_session(base, "warm-up") as s:  # the gateway's MCP server is built
        await s.list_tools()
    await asyncio.sleep(0.5)
    before = gw.memory_info().rss
    share = [args.sessions // args.workers + (w < args.sessions % args.workers)
             for w in range(args.workers)]  # fmt: skip
    workers = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            __file__,
            "--worker",
            base,
            "--first",
            str(sum(share[:w])),
            "--sessions",
            str(share[w]),
            stdin=PIPE,
            stdout=PIPE,
            env=ENV,
        )
        for w in range(args.workers)
    ]

    async def ask(order: str) -> list[dict[str, Any]]:
        for w in workers:
            assert w.stdin is not None
            w.stdin.write(order.encode() + b"\n")
        return [json.loads(await w.stdout.readline()) for w in workers if w.stdout]

    try:
        await ask("ready")
        await asyncio.sleep(1.0)
        results["rss_per_session_kib"] = (gw.memory_info().rss - before) / args.sessions / 1024
        procs = [gw, *(psutil.Process(w.pid) for w in workers)]

        async def round_(text: str) -> list[float]:
            await ask("listen")  # every worker's listens are sent
            await quiet(procs)  # ... and waiting in the gateway
            t0 = time.monotonic()
            await ws.send(json.dumps({"kind": "chat", "channel": "#general",
                                      "payload": {"text": text}}))  # fmt: skip
            return [(t - t0) * 1000 for r in await ask("collect") for t in r["done"]]

        # a warm-up round, not measured: each client lists the tools and compiles the
        # outputSchema validator of `listen` once per session (the mcp SDK client does that on
        # a session's first call of a tool)
        await round_("warm-up")
        spies = []
        py_spy = Path(sys.executable).with_name("py-spy")
        if args.profile and not py_spy.exists():
            raise SystemExit(f"--profile needs py-spy next to {sys.executable}: pip install py-spy")
        if args.profile:  # py-spy samples the gateway (and one client process) in the rounds
            for pid, out in ((gw.pid, args.profile), (workers[0].pid, f"{args.profile}.client")):
                spy = [str(py_spy), "record", "--pid", str(pid),
                       "--format", "raw", "--rate", "200", "-o", str(out)]  # fmt: skip
                spies.append(subprocess.Popen(spy, stdout=DEVNULL, stderr=DEVNULL))
            await asyncio.sleep(1.0)
        lat: list[float] = []
        gw_cpu0 = sum(gw.cpu_times()[:2])
        cpu0 = sum(r["cpu_s"] for r in await ask("cpu"))
        for i in range(args.rounds):
            lat += await round_(f"all{i}")
        gw_cpu = sum(gw.cpu_times()[:2]) - gw_cpu0
        clients_cpu = sum(r["cpu_s"] for r in await ask("cpu")) - cpu0
        for spy in spies:
            spy.send_signal(signal.SIGINT)
            spy.wait(30)
        listens = args.sessions * args.rounds
        assert len(lat) == listens, (len(lat), listens)
        results["fanout_p50_ms"] = statistics.median(lat)
        results["fanout_p90_ms"] = pct(lat, 90)
        results["fanout_p99_ms"] = pct(lat, 99)
        results["fanout_max_ms"] = max(lat)
        results["fanout_gateway_cpu_s"] = gw_cpu
        results["gateway_cpu_ms_per_listen"] = gw_cpu / listens * 1000
        results["clients_cpu_ms_per_listen"] = clients_cpu / listens * 1000
        await ask("stop")
    finally:
        for w in workers:
            with contextlib.suppress(ProcessLookupError):
                w.kill()
            await w.wait()
        await ws.close()
    return results


async def quiet(procs: list[psutil.Process], window_s: float = 0.2) -> None:
    """Return once ``procs`` together used under 2 % of a core for ``window_s`` (at least 1 s
    from now): every ``listen`` request has reached the gateway and waits there."""
    await asyncio.sleep(1.0)
    used = sum(sum(p.cpu_times()[:2]) for p in procs)
    while True:
        await asyncio.sleep(window_s)
        now = sum(sum(p.cpu_times()[:2]) for p in procs)
        if now - used < 0.02 * window_s:
            return
        used = now


async def worker(base: str, first: int, n: int) -> None:
    """A client process: ``n`` sessions; answers the orders of :func:`fan_out` on stdin."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    sessions: list[ClientSession] = []
    ready, stop = asyncio.Event(), asyncio.Event()

    async def hold(i: int) -> None:
        async with http_session(base, f"idle-{i}") as s:
            sessions.append(s)
            if len(sessions) == n:
                ready.set()
            await stop.wait()

    holders = [asyncio.create_task(hold(first + i)) for i in range(n)]
    done: list[float] = []
    calls: list[asyncio.Task[None]] = []

    async def one(s: ClientSession) -> None:
        result = await s.call_tool("listen", {"timeout_s": 30})
        done.append(time.monotonic())
        assert result.structured_content and result.structured_content["messages"], result

    def answer(x: dict[str, Any]) -> None:
        sys.stdout.write(json.dumps(x) + "\n")
        sys.stdout.flush()

    while order := (await reader.readline()).decode().strip():
        if order == "ready":
            await ready.wait()
            answer({"ready": n})
        elif order == "cpu":
            answer({"cpu_s": sum(psutil.Process().cpu_times()[:2])})
        elif order == "listen":
            done.clear()
            calls = [asyncio.create_task(one(s)) for s in sessions]
            await asyncio.sleep(0)
            answer({"listening": n})
        elif order == "collect":
            await asyncio.gather(*calls)
            answer({"done": done})
        elif order == "stop":
            break
    stop.set()
    await asyncio.gather(*holders, return_exceptions=True)
    answer({"stopped": n})


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=200)
    ap.add_argument("--sessions", type=int, default=200)
    ap.add_argument("--workers", type=int, default=4, help="client processes for --sessions")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--store", choices=["memory", "sqlite"], default="memory")
    ap.add_argument("--profile", type=Path, help="py-spy raw samples of the gateway's rounds")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--worker", metavar="BASE", help=argparse.SUPPRESS)
    ap.add_argument("--first", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        asyncio.run(worker(args.worker, args.first, args.sessions))
        sys.exit(0)
    out = asyncio.run(main(args))
    print(json.dumps(out, indent=2))
    if args.json:
        args.json.write_text(json.dumps(out, indent=2))
