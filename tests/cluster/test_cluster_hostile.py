"""A cluster node under hostile conditions: a password in its Redis URL, floods of its link."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cluster.nodes import ClusterNode, stop_cluster
from tests.cluster.redis_server import RedisServer

pytestmark = pytest.mark.timeout(120)

PASSWORD = "hunter2-link-secret"


@pytest.fixture
def locked_redis(tmp_path: Path) -> Iterator[RedisServer]:
    """A redis-server that requires ``PASSWORD``."""
    server = RedisServer(tmp_path / "redis", password=PASSWORD)
    server.start()
    try:
        yield server
    finally:
        server.stop()


async def test_the_redis_password_shows_nowhere(locked_redis: RedisServer, tmp_path: Path) -> None:
    base = f"127.0.0.1:{locked_redis.port}/0"
    nodes = [
        ClusterNode("node0", f"redis://{base}?password={PASSWORD}", tmp_path),
        ClusterNode("node1", f"redis://default:{PASSWORD}@{base}", tmp_path),
    ]
    try:
        for node in nodes:
            node.spawn()
            health = await node.wait_ready()  # it reached Redis with the password
            shown = json.dumps(health)
            assert PASSWORD not in shown
            assert f"{base}" in health["cluster"]["redis"]["url"]
            assert "***" in health["cluster"]["redis"]["url"]
        for node in nodes:
            log = node.log.read_text()
            assert "***" in log  # the startup line names the (redacted) Redis URL
            assert PASSWORD not in log
    finally:
        await stop_cluster(nodes)
