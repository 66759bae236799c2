"""The crash harness's short run: 3 ``kill -9`` of a real gateway lose, duplicate, skip and
renumber nothing that was acknowledged (benchmarks/crash.py; the long run takes --kills 20)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # kills `hubbub serve` processes

ROOT = Path(__file__).resolve().parents[2]


def test_three_kills_lose_nothing_acknowledged() -> None:
    run = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "crash.py"), "--kills", "3", "--seed", "7"],
        capture_output=True,
        text=True,
        timeout=110,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "PASS" in run.stdout
