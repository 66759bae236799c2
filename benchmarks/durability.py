"""What durability costs: the SQLite store's group commits at ``process`` vs ``power``.

Usage::

    .venv/bin/python benchmarks/durability.py [--messages 20000] [--burst 100]

The store (``hubbub.store.SqliteStore``, the gateway's default) is driven directly: bursts of
``--burst`` messages of 300 bytes are appended and the time until the store calls back
``after_commit`` (the moment the gateway may echo and fan out) is measured per burst, and in
total. A burst of 1 is one message at a time (each waits for its own commit), the worst
case for ``power``, where every commit is an fsync. Prints messages/s and the commit wait
p50/p99 for each level; the difference is the price of surviving a power loss.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from hubbub.store.base import Durability, MessageRef
from hubbub.store.sqlite import SqliteStore


async def measure(level: Durability, messages: int, burst: int) -> dict[str, float]:
    """Messages/s and commit-wait percentiles for one durability level."""
    with tempfile.TemporaryDirectory(prefix="hubbub-durability-") as tmp:
        store = SqliteStore(Path(tmp) / "h.db", durability=level)
        await store.open()
        data = b"x" * 300
        waits: list[float] = []
        loop = asyncio.get_running_loop()
        start = time.perf_counter()
        seq = 0
        while seq < messages:
            done = loop.create_future()
            t0 = time.perf_counter()
            for _ in range(min(burst, messages - seq)):
                seq += 1
                ref = MessageRef(f"m{seq}", "bench", "#general", seq, seq)
                store.append("default", "#general", seq, data, ref)
            store.after_commit(lambda fut=done: fut.set_result(None))
            await done
            waits.append((time.perf_counter() - t0) * 1000)
        elapsed = time.perf_counter() - start
        await store.close()
    waits.sort()
    return {
        "messages_per_s": messages / elapsed,
        "p50_ms": statistics.median(waits),
        "p99_ms": waits[min(len(waits) - 1, int(0.99 * len(waits)))],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--burst", type=int, default=100)
    args = parser.parse_args()
    print(f"SQLite group commits, {args.messages} messages of 300 B in bursts of {args.burst}")
    print("  durability   messages/s   commit wait p50   p99")
    for level in ("process", "power"):
        r = asyncio.run(measure(level, args.messages, args.burst))  # type: ignore[arg-type]
        print(f"  {level:<10} {r['messages_per_s']:>12,.0f}   {r['p50_ms']:>12.3f} ms"
              f"   {r['p99_ms']:.3f} ms")  # fmt: skip


if __name__ == "__main__":
    main()
