"""Test servers' ports: held from the pick to the bind, never one the kernel hands out itself."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.ports import ephemeral_range, reserve_port

ROOT = Path(__file__).resolve().parents[2]


def test_a_reserved_port_is_outside_the_kernels_ephemeral_range() -> None:
    low, high = ephemeral_range()
    ports = [reserve_port() for _ in range(20)]
    assert len(set(ports)) == 20
    assert all(not low <= p <= high for p in ports)


def test_another_process_never_gets_a_port_this_one_holds() -> None:
    mine = {reserve_port() for _ in range(200)}
    code = "import json; "
    code += "from tests.ports import reserve_port as r; "
    code += "print(json.dumps([r() for _ in range(200)]))"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    theirs = set(json.loads(done.stdout))
    assert len(theirs) == 200
    assert not mine & theirs
