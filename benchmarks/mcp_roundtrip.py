"""MCP round-trip benchmark: ``tools/call`` between two participants through the gateway.

Usage::

    .venv/bin/python benchmarks/mcp_roundtrip.py [--calls 5000] [--seconds 5] [--json out.json]

Three processes, as in a deployment: the gateway (``hubbub serve``, SQLite store, rate limit
off), a responder Participant ``calc`` offering a typed ``add(a: int, b: int)`` tool, and the
requester Participant in this process. Every call is a full MCP round trip: the requester's
``call_tool`` sends an ``mcp/request`` DM, the gateway validates, stores and routes it (and
echoes it back), ``calc`` validates the arguments against the schema, runs the tool and sends
the ``mcp/response``, which the gateway routes back; ``call_tool`` returns the parsed
``CallToolResult``.

Measured:

1. latency with one call in flight: p50/p90/p99/max over ``--calls`` calls (after warm-up);
2. throughput with ``--inflight`` (16) calls in flight for ``--seconds``: calls/s, and the
   latency percentiles under that load.

Targets (issue "SDK layers 1-2"): p50 <= 1 ms, p99 <= 5 ms, >= 3,000 calls/s with 16 in flight.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil

from _fanout.servers import ServerProc, hubbub_env  # the script's directory is on sys.path
from hubbub.sdk import Participant
from hubbub.sdk.tools import result_text

TARGETS = {"p50_ms": 1.0, "p99_ms": 5.0, "calls_per_s": 3000.0}


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def percentiles(samples_ns: list[int]) -> dict[str, float]:
    """p50/p90/p99/max/mean in milliseconds."""
    ordered = sorted(samples_ns)
    n = len(ordered)

    def at(q: float) -> float:
        return ordered[min(n - 1, int(q * n))] / 1e6

    return {
        "n": n,
        "p50_ms": at(0.50),
        "p90_ms": at(0.90),
        "p99_ms": at(0.99),
        "max_ms": ordered[-1] / 1e6,
        "mean_ms": statistics.fmean(ordered) / 1e6,
    }


async def responder(url: str) -> None:
    """The ``calc`` participant: one typed tool, served until killed."""
    calc = Participant(gateway=url, participant_id="calc", kind="service", heartbeat_interval=None)

    @calc.tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    async with calc:
        print("ready", flush=True)
        await calc.serve_forever()


async def one_call(p: Participant, i: int) -> int:
    """One timed call; returns nanoseconds."""
    started = time.perf_counter_ns()
    result = await p.call_tool("calc", "add", {"a": i, "b": 1})
    elapsed = time.perf_counter_ns() - started
    if result_text(result) != str(i + 1):
        raise AssertionError(f"wrong answer {result}")
    return elapsed


def cpu_of(procs: dict[str, psutil.Process]) -> dict[str, float]:
    """CPU seconds (user + system) used so far by each process."""
    out = {}
    for name, proc in procs.items():
        times = proc.cpu_times()
        out[name] = times.user + times.system
    return out


async def measure(
    url: str, calls: int, inflight: int, seconds: float, procs: dict[str, psutil.Process]
) -> dict[str, Any]:
    async with Participant(
        gateway=url, participant_id="bench", heartbeat_interval=None, request_timeout=10
    ) as bench:
        await bench.client.wait_for_participant("calc", timeout=30)
        log("warming up ...")
        for i in range(1000):
            await one_call(bench, i)

        log(f"latency: {calls} sequential calls ...")
        sequential = [await one_call(bench, i) for i in range(calls)]
        latency = percentiles(sequential)

        log(f"throughput: {inflight} in flight for {seconds:g} s ...")
        loaded: list[int] = []
        stop_at = time.perf_counter() + seconds

        async def worker(w: int) -> int:
            done = 0
            while time.perf_counter() < stop_at:
                loaded.append(await one_call(bench, w * 1_000_000 + done))
                done += 1
            return done

        cpu_before = cpu_of(procs)
        started = time.perf_counter()
        counts = await asyncio.gather(*(worker(w) for w in range(inflight)))
        wall = time.perf_counter() - started
        cpu_after = cpu_of(procs)
        throughput: dict[str, Any] = {"inflight": inflight, "calls": sum(counts), "seconds": wall}
        throughput["calls_per_s"] = sum(counts) / wall
        throughput["cpu_cores"] = {
            name: (cpu_after[name] - cpu_before[name]) / wall for name in procs
        }
        throughput["latency"] = percentiles(loaded)
        return {"latency": latency, "throughput": throughput}


async def run(args: argparse.Namespace) -> dict[str, Any]:
    gateway = ServerProc.hubbub()
    gateway.argv += ["--log-level", "warning"]
    log(f"starting the gateway on port {gateway.port} ...")
    await gateway.start()
    url = f"ws://127.0.0.1:{gateway.port}/ws"
    calc = subprocess.Popen(
        [sys.executable, __file__, "--responder", url],
        env=hubbub_env(),
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert calc.stdout is not None
        if calc.stdout.readline().strip() != "ready":
            raise RuntimeError("the responder did not start")
        assert gateway.ps is not None
        procs = {
            "gateway": gateway.ps,
            "responder": psutil.Process(calc.pid),
            "requester": psutil.Process(),
        }
        results = await measure(url, args.calls, args.inflight, args.seconds, procs)
    finally:
        calc.terminate()
        calc.wait(10)
        gateway.stop()
    results["machine"] = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
    }
    return results


def report(results: dict[str, Any]) -> None:
    lat = results["latency"]
    thr = results["throughput"]
    tl = thr["latency"]

    def verdict(ok: bool) -> str:
        return "ok " if ok else "MISS"

    print(f"machine: {results['machine']}")
    print(
        f"1 in flight ({lat['n']} calls): p50 {lat['p50_ms']:.3f} ms, p90 {lat['p90_ms']:.3f} ms,"
        f" p99 {lat['p99_ms']:.3f} ms, max {lat['max_ms']:.2f} ms, mean {lat['mean_ms']:.3f} ms"
    )
    print(
        f"{thr['inflight']} in flight ({thr['calls']} calls in {thr['seconds']:.1f} s): "
        f"{thr['calls_per_s']:.0f} calls/s; p50 {tl['p50_ms']:.3f} ms, p99 {tl['p99_ms']:.3f} ms"
    )
    cores = ", ".join(f"{k} {v:.2f}" for k, v in thr["cpu_cores"].items())
    print(f"  CPU cores used during the window: {cores}")
    print(f"  [{verdict(lat['p50_ms'] <= TARGETS['p50_ms'])}] p50 <= 1 ms")
    print(f"  [{verdict(lat['p99_ms'] <= TARGETS['p99_ms'])}] p99 <= 5 ms")
    print(f"  [{verdict(thr['calls_per_s'] >= TARGETS['calls_per_s'])}] >= 3,000 calls/s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else "")
    parser.add_argument("--calls", type=int, default=5000, help="sequential calls timed")
    parser.add_argument("--inflight", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=5.0, help="throughput window")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--responder", metavar="URL", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.responder:
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(responder(args.responder))
        return
    results = asyncio.run(run(args))
    report(results)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
