"""Cluster fixtures: a real ``redis-server`` per test (tests fail, never skip, without it)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cluster.redis_server import RedisServer


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    """A running ``redis-server`` on a free port with AOF (``appendfsync always``) in a
    temporary directory; ``.url``, ``.port``, ``.kill9()``, ``.restart()``, ``.stop()``."""
    server = RedisServer(tmp_path / "redis")
    server.start()
    try:
        yield server
    finally:
        server.stop()
