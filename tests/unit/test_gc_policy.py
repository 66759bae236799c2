"""A hubbub process collects young garbage every YOUNG_GC_THRESHOLD allocations, not Python's
700: with many MCP sessions waiting in ``listen``, the default made one full collection over
the whole heap per round of deliveries (docs/performance.md)."""

from __future__ import annotations

import subprocess
import sys

from hubbub.process import YOUNG_GC_THRESHOLD

SHOW_THRESHOLD = """
import asyncio, gc
import hubbub.process as p

async def main() -> None:
    print(gc.get_threshold()[0], gc.get_freeze_count() > 0, flush=True)

p.run_until_signal(main, "gc")
"""


def test_a_hubbub_process_runs_with_the_raised_young_threshold() -> None:
    out = subprocess.run(
        [sys.executable, "-c", SHOW_THRESHOLD], capture_output=True, text=True, timeout=60
    )
    threshold, frozen = out.stdout.split()
    assert int(threshold) == YOUNG_GC_THRESHOLD > 700
    assert frozen == "True"  # the start-up objects are still frozen
