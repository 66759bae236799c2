"""A real Redis Cluster for a test: ``redis-server --cluster-enabled yes`` on 3 ports (plus a
replica each when asked), joined by ``redis-cli --cluster create``; AOF on, fast failover."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path

from tests.cluster.redis_server import START_TIMEOUT_S, RedisServer
from tests.ports import reserve_port

NODE_TIMEOUT_MS = 1000
"""``cluster-node-timeout``: a dead master is replaced by its replica a few times this later."""


def _cluster_args(directory: Path) -> tuple[str, ...]:
    return (
        *("--cluster-enabled", "yes"),
        *("--cluster-config-file", str(directory / "nodes.conf")),
        *("--cluster-node-timeout", str(NODE_TIMEOUT_MS)),
        *("--cluster-port", str(reserve_port())),  # the bus, not at port + 10000 (may be > 65535)
        *("--save", "", "--appendonly", "yes", "--appendfsync", "always"),
    )


def _command(port: int, *args: str) -> str:
    """One command to the node on ``port`` (RESP inline); its raw reply."""
    with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
        s.sendall((" ".join(args) + "\r\n").encode())
        data = b""
        while True:
            chunk = s.recv(65536)
            data += chunk
            if not chunk or (data.endswith(b"\r\n") and _complete(data)):
                return data.decode(errors="replace")


def _complete(data: bytes) -> bool:
    if data[:1] != b"$":
        return True
    length = int(data[1 : data.index(b"\r\n")])
    return length < 0 or len(data) >= data.index(b"\r\n") + 2 + length + 2


class RedisCluster:
    """``masters`` primaries (with ``replicas`` replicas each) on free ports under ``directory``."""

    def __init__(self, directory: Path, masters: int = 3, replicas: int = 0) -> None:
        if shutil.which("redis-cli") is None:
            raise RuntimeError(
                "redis-cli is not installed: the Redis Cluster tests need Debian's "
                "redis-tools (`sudo apt-get install -y redis-server`)"
            )
        self.replicas = replicas
        self.servers = [
            RedisServer(directory / f"node{i}", _cluster_args(directory / f"node{i}"))
            for i in range(masters * (1 + replicas))
        ]

    @property
    def url(self) -> str:
        """``redis+cluster://`` with every node as a seed."""
        return "redis+cluster://" + ",".join(f"127.0.0.1:{s.port}" for s in self.servers)

    def start(self) -> None:
        """Start every node, make them one cluster, and return once it serves every slot."""
        for server in self.servers:
            server.start()
        subprocess.run(
            [
                "redis-cli",
                "--cluster",
                "create",
                *(f"127.0.0.1:{s.port}" for s in self.servers),
                "--cluster-replicas",
                str(self.replicas),
                "--cluster-yes",
            ],
            check=True,
            capture_output=True,
            timeout=60,
        )
        self.wait_ok()

    def live(self) -> list[RedisServer]:
        return [s for s in self.servers if s.process is not None and s.process.poll() is None]

    def wait_ok(self, timeout: float = START_TIMEOUT_S) -> None:
        """Wait until every live node says ``cluster_state:ok`` with a master per slot range."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            states = []
            for s in self.live():
                try:
                    states.append("cluster_state:ok" in _command(s.port, "CLUSTER", "INFO"))
                except OSError:
                    states.append(False)
            if states and all(states):
                return
            time.sleep(0.1)  # polling the cluster's own failure detection, not a timer of ours
        raise RuntimeError(f"the Redis Cluster did not reach cluster_state:ok within {timeout} s")

    def master_of(self, key: str) -> RedisServer:
        """The node serving ``key``'s slot now."""
        for s in self.live():
            reply = _command(s.port, "CLUSTER", "KEYSLOT", key)
            slot = int(reply.strip().lstrip(":"))
            role = _command(s.port, "ROLE")
            if "master" in role:
                nodes = _command(s.port, "CLUSTER", "NODES")
                for line in nodes.splitlines():
                    fields = line.split()
                    if len(fields) > 8 and "myself" in fields[2] and "master" in fields[2]:
                        for rng in fields[8:]:
                            lo, _, hi = rng.partition("-")
                            if lo.isdigit() and int(lo) <= slot <= int(hi or lo):
                                return s
        raise AssertionError(f"no live master serves {key}")

    def failover_done(self, dead: RedisServer, timeout: float = 30.0) -> RedisServer:
        """Wait until the slots of ``dead`` are served by a promoted replica; that replica."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            masters = []
            for s in self.live():
                try:
                    if _command(s.port, "ROLE").find("master") >= 0:
                        masters.append(s)
                except OSError:
                    continue
            if len(masters) == len(self.servers) // (1 + self.replicas):
                self.wait_ok()
                return next(m for m in masters if m not in self._first_masters)
            time.sleep(0.1)
        raise RuntimeError(f"no replica took over from port {dead.port} within {timeout} s")

    def remember_masters(self) -> None:
        """Note the masters now (so :meth:`failover_done` can tell the promoted one)."""
        self._first_masters = [s for s in self.live() if "master" in _command(s.port, "ROLE")]

    def stop(self) -> None:
        for server in self.servers:
            server.stop()
