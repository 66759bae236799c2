"""A MEW stream across two real nodes on a real redis-server (issue 24 item 9).

Streams live with the space's pipeline on its leader; a follower's clients reach them as
they reach everything else, through the node link: their raw ``#<stream_id>#<data>``
frames go up as they arrived, and the leader's relays come down to each listed client.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.cluster.nodes import ClusterNode, start_cluster, stop_cluster
from tests.conftest import WsClient

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
async def nodes(redis_server: Any, tmp_path: Path) -> AsyncIterator[list[ClusterNode]]:
    started = await start_cluster(redis_server.url, tmp_path, 2)
    try:
        yield started
    finally:
        await stop_cluster(started)


async def stream_frame(c: WsClient, timeout: float = 10) -> str:
    """The next raw stream frame ``c`` receives (envelopes before it are skipped)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        raw = await asyncio.wait_for(c.ws.recv(), max(deadline - loop.time(), 0.01))
        if raw.startswith("#"):
            return str(raw)
        json.loads(raw)  # an envelope: skipped


async def test_a_stream_owned_on_a_follower_reaches_the_leaders_clients(
    nodes: list[ClusterNode],
) -> None:
    leader, follower = nodes
    owner = await follower.mew("owner")
    watcher = await leader.mew("watcher")
    await owner.send(
        {
            "id": "req-1",
            "kind": "stream/request",
            "to": ["gateway"],
            "payload": {"direction": "upload"},
        }
    )
    opened = await watcher.expect("stream/open", 10)
    assert opened["correlation_id"] == ["req-1"] and opened["payload"]["owner"] == "owner"
    sid = opened["payload"]["stream_id"]
    assert (await owner.expect("stream/open", 10))["payload"]["stream_id"] == sid

    await owner.send(f"#{sid}#from the follower")
    assert await stream_frame(watcher) == f"#{sid}#from the follower"
    assert await stream_frame(owner) == f"#{sid}#from the follower"
    await watcher.send(f"#{sid}#not mine")
    refused = await watcher.expect("system/error", 10)
    assert refused["payload"]["error"] == "unauthorized_stream_write"

    late = await follower.mew("late")
    assert [s["stream_id"] for s in late.welcome["payload"]["active_streams"]] == [sid]
    await owner.ws.close()
    closed = await watcher.next_where(lambda f: f.get("kind") == "stream/close", 10)
    assert closed["payload"] == {"stream_id": sid, "reason": "owner_disconnected"}
