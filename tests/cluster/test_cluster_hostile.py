"""A cluster node under hostile conditions: a password in its Redis URL, floods of its link."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
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


NOFILE = 512
"""The flooded node's open-file limit: a flood of 600 connections would exhaust it."""
FLOOD = 600
HEADER_TIMEOUT_S = 2
PARTIAL = b"GET /cluster/link HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: slow"
LOG_BUDGET = 64 * 1024
"""Most bytes of log the flood may cause (on main it logged 182 MB in 40 s)."""


def _flood(host: str, port: int, n: int) -> list[socket.socket]:
    """``n`` connections that each send a request head and never finish it."""
    out = []
    for _ in range(n):
        sock = socket.create_connection((host, port), timeout=5)
        sock.sendall(PARTIAL)
        out.append(sock)
    return out


def _answer(sock: socket.socket) -> bytes:
    """What the node sends before it closes the connection (b"" when it just closes)."""
    sock.settimeout(30)
    chunks = []
    try:
        while chunk := sock.recv(4096):
            chunks.append(chunk)
    except ConnectionResetError:
        pass
    return b"".join(chunks)


async def test_a_flood_of_unfinished_heads_on_the_link_port_leaves_the_node_serving(
    redis_server: Any, tmp_path: Path
) -> None:
    node = ClusterNode(
        "node0",
        redis_server.url,
        tmp_path,
        nofile=NOFILE,
        env={"HUBBUB_HEADER_TIMEOUT_S": str(HEADER_TIMEOUT_S)},
    )
    flood: list[socket.socket] = []
    try:
        node.spawn()
        health = await node.wait_ready()
        host, port = health["cluster"]["nodes"][0]["link"].rsplit(":", 1)
        before = node.log.stat().st_size
        flood = await asyncio.to_thread(_flood, host, int(port), FLOOD)
        health = await node.health()  # the public port answers during the flood
        assert health["status"] == "healthy"
        alice = await node.mew("alice")
        await alice.send({"kind": "chat", "payload": {"text": "still here"}})
        assert (await alice.expect("chat"))["payload"]["text"] == "still here"
        answers = await asyncio.gather(*(asyncio.to_thread(_answer, s) for s in flood))
        timed_out = [a for a in answers if a.startswith(b"HTTP/1.1 408 ")]
        refused = [a for a in answers if a.startswith(b"HTTP/1.1 503 ")]
        assert timed_out and b"header_timeout_s" in timed_out[0]  # the served ones, cut
        assert len(timed_out) < NOFILE // 4  # the link ports' share of the open files
        assert len(timed_out) + len(refused) + answers.count(b"") == FLOOD
        async with (
            aiohttp.ClientSession() as http,
            http.get(f"{node.http}/metrics") as resp,
        ):
            metrics = await resp.text()
        assert 'hubbub_connections_refused_total{reason="header_timeout"}' in metrics
        grown = node.log.stat().st_size - before
        assert grown < LOG_BUDGET, node.log.read_text()[-3000:]
        assert (await node.health())["status"] == "healthy"
    finally:
        for sock in flood:
            sock.close()
        await stop_cluster([node])


async def _get_as(node: ClusterNode, path: str, host: str) -> int:
    """The status of a GET of ``path`` on ``node`` addressed (``Host``) to ``host``."""
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"{node.http}{path}", headers={"Host": f"{host}:{node.port}"}) as resp,
    ):
        return resp.status


async def test_nodes_answer_only_their_hosts_and_forward_what_they_answered(
    redis_server: Any, tmp_path: Path
) -> None:
    """node1 answers ``chat.test`` (``--allowed-hosts``) and forwards the request to node0,
    the leader, which was not told that name: the request passes, screened by node1."""
    leader = ClusterNode("node0", redis_server.url, tmp_path)
    follower = ClusterNode(
        "node1", redis_server.url, tmp_path, extra=["--allowed-hosts", "chat.test"]
    )
    try:
        leader.spawn()
        await leader.wait_ready()
        follower.spawn()
        await follower.wait_ready()
        path = "/channels/general/messages?after_seq=0"  # forwarded to the leader
        assert await _get_as(follower, path, "chat.test") == 200
        assert await _get_as(follower, path, "localhost") == 200
        assert await _get_as(leader, path, "chat.test") == 421
        for node in (leader, follower):
            assert await _get_as(node, path, "rebind.attacker.example") == 421
            assert await _get_as(node, "/health", "rebind.attacker.example") == 421
        ws_url = f"ws://127.0.0.1:{follower.port}/ws"  # a WebSocket through the follower
        async with (
            aiohttp.ClientSession() as http,
            http.ws_connect(ws_url, headers={"Host": "chat.test"}) as ws,
        ):
            await ws.send_json({"type": "join", "participantId": "alice"})
            assert (await ws.receive_json(timeout=10))["kind"] == "system/welcome"
    finally:
        await stop_cluster([leader, follower])
