"""The crash harness against a 3-node cluster: 3 ``kill -9`` of random nodes (the leader
among them) and 2 graceful hand-offs of the busy space's lead lose, duplicate, skip and
renumber nothing acknowledged (benchmarks/crash.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # kills cluster node processes

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(260)
def test_kills_and_hand_offs_of_cluster_nodes_lose_nothing_acknowledged() -> None:
    run = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "crash.py"),
            *("--kills", "3", "--seed", "7"),
            *("--cluster", "3", "--handoffs", "2"),
        ],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "PASS" in run.stdout
    assert "acknowledged_but_lost   0" in run.stdout
    assert "handoffs                2" in run.stdout
