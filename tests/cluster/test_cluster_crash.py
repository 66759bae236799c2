"""The crash harness against a 3-node cluster: 3 ``kill -9`` of random nodes (the leader
among them) lose, duplicate, skip and renumber nothing acknowledged (benchmarks/crash.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # kills cluster node processes

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(200)
def test_three_kills_of_cluster_nodes_lose_nothing_acknowledged() -> None:
    run = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "crash.py"),
            *("--kills", "3", "--seed", "7"),
            *("--cluster", "3"),
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "PASS" in run.stdout
    assert "acknowledged_but_lost   0" in run.stdout
