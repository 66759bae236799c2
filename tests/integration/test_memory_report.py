"""``HUBBUB_TRACEMALLOC``: a real ``hubbub serve`` logs where its memory grew on SIGUSR1."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import websockets.sync.client

from tests.ports import reserve_port

pytestmark = pytest.mark.slow  # `hubbub serve` processes

SERVE = [sys.executable, "-m", "hubbub", "serve", "--rate-limit", "0"]


def _serve(tmp_path: Path, port: int, tracemalloc: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*SERVE, "--port", str(port), "--data-dir", str(tmp_path)],
        stderr=subprocess.PIPE,
        text=True,
        env=os.environ | {"PYTHONUNBUFFERED": "1", "HUBBUB_TRACEMALLOC": tracemalloc},
    )


def _read_until(proc: subprocess.Popen[str], pattern: str, seen: list[str]) -> str:
    """Log lines up to the one matching ``pattern`` (appended to ``seen``)."""
    assert proc.stderr is not None
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            raise AssertionError("server exited:\n" + "".join(seen))
        seen.append(line)
        if re.search(pattern, line):
            return line
    raise AssertionError(f"no log line matching {pattern!r}:\n" + "".join(seen))


def _connect(port: int) -> websockets.sync.client.ClientConnection:
    """A WebSocket to the gateway, once it listens."""
    for _ in range(100):
        try:
            return websockets.sync.client.connect(f"ws://127.0.0.1:{port}/ws")
        except OSError:
            time.sleep(0.1)
    raise AssertionError("the gateway did not start listening")


def test_sigusr1_logs_what_grew_since_the_previous_report(tmp_path: Path) -> None:
    port = reserve_port()
    proc = _serve(tmp_path, port, "1")
    seen: list[str] = []
    try:
        _read_until(proc, r"tracing allocations; `kill -USR1 \d+`", seen)
        with _connect(port) as ws:
            ws.send(json.dumps({"type": "join", "participantId": "alice"}))
            for i in range(300):
                ws.send(json.dumps({"kind": "chat", "payload": {"text": f"hello {i}"}}))
            while "hello 299" not in str(ws.recv(timeout=10)):
                pass
            proc.send_signal(signal.SIGUSR1)
            first = _read_until(proc, r"memory report #1 ", seen)
        proc.send_signal(signal.SIGUSR1)
        second = _read_until(proc, r"memory report #2 ", seen)
    finally:
        proc.kill()
        proc.wait(10)
    for report in (first, second):
        for figure in ("RSS", "Python traced", "SQLite", "malloc in use"):
            assert re.search(figure + r" \d+\.\d MiB \([+-]\d+\.\d\d\)", report), report
    body = "".join(seen[seen.index(first) + 1 : seen.index(second)])
    lines = re.findall(
        r"^ +([+-]\d+\.\d+) MiB +([+-]\d+) blocks +now +\d+\.\d+ MiB +(\S+)$", body, re.M
    )
    assert lines, body
    where = [place for _mib, _blocks, place in lines]
    assert any("hubbub" in place for place in where), where  # the gateway's own lines show


def test_a_bad_value_is_refused_with_the_fix(tmp_path: Path) -> None:
    proc = _serve(tmp_path, reserve_port(), "lots")
    _out, err = proc.communicate(timeout=30)
    assert proc.returncode != 0
    assert "HUBBUB_TRACEMALLOC='lots' is not a number of stack frames" in err
    assert "set it to 1-100" in err and "0 / unset for off" in err
