"""A stop that hangs after SIGTERM ends the process anyway (a cluster worker whose parent was
killed and whose Redis is gone stayed alive for over an hour before this)."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

HANGS_ON_STOP = """
import asyncio, sys
import hubbub.process as p
p.STOP_GRACE_S = 0.5

async def main() -> None:
    print("ready", flush=True)
    while True:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            pass  # a stop that never finishes

p.run_until_signal(main, "stuck")
"""


@pytest.mark.slow  # a process
def test_a_stop_that_hangs_is_ended_after_the_grace_period() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", HANGS_ON_STOP],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        # main prints "ready": the signal handlers were installed before it ran
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 1
        assert proc.stderr is not None
        assert "stuck: the stop took over 0.5 s; exiting now" in proc.stderr.read()
    finally:
        proc.kill()
