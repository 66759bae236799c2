"""Leaders spread over real nodes on a real redis-server (short leases): every node leads
⌊S/W⌋ or ⌈S/W⌉ spaces after a start, a join and a death, and a lead moved while clients
send loses, duplicates and renumbers nothing they were acknowledged."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from hubbub.errors import HubbubError
from hubbub.sdk import Client
from tests.cluster.nodes import ClusterNode, stop_cluster

pytestmark = pytest.mark.timeout(240)

LEASE = ["--lease-ms", "900"]


def space_args(tmp_path: Path, spaces: list[str]) -> list[str]:
    args: list[str] = []
    for sid in spaces:
        (tmp_path / f"{sid}.yaml").write_text(f"space: {sid}\nopen: true\n")
        args += ["--space-config", str(tmp_path / f"{sid}.yaml")]
    return args + LEASE


async def leads_by_node(nodes: list[ClusterNode]) -> dict[str, str | None]:
    """Each space's leader, as the first live node reports it."""
    for node in nodes:
        if node.proc is not None and node.proc.poll() is None:
            with contextlib.suppress(aiohttp.ClientError, OSError, TimeoutError):
                leaders: dict[str, str | None] = (await node.health())["cluster"]["leaders"]
                return leaders
    raise AssertionError("no node answers /health")


async def until_spread(nodes: list[ClusterNode], spaces: int, timeout: float = 30) -> Counter[str]:
    """Wait until every space is led and every live node leads ⌊S/W⌋ or ⌈S/W⌉ of them."""
    live = [n.name for n in nodes if n.proc is not None and n.proc.poll() is None]
    low, high = spaces // len(live), -(-spaces // len(live))
    deadline = time.monotonic() + timeout
    while True:
        leaders = await leads_by_node(nodes)
        counts = Counter({name: 0 for name in live})
        counts.update(v for v in leaders.values() if v is not None)
        settled = all(leaders.values()) and set(counts) == set(live)
        if settled and all(low <= c <= high for c in counts.values()):
            return counts
        assert time.monotonic() < deadline, (leaders, live)
        await asyncio.sleep(0.1)


async def test_leads_spread_over_the_nodes_after_start_join_and_death(
    redis_server: Any, tmp_path: Path
) -> None:
    spaces = [f"s{i}" for i in range(5)]
    args = space_args(tmp_path, spaces)
    nodes = [ClusterNode(f"node{i}", redis_server.url, tmp_path, extra=args) for i in range(3)]
    try:
        for node in nodes:
            node.spawn()
        for node in nodes:
            await node.wait_ready()
        assert sorted((await until_spread(nodes, 5)).values()) == [1, 2, 2]

        late = ClusterNode("node3", redis_server.url, tmp_path, extra=args)
        nodes.append(late)
        late.spawn()
        await late.wait_ready()
        counts = await until_spread(nodes, 5)
        assert sorted(counts.values()) == [1, 1, 1, 2] and counts["node3"] >= 1

        busiest = max(nodes, key=lambda n: (counts[n.name], n.name))
        busiest.kill9()
        assert sorted((await until_spread(nodes, 5)).values()) == [1, 2, 2]
    finally:
        await stop_cluster(nodes)


async def sender(
    url: list[str],
    space: str,
    name: str,
    acked: dict[str, int],
    stop: asyncio.Event,
    progress: asyncio.Event,
) -> None:
    """Send chat messages one after another, each acknowledged by its echo."""
    async with Client(gateway=url, participant_id=name, space=space, connect_timeout=30) as c:
        i = 0
        while not stop.is_set():
            text = f"{name}-{i}"
            frame = {"kind": "chat", "channel": "#general", "payload": {"text": text}}
            try:
                echo = await c.send(frame, ack=True)
            except HubbubError:
                await asyncio.sleep(0.05)  # not connected for now: the same text again
                continue
            acked[text] = echo.seq or 0
            progress.set()
            i += 1


async def history(node: ClusterNode, space: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    after = 0
    async with aiohttp.ClientSession() as http:
        while True:
            url = f"{node.http}/channels/general/messages?space={space}&after_seq={after}&limit=500"
            async with http.get(url) as resp:
                page = (await resp.json())["messages"]
            if not page:
                return out
            out.extend(page)
            after = page[-1]["seq"]


async def test_a_lead_handed_over_to_a_joining_node_loses_nothing_acknowledged(
    redis_server: Any, tmp_path: Path
) -> None:
    spaces = ["alpha", "beta"]
    args = space_args(tmp_path, spaces)
    first = ClusterNode("node0", redis_server.url, tmp_path, extra=args)
    second = ClusterNode("node1", redis_server.url, tmp_path, extra=args)
    nodes = [first, second]
    try:
        first.spawn()
        await first.wait_ready()
        assert await until_spread([first], 2) == {"node0": 2}
        second.spawn()  # not started yet: the clients all reach node0, the leader of both
        acked: dict[str, dict[str, int]] = {sid: {} for sid in spaces}
        stop, progress = asyncio.Event(), asyncio.Event()
        urls = [first.url, second.url]
        senders = [
            asyncio.create_task(sender(urls, sid, f"{sid}-{k}", acked[sid], stop, progress))
            for sid in spaces
            for k in range(2)
        ]
        await second.wait_ready()
        counts = await until_spread(nodes, 2)
        assert counts == {"node0": 1, "node1": 1}  # one lead moved while the senders sent
        before = {sid: len(acked[sid]) for sid in spaces}
        while any(len(acked[sid]) < before[sid] + 20 for sid in spaces):
            progress.clear()  # both spaces take messages after the move
            await asyncio.wait_for(progress.wait(), 30)
        stop.set()
        await asyncio.gather(*senders)
        for sid in spaces:
            stored = await history(second, sid)
            by_seq = {m["seq"]: m["payload"]["text"] for m in stored}
            texts = Counter(by_seq.values())
            assert sorted(by_seq) == list(range(1, len(stored) + 1))  # no gap, no seq twice
            assert [t for t in acked[sid] if t not in texts] == []  # nothing acknowledged lost
            assert [t for t, n in texts.items() if n > 1] == []  # nothing stored twice
            assert [t for t, q in acked[sid].items() if by_seq[q] != t] == []  # no seq reused
    finally:
        await stop_cluster(nodes)
