"""What the cluster's store costs: RedisStore's group commits on a real ``redis-server``.

Usage::

    .venv/bin/python benchmarks/redis_store.py [--messages 20000] [--fsync always|everysec]

A ``redis-server`` is started on a free port in a temporary directory (AOF on, fsync as
``--fsync`` says), and ``hubbub.store.RedisStore`` is driven directly, as the leader drives it:
channel messages of 300 bytes, each with its id record, in bursts of 100 and then one at a
time (each waits for its own commit). For each it prints messages/s, the commit wait p50/p99
(append to ``after_commit``: the moment the gateway may echo and fan out), the gateway's CPU
per message, and Redis' CPU per message from ``INFO cpu`` (used_cpu_sys + used_cpu_user
deltas; target <= 30 µs in bursts of 100; one at a time, every message pays a whole commit).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.cluster.redis_server

from tests.cluster.redis_server import RedisServer

from hubbub.store.base import MessageRef
from hubbub.store.redis import RedisStore, redis_client

TARGET_REDIS_US = 30.0


async def redis_cpu_s(client: Any) -> float:
    """Redis' CPU time so far (user + system), in seconds."""
    info = await client.info("cpu")
    return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])


async def measure(url: str, messages: int, burst: int, run: int) -> dict[str, float]:
    """Messages/s, commit-wait percentiles and CPU per message for one burst size."""
    client = redis_client(url)
    store = RedisStore(client, prefix=f"bench{run}")
    await store.open()
    data = b"x" * 300
    waits: list[float] = []
    loop = asyncio.get_running_loop()
    redis_before, cpu_before = await redis_cpu_s(client), time.process_time()
    start = time.perf_counter()
    seq = 0
    while seq < messages:
        done = loop.create_future()
        t0 = time.perf_counter()
        for _ in range(min(burst, messages - seq)):
            seq += 1
            ref = MessageRef(f"01J{run}{seq:020d}", "bench", "#general", seq, 1_700_000_000_000)
            store.append("default", "#general", seq, data, ref)
        store.after_commit(lambda fut=done: fut.set_result(None))
        await done
        waits.append((time.perf_counter() - t0) * 1000)
    elapsed = time.perf_counter() - start
    cpu = time.process_time() - cpu_before
    redis_cpu = await redis_cpu_s(client) - redis_before
    await store.close()
    await client.aclose()
    waits.sort()
    return {
        "messages_per_s": messages / elapsed,
        "p50_ms": statistics.median(waits),
        "p99_ms": waits[min(len(waits) - 1, int(0.99 * len(waits)))],
        "gateway_us": cpu / messages * 1e6,
        "redis_us": redis_cpu / messages * 1e6,
        "commits": store.commits,
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=20_000, help="messages per burst size")
    parser.add_argument("--fsync", choices=["always", "everysec"], default="always")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="hubbub-redis-bench-") as tmp:
        persistence = ("--save", "", "--appendonly", "yes", "--appendfsync", args.fsync)
        server = RedisServer(Path(tmp), persistence)
        server.start()
        try:
            load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
            print(
                f"redis-server, AOF appendfsync {args.fsync}; 300-byte messages with id "
                f"records; load average before: {load}"
            )
            print(
                f"{'burst':>5} {'messages':>8} {'commits':>7} {'msg/s':>9} {'p50 ms':>7} "
                f"{'p99 ms':>7} {'gateway µs/msg':>14} {'redis µs/msg':>12}"
            )
            batched = single = 0.0
            for run, burst in enumerate((100, 1)):
                n = args.messages if burst > 1 else max(1, args.messages // 10)
                r = await measure(server.url, n, burst, run)
                if burst > 1:
                    batched = r["redis_us"]
                else:
                    single = r["redis_us"]
                print(
                    f"{burst:>5} {n:>8} {r['commits']:>7.0f} {r['messages_per_s']:>9.0f} "
                    f"{r['p50_ms']:>7.2f} {r['p99_ms']:>7.2f} {r['gateway_us']:>14.1f} "
                    f"{r['redis_us']:>12.1f}"
                )
            verdict = "PASS" if batched <= TARGET_REDIS_US else "FAIL"
            print(
                f"Redis CPU per message in bursts of 100: {batched:.1f} µs "
                f"(target <= {TARGET_REDIS_US:.0f} µs: {verdict}); one at a time every message "
                f"pays a whole commit (round trip, AOF write): {single:.1f} µs"
            )
        finally:
            server.stop()


if __name__ == "__main__":
    asyncio.run(main())
