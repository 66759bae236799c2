"""The SQLite store when its file or its disk fails: a clear message, an honest /health."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from hubbub.store.base import MessageRef
from hubbub.store.sqlite import SqliteStore

START_TIMEOUT_S = 30


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _serve(data_dir: Path) -> subprocess.CompletedProcess[str]:
    """``hubbub serve`` on ``data_dir`` until it exits by itself (it must, the file is bad)."""
    cmd = [sys.executable, "-m", "hubbub", "serve", "--port", str(_free_port())]
    return subprocess.run(
        [*cmd, "--data-dir", str(data_dir)],
        capture_output=True,
        text=True,
        timeout=START_TIMEOUT_S,
        env=os.environ | {"PYTHONUNBUFFERED": "1"},
        check=False,
    )


async def _history_file(path: Path, messages: int) -> None:
    """A real gateway history: ``messages`` channel messages with their id records."""
    store = SqliteStore(path)
    await store.open()
    body = b'{"kind":"chat","payload":{"text":"' + b"x" * 300 + b'"}}'
    for seq in range(1, messages + 1):
        ref = MessageRef(f"m{seq}", "alice", "#general", seq, 1)
        store.append("default", "#general", seq, body, ref)
    await store.close()


def _garble(path: Path, at: float, size: int) -> None:
    """Overwrite ``size`` bytes at fraction ``at`` of the file (a torn write, a bad sector)."""
    data = bytearray(path.read_bytes())
    start = int(len(data) * at)
    data[start : start + size] = b"\x13" * size
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("damage", ["header", "pages"])
async def test_a_corrupt_history_file_stops_the_start_with_one_sentence_and_the_fix(
    tmp_path: Path, damage: str
) -> None:
    db = tmp_path / "hubbub.db"
    await _history_file(db, 3000)
    _garble(db, 0.0 if damage == "header" else 0.5, 8192)
    result = _serve(tmp_path)
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    error = [line for line in result.stderr.splitlines() if line.startswith("Error: ")]
    assert len(error) == 1, result.stderr
    assert str(db) in error[0] and "damaged" in error[0]
    assert ".recover" in error[0] and "--data-dir" in error[0]  # the fixes
