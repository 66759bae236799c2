"""Soak test: a real gateway under steady load for many minutes; does anything grow or slow?

Usage::

    .venv/bin/python benchmarks/soak.py [--minutes 10] [--clients 500] [--rate 50] [--json out.json]

A real ``python -m hubbub serve --rate-limit 0`` (SQLite store, delivery after the group
commit) gets ``--clients`` MEW clients in ``#general`` (the fan-out benchmark's raw WebSocket
client) and one sender posting ``--rate`` messages per second, each stamped with its send
time. Every client counts what it receives; 20 of them also parse every frame and time
send → receive. Each minute prints the server's RSS, open file descriptors, event-loop tasks
(``hubbub_event_loop_tasks`` from ``/metrics``) and the delivery latency p50/p99 of that
minute, and checks that every message reached every client (lost = expected − received).

``--memory-report FILE`` runs the gateway with ``HUBBUB_TRACEMALLOC=1``, signals it
(``SIGUSR1``) after each minute and saves its memory reports (RSS, Python, SQLite and malloc
figures, and the source lines that grew) to FILE; tracing inflates the RSS column, so judge
growth on a run without it. ``--server-env KEY=VALUE`` passes more environment to the gateway
(e.g. ``MALLOC_ARENA_MAX=2``).

Targets (issue "Every promise holds", over 30 minutes): RSS growth after the first minute
≤ 5 %, last minute's p99 ≤ 1.5 × the first minute's, nothing lost. The verdict is printed; the
exit status is 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import signal
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import aiohttp

from _fanout.rawws import Tally
from _fanout.scenarios import LatencyProbe, PacedSender, close_clients, open_clients
from _fanout.servers import ServerProc, raise_nofile_limit

PROBES = 20


def pct(values: list[int], q: float) -> float:
    """The q-quantile of ``values`` in ms (0 when empty)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] / 1e6


async def loop_tasks(port: int) -> int:
    """The gateway's event-loop task count, from /metrics."""
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"http://127.0.0.1:{port}/metrics") as resp,
    ):
        for line in (await resp.text()).splitlines():
            if line.startswith("hubbub_event_loop_tasks "):
                return int(float(line.split()[1]))
    return -1


async def soak(
    minutes: int,
    n_clients: int,
    rate: float,
    server_env: dict[str, str],
    memory_report: Path | None = None,
) -> dict[str, Any]:
    server = ServerProc.hubbub()
    assert server.env is not None
    server.env |= server_env
    if memory_report is not None:
        server.env["HUBBUB_TRACEMALLOC"] = "1"
    await server.start()
    tally = Tally()
    try:
        clients = await open_clients(server, "mew", [f"c{i}" for i in range(n_clients)], tally)
        sender_client = (await open_clients(server, "mew", ["sender"], tally))[0]
        for c in (*clients, sender_client):
            c.counting = True
        samples: list[int] = []
        window = [0, 2**63]
        bad: list[str] = []
        for c in clients[:PROBES]:
            c.handler = LatencyProbe("mew", samples, window, bad)
        sender = PacedSender(sender_client, "mew", "sender")
        assert server.ps is not None
        rows: list[dict[str, Any]] = []
        sent = 0
        interval = 1 / rate
        start = time.monotonic()
        print(f"soak: {n_clients} clients, {rate:g} msg/s, {minutes} min against {server.name}")
        print("  min   RSS MiB   fds   tasks   p50 ms   p99 ms   delivered/expected")
        for minute in range(1, minutes + 1):
            samples.clear()
            end = start + minute * 60
            nxt = time.monotonic()
            while time.monotonic() < end:
                sender.send_one()
                sent += 1
                nxt += interval
                await asyncio.sleep(max(0.0, nxt - time.monotonic()))
            await asyncio.sleep(0.5)  # let the last messages of the minute arrive
            row = {
                "minute": minute,
                "rss_mib": round(server.ps.memory_info().rss / 2**20, 1),
                "fds": server.ps.num_fds(),
                "tasks": await loop_tasks(server.port),
                "p50_ms": round(pct(samples, 0.50), 2),
                "p99_ms": round(pct(samples, 0.99), 2),
                "delivered": tally.delivered,
                "expected": sent * (n_clients + 1),
            }
            rows.append(row)
            if memory_report is not None:
                server.ps.send_signal(signal.SIGUSR1)
            print(
                f"  {minute:3d}  {row['rss_mib']:8.1f}  {row['fds']:4d}  {row['tasks']:6d}"
                f"  {row['p50_ms']:7.2f}  {row['p99_ms']:7.2f}"
                f"   {row['delivered']}/{row['expected']}",
                flush=True,
            )
        await close_clients([*clients, sender_client])
    finally:
        if memory_report is not None:
            await asyncio.to_thread(shutil.copyfile, server.log_path, memory_report)
        server.stop()
    first, last = rows[0], rows[-1]
    growth = (last["rss_mib"] - first["rss_mib"]) / first["rss_mib"] * 100
    p99_ratio = last["p99_ms"] / first["p99_ms"] if first["p99_ms"] else 0.0
    lost = last["expected"] - last["delivered"]
    return {
        "minutes": rows,
        "rss_growth_pct": round(growth, 2),
        "p99_last_over_first": round(p99_ratio, 2),
        "lost": lost,
        "malformed": len(bad),
        "median_p99_ms": statistics.median(r["p99_ms"] for r in rows),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=int, default=10)
    parser.add_argument("--clients", type=int, default=500)
    parser.add_argument("--rate", type=float, default=50.0)
    parser.add_argument("--json", type=Path)
    parser.add_argument(
        "--memory-report",
        type=Path,
        metavar="FILE",
        help="trace the gateway's allocations and save a report per minute to FILE",
    )
    parser.add_argument(
        "--server-env",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra environment for the gateway (repeat for several)",
    )
    args = parser.parse_args()
    server_env = {}
    for item in args.server_env:
        key, sep, value = item.partition("=")
        if not sep or not key:
            parser.error(f"--server-env {item!r}: write it as KEY=VALUE, e.g. MALLOC_ARENA_MAX=2")
        server_env[key] = value
    raise_nofile_limit()
    result = asyncio.run(
        soak(args.minutes, args.clients, args.rate, server_env, args.memory_report)
    )
    ok_rss = result["rss_growth_pct"] <= 5.0
    ok_p99 = result["p99_last_over_first"] <= 1.5
    ok_lost = result["lost"] == 0 and result["malformed"] == 0
    print(f"RSS growth after minute 1: {result['rss_growth_pct']} % (≤ 5 %) "
          f"{'PASS' if ok_rss else 'FAIL'}")  # fmt: skip
    print(f"last-minute p99 / first-minute p99: {result['p99_last_over_first']} (≤ 1.5) "
          f"{'PASS' if ok_p99 else 'FAIL'}")  # fmt: skip
    print(f"lost: {result['lost']}, malformed: {result['malformed']} (0) "
          f"{'PASS' if ok_lost else 'FAIL'}")  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    sys.exit(0 if ok_rss and ok_p99 and ok_lost else 1)


if __name__ == "__main__":
    main()
