"""A cluster node's start-up tells the truth: "serving" only once the port is bound."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from tests.cluster.redis_server import RedisServer
from tests.ports import reserve_port

pytestmark = pytest.mark.timeout(60)


def test_a_node_on_a_taken_port_says_so_and_not_that_it_serves(
    redis_server: RedisServer,
) -> None:
    port = reserve_port()
    argv = ["serve", "--port", str(port), "--cluster", redis_server.url, "--node", "n0"]
    with socket.create_server(("127.0.0.1", port)):
        result = subprocess.run(
            [sys.executable, "-m", "hubbub", *argv],
            capture_output=True,
            text=True,
            timeout=30,
            env=os.environ | {"PYTHONUNBUFFERED": "1"},
        )
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    assert "serving ws://" not in result.stderr and "dashboard:" not in result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith(f"Error: cannot listen on 127.0.0.1:{port}: Address already in use")
