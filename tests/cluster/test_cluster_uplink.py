"""A follower's uplink to a stalled leader is bounded: the follower refuses new frames with
``unavailable`` (naming the refused frame) instead of queueing them without end, and takes
frames again once the leader reads."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from tests.cluster.nodes import ClusterNode, stop_cluster

pytestmark = pytest.mark.timeout(300)

FRAME_TEXT = "x" * 200_000
GIVE_UP_BYTES = 256 * 1024 * 1024
"""Far beyond the uplink's bound (16 MiB) plus the sockets' buffers."""


async def test_a_stalled_leader_makes_the_follower_refuse_new_frames_with_unavailable(
    redis_server: Any, tmp_path: Path
) -> None:
    lease = ["--lease-ms", "60000"]  # the stalled leader keeps its lease through the test
    leader = ClusterNode("lead", redis_server.url, tmp_path, extra=lease)
    follower = ClusterNode("follow", redis_server.url, tmp_path, extra=lease)
    nodes = [leader, follower]
    try:
        leader.spawn()
        await leader.wait_ready()
        follower.spawn()
        await follower.wait_ready()
        client = await follower.mew("sender")
        assert leader.proc is not None
        os.kill(leader.proc.pid, signal.SIGSTOP)
        try:
            refused = asyncio.create_task(client.expect("system/error", timeout=120))
            sent, ids = 0, []
            while not refused.done():
                assert sent < GIVE_UP_BYTES, "the follower queued everything it was sent"
                ids.append(f"big{len(ids)}")
                frame = {"id": ids[-1], "kind": "chat", "channel": "#general"}
                await client.send(frame | {"payload": {"text": FRAME_TEXT}})
                sent += len(FRAME_TEXT)
                await asyncio.sleep(0)
            error = await refused
        finally:
            os.kill(leader.proc.pid, signal.SIGCONT)
        assert error["payload"]["error"] == "unavailable"
        assert "not keeping up" in error["payload"]["message"]
        assert error["correlation_id"][0] in ids
        # the leader reads again: once the follower's queue drained, frames are taken again
        # (until then they are refused as before; a client sends them again, as told)
        for attempt in range(120):
            mid = f"after{attempt}"
            await client.send({"id": mid, "kind": "chat", "channel": "#general",
                               "payload": {"text": mid}})  # fmt: skip
            answer = await client.next_where(
                lambda f, mid=mid: (
                    f.get("payload", {}).get("text") == mid
                    or mid in (f.get("correlation_id") or [])
                ),
                timeout=120,
            )
            if answer["kind"] == "chat":
                break
            assert answer["payload"]["error"] == "unavailable"
            await asyncio.sleep(0.5)
        else:
            raise AssertionError("the follower kept refusing after the leader came back")
    finally:
        await stop_cluster(nodes)
