"""``hubbub serve --cluster URL --workers N``: N real node processes sharing one port."""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path

import aiohttp

from tests.cluster.nodes import ClusterNode
from tests.cluster.redis_server import RedisServer


async def test_workers_named_with_node_get_one_name_each_and_form_one_cluster(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    node = ClusterNode("w", redis_server.url, tmp_path, extra=["--node", "w", "--workers", "2"])
    node.spawn()
    try:
        names: set[str] = set()
        deadline = time.monotonic() + 30
        last = None
        while time.monotonic() < deadline:
            with contextlib.suppress(aiohttp.ClientError, OSError, TimeoutError):
                last = await node.health()
                names = {n["node"] for n in last["cluster"]["nodes"]}
                if last["status"] == "ok" and names == {"w-0", "w-1"}:
                    break
            await asyncio.sleep(0.1)
        assert names == {"w-0", "w-1"}, f"nodes seen: {last}"
        assert last is not None and last["cluster"]["leader"] in names
    finally:
        node.stop()
