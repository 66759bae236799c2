"""How long one envelope's capability check holds the gateway, for hostile patterns (issue 21).

Usage::

    .venv/bin/python benchmarks/hostile_capabilities.py [--max-seconds 30]

The gateway checks capabilities on its event loop, so the time one check takes is the time
every other client (and ``/health``) waits. Each case is a capability list and an envelope as
an attacker would send them (``CapabilitySet.allows``, the call the gateway makes); the script
prints the milliseconds one check took and its answer (median of 5, or a single run past
100 ms). A case whose size doubles while it is still under ``--max-seconds`` is measured at the
next size too, so a backtracking matcher shows its growth (cubic, quadratic) and a linear one
reaches the largest size at once.

To measure another version of the matcher, put its ``src`` first on ``PYTHONPATH``. Numbers:
docs/reliability.md#hostile-capabilities.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import time
from collections.abc import Callable
from typing import Any

from hubbub.protocol.capabilities import CapabilitySet

Case = tuple[str, list[dict[str, Any]], Callable[[int], tuple[str, dict[str, Any]]], list[int]]

CASES: list[Case] = [
    (
        "open mode: text '*a*a*b', chat of n x 'a'",
        [{"kind": "chat", "payload": {"text": "*a*a*b"}}],
        lambda n: ("chat", {"text": "a" * n}),
        [1024, 2048, 4096, 65_000],
    ),
    (
        "open mode: text '*a*a*b', chat of n x 'a' then '/' (the automaton, not str.find)",
        [{"kind": "chat", "payload": {"text": "*a*a*b"}}],
        lambda n: ("chat", {"text": "a" * n + "/"}),
        [1024, 2048, 4096, 65_000],
    ),
    (
        "token mode: params.name '*search*', name of n chars ('search'... + '/')",
        [{"kind": "mcp/request", "payload": {"params": {"name": "*search*"}}}],
        lambda n: ("mcp/request", {"params": {"name": "search" * (n // 6) + "/"}}),
        [15_000, 30_000, 60_000],
    ),
    (
        "n runaway /regex/ entries in one capability, 41-char chat",
        [],  # built per size below
        lambda n: ("chat", {"text": "a" * 40 + "!"}),
        [10, 100, 1000],
    ),
]


def _caps(index: int, base: list[dict[str, Any]], n: int) -> list[dict[str, Any]]:
    if index == 3:
        return [{"kind": "chat", "payload": {"text": [f"/(a|aa)+{i}$/" for i in range(n)]}}]
    return base


def _time(caps: CapabilitySet, kind: str, payload: dict[str, Any]) -> tuple[float, bool]:
    runs: list[float] = []
    answer = False
    for _ in range(5):
        start = time.perf_counter()
        answer = caps.allows(kind, payload)
        runs.append((time.perf_counter() - start) * 1000)
        if runs[-1] > 100:
            break
        caps = CapabilitySet(caps.capabilities)  # a fresh set: no cached kind answers
    return statistics.median(runs), answer


def main() -> None:
    """Measure every case at growing sizes and print a table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-seconds", type=float, default=30.0)
    args = parser.parse_args()
    logging.getLogger("hubbub.capabilities").setLevel(logging.ERROR)  # one warning per check
    for index, (title, base, envelope, sizes) in enumerate(CASES):
        print(title)
        for n in sizes:
            try:
                caps = CapabilitySet(_caps(index, base, n))
            except ValueError as exc:
                print(f"  n={n:>6}: refused at validation: {exc}")
                continue
            ms, answer = _time(caps, *envelope(n))
            print(f"  n={n:>6}: {ms:10.2f} ms  allowed={answer}")
            if ms / 1000 > args.max_seconds / 8:  # the next size could take past the limit
                print("  (larger sizes skipped: they would take longer than --max-seconds)")
                break


if __name__ == "__main__":
    main()
