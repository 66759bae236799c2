"""hubbub on a real Redis Cluster (3 masters, made by ``redis-cli --cluster create``): the store
answers as the in-memory reference and declares every key it writes, nodes share spaces led
on different shards, and a master's ``kill -9`` with its replica promoted loses nothing
acknowledged."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import aiohttp
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hubbub.errors import HubbubError
from hubbub.sdk import Client
from hubbub.store import MemoryStore
from hubbub.store.redis import RedisStore, redis_client
from tests.cluster.nodes import ClusterNode, stop_cluster
from tests.cluster.redis_cluster import RedisCluster
from tests.cluster.test_redis_store import history_queries, ops, replay_on_both

pytestmark = [pytest.mark.timeout(240), pytest.mark.slow]  # each starts a redis cluster


@pytest.fixture(scope="module")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisCluster]:
    """Three masters, no replicas, for the whole module."""
    cluster = RedisCluster(tmp_path_factory.mktemp("redis-cluster"))
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


class DeclaringStore(RedisStore):
    """A RedisStore that notes the keys each commit declares (its EVALSHA's KEYS)."""

    declared: ClassVar[set[str]] = set()

    async def _call(self, *command: Any) -> Any:
        if command[0] == "EVALSHA":
            n = int(command[2])
            DeclaringStore.declared.update(str(k) for k in command[3 : 3 + n])
        return await super()._call(*command)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(batch=st.lists(ops, max_size=40), queries=st.lists(history_queries, max_size=4))
def test_on_a_redis_cluster_the_store_matches_memory_and_declares_every_key(
    redis_cluster: RedisCluster,
    batch: list[tuple[Any, ...]],
    queries: list[tuple[str, int | None, int | None, int]],
) -> None:
    async def run() -> None:
        prefix = "t" + uuid.uuid4().hex
        client = redis_client(redis_cluster.url)
        mem, red = MemoryStore(), DeclaringStore(client, prefix=prefix)
        await mem.open()
        await red.open()
        await replay_on_both(mem, red, batch, queries)
        await red.close()
        stored = {k.decode() async for k in client.scan_iter(match=f"{prefix}:{{*")}
        assert stored <= DeclaringStore.declared  # nothing written that the script did not name
        await client.aclose()

    asyncio.run(run())


def spaces_on_two_shards(cluster: RedisCluster, n: int) -> list[str]:
    """``n`` space ids whose keys are not all on one master."""
    spaces = [f"sp{i}" for i in range(n)]
    while len({cluster.master_of(f"hubbub:{{{sp}}}:leader").port for sp in spaces}) < 2:
        spaces = [f"{sp}x" for sp in spaces]
    return spaces


async def test_nodes_on_a_redis_cluster_lead_spaces_on_several_shards(
    redis_cluster: RedisCluster, tmp_path: Path
) -> None:
    spaces = spaces_on_two_shards(redis_cluster, 3)
    args: list[str] = ["--lease-ms", "900"]
    for sid in spaces:
        (tmp_path / f"{sid}.yaml").write_text(f"space: {sid}\nopen: true\n")
        args += ["--space-config", str(tmp_path / f"{sid}.yaml")]
    nodes = [ClusterNode(f"rc{i}", redis_cluster.url, tmp_path, extra=args) for i in range(2)]
    try:
        for node in nodes:
            node.spawn()
        for node in nodes:
            await node.wait_ready()
        deadline = time.monotonic() + 30
        while True:
            leaders = (await nodes[0].health())["cluster"]["leaders"]
            counts = Counter(leaders.values())
            if None not in counts and sorted(counts.values()) == [1, 2]:
                break
            assert time.monotonic() < deadline, leaders
            await asyncio.sleep(0.1)
        for sid in spaces:
            a = await nodes[0].mew(f"a-{sid}", space=sid)
            b = await nodes[1].mew(f"b-{sid}", space=sid)
            await a.send({"kind": "chat", "channel": "#general", "payload": {"text": sid}})
            assert (await b.expect("chat"))["payload"]["text"] == sid
        async with aiohttp.ClientSession() as http:
            for sid in spaces:
                url = f"{nodes[1].http}/channels/general/messages?space={sid}"
                async with http.get(url) as resp:
                    got = [m["payload"]["text"] for m in (await resp.json())["messages"]]
                assert got == [sid]
    finally:
        await stop_cluster(nodes)


async def test_a_masters_kill9_with_its_replica_promoted_loses_nothing_acknowledged(
    tmp_path: Path,
) -> None:
    cluster = RedisCluster(tmp_path / "rc", masters=3, replicas=1)
    cluster.start()
    node = ClusterNode("solo", cluster.url + "?replicas=1", tmp_path, extra=["--lease-ms", "3000"])
    try:
        node.spawn()
        await node.wait_ready()
        acked: dict[str, int] = {}
        progress, stop = asyncio.Event(), asyncio.Event()

        async def sender() -> None:
            async with Client(gateway=node.url, participant_id="w", connect_timeout=30) as c:
                i = 0
                while not stop.is_set():
                    frame = {"kind": "chat", "channel": "#general", "payload": {"text": f"m{i}"}}
                    try:
                        echo = await c.send(frame, ack=True)
                    except HubbubError:
                        await asyncio.sleep(0.05)
                        continue
                    acked[f"m{i}"] = echo.seq or 0
                    progress.set()
                    i += 1

        async def more(n: int) -> None:
            target = len(acked) + n
            while len(acked) < target:
                progress.clear()
                await asyncio.wait_for(progress.wait(), 60)

        task = asyncio.create_task(sender())
        await more(30)
        cluster.remember_masters()
        victim = cluster.master_of("hubbub:{default}:leader")
        victim.kill9()  # acknowledged commits were on its replica (replicas=1) before the ack
        await asyncio.to_thread(cluster.failover_done, victim)
        # the promoted replica has no replica of its own: commits wait (replicas=1) until the
        # old master, restarted as a supervisor would, rejoins as its replica
        await asyncio.to_thread(victim.restart)
        await asyncio.to_thread(cluster.wait_ok)
        await more(30)
        stop.set()
        await task
        stored: list[dict[str, Any]] = []
        async with aiohttp.ClientSession() as http:
            after = 0
            while True:
                url = f"{node.http}/channels/general/messages?after_seq={after}&limit=500"
                async with http.get(url) as resp:
                    page = (await resp.json())["messages"]
                if not page:
                    break
                stored += page
                after = page[-1]["seq"]
        by_seq = {m["seq"]: m["payload"]["text"] for m in stored}
        assert sorted(by_seq) == list(range(1, len(stored) + 1))
        assert [t for t in acked if t not in set(by_seq.values())] == []
        assert [t for t, n in Counter(by_seq.values()).items() if n > 1] == []
        assert [t for t, q in acked.items() if by_seq[q] != t] == []
    finally:
        with contextlib.suppress(Exception):
            node.stop()
        cluster.stop()


def test_the_crash_harness_on_a_redis_cluster_loses_nothing_acknowledged() -> None:
    """benchmarks/crash.py with its nodes on a 3-master Redis Cluster: kills and hand-offs."""
    root = Path(__file__).resolve().parents[2]
    run = subprocess.run(
        [
            sys.executable,
            str(root / "benchmarks" / "crash.py"),
            *("--kills", "2", "--handoffs", "2", "--seed", "3"),
            *("--cluster", "3", "--redis-cluster"),
        ],
        capture_output=True,
        text=True,
        timeout=220,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "acknowledged_but_lost   0" in run.stdout
    assert "handoffs                2" in run.stdout
