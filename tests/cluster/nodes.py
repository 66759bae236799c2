"""Real ``hubbub serve --cluster`` processes for the cluster tests and benchmarks."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import resource
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from tests import processes
from tests.conftest import Door, WsClient
from tests.ports import reserve_port
from tests.timing import SLOW_WAIT, WAIT

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class ClusterNode(Door):
    """One node process; restartable on the same port."""

    join_timeout = 2 * WAIT

    name: str
    redis_url: str
    workdir: Path
    port: int = field(default_factory=reserve_port)
    extra: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    nofile: int | None = None
    """The node's open-file limit (soft and hard), when a test needs a low one."""
    proc: subprocess.Popen[bytes] | None = None
    clients: list[WsClient] = field(default_factory=list)

    @property
    def log(self) -> Path:
        return self.workdir / f"{self.name}.log"

    def spawn(self) -> None:
        env = os.environ | {"PYTHONPATH": str(ROOT / "src")} | self.env
        cmd = [sys.executable, "-m", "hubbub", "serve", "--port", str(self.port)]
        cmd += ["--cluster", self.redis_url, "--node", self.name, "--rate-limit", "0"]
        cmd += ["--lease-ms", "1500", *self.extra]
        nofile = self.nofile

        def limit_files() -> None:
            if nofile is not None:
                resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                cmd, env=env, stdout=out, stderr=out, cwd=self.workdir, preexec_fn=limit_files
            )

    async def health(self) -> dict[str, Any]:
        async with (
            aiohttp.ClientSession() as http,
            http.get(f"{self.http}/health", timeout=aiohttp.ClientTimeout(total=3)) as resp,
        ):
            out: dict[str, Any] = await resp.json()
            return out

    async def wait_ready(self, timeout: float = 30.0) -> dict[str, Any]:
        """Wait until the node answers /health and knows a leader."""
        deadline = time.monotonic() + timeout
        last: Any = None
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError(f"node {self.name} exited; log:\n{self.log.read_text()[-3000:]}")
            with contextlib.suppress(aiohttp.ClientError, OSError, TimeoutError):
                last = await self.health()
                if last["cluster"]["leader"]:
                    return dict(last)
            await asyncio.sleep(0.05)
        raise RuntimeError(
            f"node {self.name} not ready: {last}; log:\n{self.log.read_text()[-3000:]}"
        )

    def kill9(self) -> None:
        processes.kill9(self.proc)

    def stop(self) -> None:
        processes.stop(self.proc)


async def start_cluster(redis_url: str, workdir: Path, n: int = 3) -> list[ClusterNode]:
    """Start ``n`` nodes; the first one started leads."""
    nodes = [ClusterNode(f"node{i}", redis_url, workdir) for i in range(n)]
    nodes[0].spawn()
    await nodes[0].wait_ready()
    for node in nodes[1:]:
        node.spawn()
    for node in nodes[1:]:
        await node.wait_ready()
    return nodes


async def stop_cluster(nodes: list[ClusterNode]) -> None:
    for node in nodes:
        for c in node.clients:
            with contextlib.suppress(Exception):
                await c.close()
        node.stop()


async def leader_of(nodes: list[ClusterNode]) -> ClusterNode:
    """The node that leads now (as the live nodes agree)."""
    for node in nodes:
        if node.proc is not None and node.proc.poll() is None:
            with contextlib.suppress(aiohttp.ClientError, OSError, TimeoutError):
                h = await node.health()
                if h["cluster"]["role"] == "leader":
                    return node
    raise AssertionError("no node leads")


async def leader_link(node: ClusterNode) -> str:
    """The link address of the leader as ``node``'s /health lists it, once it lists one.

    A follower learns the leader's name before the leader's node entry (with its link) reaches
    its /health, so a single look may find no leader among the nodes yet.
    """
    deadline = time.monotonic() + SLOW_WAIT
    while True:
        health = await node.health()
        for entry in health["cluster"]["nodes"]:
            if entry["role"] == "leader" and entry.get("link"):
                return str(entry["link"])
        assert time.monotonic() < deadline, f"{node.name} lists no leader: {health['cluster']}"
        await asyncio.sleep(0.05)


def dump(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True)
