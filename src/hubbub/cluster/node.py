"""A cluster node: leads (router, engines, store) or follows (its clients linked to the leader)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import msgspec
import redis.asyncio as aioredis
from aiohttp import web
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from hubbub.cluster import wire
from hubbub.cluster.edge import Uplink
from hubbub.cluster.leader_link import serve_link
from hubbub.cluster.lease import LeaderInfo, Lease
from hubbub.server.connection import CLOSE_SERVICE_RESTART
from hubbub.server.metrics import Metrics
from hubbub.server.router import Router
from hubbub.store.base import Store
from hubbub.store.redis import RedisStore, redis_client

log = logging.getLogger("hubbub.cluster")

SECRET_KEY = "hubbub:secret"
NODES_KEY = "hubbub:nodes"
STOP_WAIT_S = 10
"""How long a stopping leader waits for Redis to commit what is queued."""
STEP_DOWN = "this gateway stopped leading the cluster; reconnect and resume (nothing is lost)"


@dataclass
class ClusterSettings:
    """How a node joins its cluster (``hubbub serve --cluster``)."""

    redis_url: str
    node: str = field(default_factory=lambda: f"{socket.gethostname()}-{os.getpid()}")
    lease_ms: int = 3000
    """How long the leadership lasts without renewal: a dead leader is replaced after it."""
    link_host: str = "127.0.0.1"
    """Where this node listens for the other nodes (links and forwarded HTTP)."""
    link_port: int = 0
    advertise: str | None = None
    """The host other nodes reach this node's link port at (default: ``link_host``)."""
    join_wait_s: float = 10.0
    """How long a client connecting while no leader is known waits for one."""


class NodeInfo(msgspec.Struct):
    """A node as the registry in Redis lists it."""

    node: str
    role: str
    link: str
    connections: int
    seen_ms: int
    pid: int = 0


class Node:
    """One gateway process of a cluster (see docs/cluster.md)."""

    def __init__(
        self,
        settings: ClusterSettings,
        build_router: Callable[[Store], Router],
        metrics: Metrics,
        build_app: Callable[[Router], web.Application],
    ) -> None:
        self.settings = settings
        self.name = settings.node
        self.metrics = metrics
        self._build_router = build_router
        self._build_app = build_app
        # Any: redis-py types its commands as "Awaitable[T] | T" for both clients at once
        self.redis: Any = redis_client(settings.redis_url, timeout_s=2.0)
        self.router: Router | None = None
        """The router while this node leads."""
        self.uplink: Uplink | None = None
        """The link to the leader while another node leads."""
        self.leader: LeaderInfo | None = None
        self.secret = ""
        self.redis_ok = False
        self.redis_ms = 0.0
        self.local_connections = 0
        self.changed = asyncio.Event()
        """Set (and replaced) whenever the role or the leader changes."""
        self._sock: socket.socket | None = None
        self._link_addr = ""
        self._lease: Lease | None = None
        self._runner: web.AppRunner | None = None
        self._task: asyncio.Task[None] | None = None
        self._http: aiohttp.ClientSession | None = None
        self._stopping = False

    # ------------------------------------------------------------------ lifecycle

    @property
    def role(self) -> str:
        """``leader`` or ``follower``."""
        return "leader" if self.router is not None else "follower"

    @property
    def http(self) -> aiohttp.ClientSession:
        """The session forwarding HTTP requests to the leader."""
        if self._http is None:
            self._http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(sock_connect=2))
        return self._http

    async def start(self) -> None:
        """Reach Redis, bind the link port, and begin leading or following."""
        await self._reach_redis()
        await self._check_persistence()
        self.metrics.registry.register(_NodeCollector(self))
        await self.redis.set(SECRET_KEY, secrets.token_hex(16), nx=True)
        self.secret = (await self.redis.get(SECRET_KEY)).decode()
        self._sock = self._bind_link()
        port = self._sock.getsockname()[1]
        self._link_addr = f"{self.settings.advertise or self.settings.link_host}:{port}"
        self._lease = Lease(self.redis, self.name, self._link_addr, self.settings.lease_ms)
        await self._tick()
        self._task = asyncio.get_running_loop().create_task(self._supervise())

    async def _reach_redis(self) -> None:
        deadline = time.monotonic() + 30
        while True:
            try:
                await self.redis.ping()
                self.redis_ok = True
                return
            except (aioredis.ConnectionError, aioredis.TimeoutError, OSError) as exc:
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"cannot reach Redis at {self.settings.redis_url}: {exc}; start "
                        "redis-server there or fix --cluster"
                    ) from None
                await asyncio.sleep(0.5)

    async def _check_persistence(self) -> None:
        """Warn when Redis would lose acknowledged messages in a crash (no AOF)."""
        try:
            conf = await self.redis.config_get("appendonly")
        except aioredis.ResponseError:
            return  # CONFIG is disabled (managed Redis): its provider's persistence applies
        if conf.get(b"appendonly", conf.get("appendonly")) in (b"no", "no"):
            log.warning(
                "Redis at %s runs without AOF (appendonly no): a crash of Redis can take back "
                "acknowledged messages; set `appendonly yes` (docs/cluster.md)",
                _redacted(self.settings.redis_url),
            )

    def _bind_link(self) -> socket.socket:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        port = self._sock.getsockname()[1] if self._sock else self.settings.link_port
        sock.bind((self.settings.link_host, port))
        sock.listen(1024)
        sock.setblocking(False)
        return sock

    async def stop(self) -> None:
        """Leave the cluster: hand the leadership over at once, close every client."""
        self._stopping = True
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if self.uplink is not None:
            await self.uplink.close()
        if self.router is not None:
            try:  # what is queued is committed first; with Redis away that could wait forever
                await asyncio.wait_for(self._stop_leading(release=True), STOP_WAIT_S)
            except TimeoutError:
                log.warning(
                    "Redis did not take the last writes within %d s; stopping without them "
                    "(none of them was acknowledged)",
                    STOP_WAIT_S,
                )
        with contextlib.suppress(Exception):
            await self.redis.hdel(NODES_KEY, self.name)
        if self._http is not None:
            await self._http.close()
        await self.redis.aclose()

    # ------------------------------------------------------------------ the loop

    async def _supervise(self) -> None:
        interval = self.settings.lease_ms / 3000
        while True:
            await asyncio.sleep(interval if self.leader is not None else 0.2)
            try:
                await self._tick()
            except (aioredis.ConnectionError, aioredis.TimeoutError, OSError) as exc:
                if self.redis_ok:
                    log.warning(
                        "Redis unreachable (%s); refusing new messages until it is back", exc
                    )
                self.redis_ok = False
                if self.router is not None:
                    self.router.store.available = False  # refuse now, not after a failed commit
            except Exception:
                log.exception("cluster supervision failed; retrying")

    async def _tick(self) -> None:
        lease = self._lease
        assert lease is not None
        t0 = time.perf_counter()
        if self.router is not None and not await lease.renew():
            log.warning("another node took the leadership; following it")
            await self._stop_leading(release=False)
        self.redis_ms = (time.perf_counter() - t0) * 1000
        if not self.redis_ok:
            log.info("Redis reachable again")
            if self.router is not None:
                self.router.store.available = True  # a failing commit still holds its queue
        self.redis_ok = True
        if self.router is None:
            leader = await lease.current()
            if leader is None and await lease.acquire():
                await self._lead()
                leader = lease.info
            self._follow(leader)
        await self._register()

    def _follow(self, leader: LeaderInfo | None) -> None:
        if self.router is not None:
            return
        if leader != self.leader:
            self.leader = leader
            self._changed()
        up = self.uplink
        if leader is None:
            return
        if up is not None and up.alive and up.target == leader.link:
            return
        if up is not None:
            asyncio.get_running_loop().create_task(up.close())
        self.uplink = Uplink(self.name, leader.link, self.secret, self.metrics)
        self.uplink.start()

    def _changed(self) -> None:
        self.changed.set()
        self.changed = asyncio.Event()

    async def _register(self) -> None:
        info = NodeInfo(
            self.name,
            self.role,
            self._link_addr,
            self.local_connections,
            int(time.time() * 1000),
            os.getpid(),
        )
        await self.redis.hset(NODES_KEY, self.name, msgspec.json.encode(info))

    async def nodes(self) -> list[NodeInfo]:
        """The live nodes of the cluster (those silent for 3 lease times are dropped)."""
        horizon = int(time.time() * 1000) - 3 * self.settings.lease_ms
        out: list[NodeInfo] = []
        for name, raw in (await self.redis.hgetall(NODES_KEY)).items():
            info = msgspec.json.decode(raw, type=NodeInfo)
            if info.seen_ms < horizon:
                await self.redis.hdel(NODES_KEY, name)
            else:
                out.append(info)
        return sorted(out, key=lambda n: n.node)

    # ------------------------------------------------------------------ leading

    async def _lead(self) -> None:
        lease = self._lease
        assert lease is not None and self._sock is not None
        if self.uplink is not None:
            await self.uplink.close()
            self.uplink = None
        store = RedisStore(self.redis, fence=lease, on_fenced=self._fenced)
        router = self._build_router(store)
        app = self._build_app(router)  # its startup starts the router (loads the spaces)
        app.middlewares.insert(0, self._internal_only)
        app.router.add_get(wire.LINK_PATH, self._link)
        runner = web.AppRunner(app, handle_signals=False, access_log=None, shutdown_timeout=2.0)
        await runner.setup()
        await web.SockSite(runner, self._sock).start()
        self._runner = runner
        self.router = router
        self.leader = lease.info
        self._changed()
        log.info("node %s leads the cluster (links at %s)", self.name, self._link_addr)

    def _fenced(self) -> None:
        if self.router is not None and not self._stopping:
            asyncio.get_running_loop().create_task(self._stop_leading(release=False))

    async def _stop_leading(self, *, release: bool) -> None:
        router, runner = self.router, self._runner
        self.router, self._runner = None, None
        self.leader = None
        self._changed()
        if router is not None:
            for space in router.spaces.values():
                for s in list(space.online.values()):
                    s.conn.close(CLOSE_SERVICE_RESTART, STEP_DOWN)
        if runner is not None:
            await runner.cleanup()  # stops the router
        if self._lease is not None and release:
            with contextlib.suppress(Exception):
                await self._lease.release()
        if not self._stopping:
            self._sock = self._bind_link()  # the site closed it; the same port again

    @web.middleware
    async def _internal_only(
        self, request: web.Request, handler: Callable[[web.Request], Any]
    ) -> web.StreamResponse:
        if not secrets.compare_digest(request.headers.get(wire.SECRET_HEADER, ""), self.secret):
            return web.json_response(
                {"error": "auth_failed", "message": "this port is for the cluster's nodes only"},
                status=403,
            )
        response: web.StreamResponse = await handler(request)
        return response

    async def _link(self, request: web.Request) -> web.StreamResponse:
        router = self.router
        if router is None:
            return web.json_response(
                {"error": "unavailable", "message": "not the leader"}, status=503
            )
        node = request.headers.get(wire.NODE_HEADER, "?")
        return await serve_link(request, router, node)

    # ------------------------------------------------------------------ followers' clients

    async def uplink_ready(self) -> Uplink | None:
        """The link to the leader, waiting up to ``join_wait_s`` for one (None: none came)."""
        deadline = time.monotonic() + self.settings.join_wait_s
        while self.router is None:
            up = self.uplink
            if up is not None and up.up.is_set() and not up.closed:
                return up
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.changed.wait(), min(left, 0.1))
        return None

    async def health(self) -> dict[str, Any]:
        """This node, the cluster's nodes and Redis, for ``/health``."""
        try:
            t0 = time.perf_counter()
            await self.redis.ping()
            self.redis_ms = (time.perf_counter() - t0) * 1000
            self.redis_ok = True
            nodes = [msgspec.structs.asdict(n) for n in await self.nodes()]
        except (aioredis.ConnectionError, aioredis.TimeoutError, OSError):
            self.redis_ok = False
            nodes = []
        return {
            "node": self.name,
            "role": self.role,
            "leader": self.leader.node if self.leader else None,
            "nodes": nodes,
            "redis": {
                "url": _redacted(self.settings.redis_url),
                "reachable": self.redis_ok,
                "latency_ms": round(self.redis_ms, 3),
            },
        }


def _redacted(url: str) -> str:
    """A Redis URL without its password."""
    if "@" not in url:
        return url
    scheme, rest = url.split("://", 1) if "://" in url else ("redis", url)
    return f"{scheme}://***@{rest.split('@', 1)[1]}"


class _NodeCollector(Collector):
    def __init__(self, node: Node) -> None:
        self.node = node

    def collect(self) -> Iterator[GaugeMetricFamily]:
        node = self.node
        yield GaugeMetricFamily(
            "hubbub_cluster_leader",
            "1 while this node leads the cluster",
            value=int(node.router is not None),
        )
        links = 0 if node.router is None else node.router.metrics.cluster_links
        yield GaugeMetricFamily(
            "hubbub_cluster_links", "Follower nodes linked to this leader", value=links
        )
        yield GaugeMetricFamily(
            "hubbub_redis_latency_seconds",
            "Round trip of this node's last Redis command of its supervision",
            value=node.redis_ms / 1000,
        )
        yield GaugeMetricFamily(
            "hubbub_redis_reachable", "1 while Redis answers this node", value=int(node.redis_ok)
        )
