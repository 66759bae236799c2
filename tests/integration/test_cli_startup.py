"""Start-up tells the truth: what `hubbub serve` and `hubbub demo` print about where they serve
is printed only once the port is bound; a port the user named that is taken, or a Redis that
is not there, is one clear error and a non-zero exit within seconds (the real commands, as
subprocesses)."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator

import pytest

from tests.ports import reserve_port

pytestmark = pytest.mark.slow  # `hubbub` processes

STARTUP_TIMEOUT_S = 10
"""Each refused start must be over within this (a test timeout, not a timed assertion)."""

SERVING_LINES = ("serving ws://", "dashboard:", "chat:", "open the dashboard")


def _hubbub(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hubbub", *args],
        capture_output=True,
        text=True,
        timeout=STARTUP_TIMEOUT_S,
        env=os.environ | {"PYTHONUNBUFFERED": "1"},
    )


def _one_clear_error(result: subprocess.CompletedProcess[str]) -> str:
    """The one ``Error:`` paragraph of a refused start: exit 1, no traceback, nothing that
    says it serves."""
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    assert "Traceback" not in output, output
    for line in SERVING_LINES:
        assert line not in output, output
    errors = [line for line in output.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, output
    return errors[0]


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A port something else listens on."""
    port = reserve_port()
    with socket.create_server(("127.0.0.1", port)):
        yield port


def test_serve_on_a_taken_port_says_only_that(taken_port: int) -> None:
    error = _one_clear_error(_hubbub("serve", "--port", str(taken_port), "--store", "memory"))
    assert f"cannot listen on 127.0.0.1:{taken_port}: Address already in use" in error
    assert "--port" in error


def test_demo_on_a_taken_port_it_was_given_is_an_error(taken_port: int) -> None:
    error = _one_clear_error(_hubbub("demo", "--once", "--port", str(taken_port)))
    assert f"cannot listen on 127.0.0.1:{taken_port}: Address already in use" in error
    assert "choose another --port, or leave --port out" in error


def test_serve_with_an_unreachable_redis_exits_with_one_paragraph() -> None:
    port = reserve_port()
    result = _hubbub("serve", "--port", str(port), "--cluster", "redis://127.0.0.1:1")
    error = _one_clear_error(result)
    assert "cannot reach Redis at redis://127.0.0.1:1 (--cluster)" in error
    assert "Start redis-server there" in error and "point --cluster" in error
    with socket.socket() as s:  # the port was never bound
        assert s.connect_ex(("127.0.0.1", port)) != 0


def test_serve_on_any_port_says_the_port_it_bound() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "hubbub", "serve", "--port", "0", "--store", "memory"],
        stderr=subprocess.PIPE,
        text=True,
        env=os.environ | {"PYTHONUNBUFFERED": "1"},
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()  # the first line: nothing is said before the bind
        found = re.search(r"serving ws://127\.0\.0\.1:(\d+)/ws", line)
        assert found, line
        port = int(found[1])
        assert port != 0
        with socket.create_connection(("127.0.0.1", port), timeout=STARTUP_TIMEOUT_S) as s:
            s.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            assert s.recv(100).startswith(b"HTTP/1.1 200")
        assert f"dashboard: http://127.0.0.1:{port}/dashboard" in proc.stderr.readline()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(STARTUP_TIMEOUT_S) == 0
    finally:
        proc.kill()


def test_workers_with_an_unreachable_redis_start_none() -> None:
    port = reserve_port()
    argv = ["serve", "--port", str(port), "--cluster", "redis://127.0.0.1:1", "--workers", "2"]
    error = _one_clear_error(_hubbub(*argv))
    assert "cannot reach Redis at redis://127.0.0.1:1 (--cluster)" in error
