"""A cluster node: for each space, leads it (router, engines, store) or links its clients to
the node that does."""

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

from hubbub.cluster import placement
from hubbub.cluster.seat import Seat
from hubbub.protocol.hello import Hello
from hubbub.server.admission.auth import Authenticator
from hubbub.server.config import Limits, SpaceConfig
from hubbub.server.gateway import Gateway
from hubbub.server.http.access import request_token
from hubbub.server.listener import ConnectionGate, connection_caps, link_caps, open_file_limit
from hubbub.server.state.connection import CLOSE_GOING_AWAY
from hubbub.server.state.metrics import Metrics
from hubbub.store.base import Store
from hubbub.store.redis import redacted_url, redis_client, replicas_wanted

log = logging.getLogger("hubbub.cluster")

SECRET_KEY = "hubbub:secret"
NODES_KEY = "hubbub:nodes"
STOP_WAIT_S = 10
REDIS_START_WAIT_S = 6.0
"""How long a starting node retries a Redis it cannot reach before it exits saying so (a Redis
started beside it has this long to come up; a wrong --cluster is told within seconds)."""


class RedisUnreachable(ConnectionError):
    """A starting node could not reach its Redis; the message names the URL and the fix."""


async def reach_redis(redis: Any, url: str) -> None:
    """Ping ``redis`` (the client of ``url``) until it answers; :class:`RedisUnreachable`
    after :data:`REDIS_START_WAIT_S` (the one start-up rule of a node and of ``--workers``)."""
    deadline = time.monotonic() + REDIS_START_WAIT_S
    while True:
        try:
            await redis.ping()
            return
        except (aioredis.ConnectionError, aioredis.TimeoutError, OSError) as exc:
            if time.monotonic() + 0.5 > deadline:
                why = str(exc).rstrip(".")
                raise RedisUnreachable(
                    f"cannot reach Redis at {redacted_url(url)} (--cluster) within "
                    f"{REDIS_START_WAIT_S:g} s: {why}. Start redis-server there (with "
                    "--appendonly yes, docs/cluster.md), or point --cluster (or "
                    "HUBBUB_CLUSTER) at a Redis that is running; nothing was served."
                ) from None
            await asyncio.sleep(0.5)


async def check_redis(url: str) -> None:
    """Reach the Redis of ``url`` once (``--workers`` does before it starts any worker)."""
    redis = redis_client(url, timeout_s=2.0)
    try:
        await reach_redis(redis, url)
    finally:
        await redis.aclose()


"""How long a stopping leader waits for Redis to commit what is queued."""


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
    leads: list[str] = []


class Node:
    """One gateway process of a cluster: a seat per space (see docs/cluster.md)."""

    def __init__(
        self,
        settings: ClusterSettings,
        spaces: list[SpaceConfig],
        build_router: Callable[[list[SpaceConfig], Store], Gateway],
        metrics: Metrics,
        build_app: Callable[[Gateway], web.Application],
    ) -> None:
        self.settings = settings
        self.name = settings.node
        self.metrics = metrics
        self.configs = {c.space: c for c in spaces}
        self.auth = Authenticator(self.configs)
        """Which space a hello or a request addresses (the same rule as the leader's)."""
        self._build_router = build_router
        self._build_app = build_app
        # Any: redis-py types its commands as "Awaitable[T] | T" for both clients at once
        self.redis: Any = redis_client(settings.redis_url, timeout_s=2.0)
        self.replicas = replicas_wanted(settings.redis_url)
        """Replicas that must hold a commit before it is acknowledged (``?replicas=N``)."""
        self.seats: dict[str, Seat] = {}
        self.secret = ""
        self.redis_ok = False
        self.redis_ms = 0.0
        self.local_connections = 0
        self.live: list[str] = []
        """The nodes in the registry at the last supervision (the spaces are shared among them)."""
        self.stopping = False
        self._task: asyncio.Task[None] | None = None
        self._http: aiohttp.ClientSession | None = None
        self._link_gate: ConnectionGate | None = None
        self._handoffs: set[asyncio.Task[None]] = set()

    # ------------------------------------------------------------------ what a seat needs

    def build_router(self, space: str, store: Store) -> Gateway:
        """A router for one space over ``store``."""
        return self._build_router([self.configs[space]], store)

    def build_app(self, router: Gateway) -> web.Application:
        """The gateway application serving ``router``."""
        return self._build_app(router)

    def link_gate(self, limits: Limits) -> ConnectionGate:
        """The gate every link port of this node shares (its caps: :func:`link_caps`)."""
        if self._link_gate is None:
            public = connection_caps(limits, open_file_limit())
            self._link_gate = ConnectionGate(link_caps(public))
        return self._link_gate

    def leads(self) -> dict[str, int]:
        """How many spaces each live node leads, as this node knows it now (itself counted
        live; a node holding a lease counts as live even before it is in the registry)."""
        counts = dict.fromkeys(self.live, 0)
        counts[self.name] = 0
        for seat in self.seats.values():
            if seat.router is not None or seat.handing_off:
                counts[self.name] += 1
            elif seat.leader is not None:
                counts[seat.leader.node] = counts.get(seat.leader.node, 0) + 1
        return counts

    # ------------------------------------------------------------------ lifecycle

    @property
    def role(self) -> str:
        """``leader`` when this node leads any space, else ``follower``."""
        return "leader" if self.led() else "follower"

    def led(self) -> list[str]:
        """The spaces this node leads."""
        return [sid for sid, seat in self.seats.items() if seat.router is not None]

    @property
    def http(self) -> aiohttp.ClientSession:
        """The session forwarding HTTP requests to leaders."""
        if self._http is None:
            self._http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(sock_connect=2))
        return self._http

    async def start(self) -> None:
        """Reach Redis, bind a link port per space, and begin leading or following each."""
        await self._reach_redis()
        await self._check_persistence()
        self.metrics.registry.register(_NodeCollector(self))
        await self.redis.set(SECRET_KEY, secrets.token_hex(16), nx=True)
        self.secret = (await self.redis.get(SECRET_KEY)).decode()
        st = self.settings
        for i, sid in enumerate(self.configs):
            port = st.link_port + i if st.link_port else 0
            seat = self.seats[sid] = Seat(self, sid, st.link_host, port, st.advertise)
            seat.open(st.lease_ms)
        await self._register()  # seen by the nodes starting beside it before it takes a lease
        await asyncio.sleep(min(st.lease_ms / 3000, 1.0))
        await self._tick()
        self._task = asyncio.get_running_loop().create_task(self._supervise())

    async def _reach_redis(self) -> None:
        try:
            await reach_redis(self.redis, self.settings.redis_url)
        except RedisUnreachable:
            await self.redis.aclose()
            raise
        self.redis_ok = True

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
                redacted_url(self.settings.redis_url),
            )

    def close_clients(self) -> None:
        """Close every client connection of this node with 1001 (shutting down)."""
        self.stopping = True
        for seat in self.seats.values():
            if seat.router is not None:
                seat.router.close_all()
            if seat.uplink is not None:
                seat.uplink.close_clients(CLOSE_GOING_AWAY, "server shutting down")

    async def stop(self) -> None:
        """Leave the cluster: hand every lead over at once, close every client."""
        self.stopping = True
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        await asyncio.gather(*self._handoffs, return_exceptions=True)
        with contextlib.suppress(Exception):  # gone from the shares before the leases come free
            await self.redis.hdel(NODES_KEY, self.name)
        for seat in self.seats.values():
            try:  # what is queued is committed first; with Redis away that could wait forever
                await asyncio.wait_for(seat.close(), STOP_WAIT_S)
            except TimeoutError:
                log.warning(
                    "Redis did not take the last writes of %s within %d s; stopping without "
                    "them (none of them was acknowledged)",
                    seat.space,
                    STOP_WAIT_S,
                )
        if self._http is not None:
            await self._http.close()
        await self.redis.aclose()

    # ------------------------------------------------------------------ the loop

    def _settled(self) -> bool:
        """Every space has a leader and this node leads its share (else: look again soon, a
        lead handed over to it is taken within 0.2 s)."""
        leads = self.leads()
        share = placement.shares(len(self.seats), leads).get(self.name, 0)
        led = all(seat.leader is not None for seat in self.seats.values())
        return led and leads[self.name] >= share

    async def _supervise(self) -> None:
        interval = self.settings.lease_ms / 3000
        while True:
            await asyncio.sleep(interval if self._settled() else 0.2)
            try:
                await self._tick()
            except (aioredis.ConnectionError, aioredis.TimeoutError, OSError) as exc:
                if self.redis_ok:
                    log.warning(
                        "Redis unreachable (%s); refusing new messages until it is back", exc
                    )
                self.redis_ok = False
                for seat in self.seats.values():
                    if seat.router is not None:  # refuse now, not after a failed commit
                        seat.router.store.available = False
            except Exception:
                log.exception("cluster supervision failed; retrying")

    async def _tick(self) -> None:
        t0 = time.perf_counter()
        await self.redis.ping()
        self.redis_ms = (time.perf_counter() - t0) * 1000
        if not self.redis_ok:
            log.info("Redis reachable again")
            for seat in self.seats.values():
                if seat.router is not None:  # a failing commit still holds its queue
                    seat.router.store.available = True
        self.redis_ok = True
        await self._register()
        self.live = [n.node for n in await self.nodes()]
        for seat in self.seats.values():
            await seat.refresh()
        await self._place()

    async def _place(self) -> None:
        """Take the free spaces this node's share allows; hand over the leads beyond it."""
        st, total = self.settings, len(self.seats)
        for seat in self.seats.values():
            free_ms = seat.free_ms
            if free_ms is not None and placement.may_take(
                self.name, total, self.leads(), free_ms, st.lease_ms
            ):
                await seat.take()
        extra = placement.surplus(self.name, total, self.leads())
        if extra and not self._handoffs and not self.stopping:
            led = [seat for seat in self.seats.values() if seat.router is not None]
            for seat in sorted(led, key=lambda s: s.sessions)[:extra]:  # the fewest clients move
                task = asyncio.get_running_loop().create_task(seat.hand_off(STOP_WAIT_S))
                self._handoffs.add(task)
                task.add_done_callback(self._handoffs.discard)

    async def _register(self) -> None:
        info = NodeInfo(
            self.name,
            self.role,
            self.link,
            self.local_connections,
            int(time.time() * 1000),
            os.getpid(),
            self.led(),
        )
        await self.redis.hset(NODES_KEY, self.name, msgspec.json.encode(info))

    @property
    def link(self) -> str:
        """The link address of this node's first space (its address among the nodes)."""
        return next(iter(self.seats.values())).link if self.seats else ""

    async def nodes(self) -> list[NodeInfo]:
        """The live nodes of the cluster (those silent for a lease time are dropped: their
        leases have run out too)."""
        horizon = int(time.time() * 1000) - self.settings.lease_ms
        out: list[NodeInfo] = []
        for name, raw in (await self.redis.hgetall(NODES_KEY)).items():
            info = msgspec.json.decode(raw, type=NodeInfo)
            if info.seen_ms < horizon:
                await self.redis.hdel(NODES_KEY, name)
            else:
                out.append(info)
        return sorted(out, key=lambda n: n.node)

    # ------------------------------------------------------------------ routing to seats

    def seat_of_hello(self, hello: Hello) -> Seat:
        """The seat of the space a client's hello joins (ProtocolError: refused, as the
        leader would refuse it)."""
        return self.seats[self.auth.authenticate(hello).space]

    def seat_of_request(self, request: web.Request) -> Seat:
        """The seat of the space an HTTP request addresses (its token's, ``?space=``, or
        the default)."""
        token = request_token(request)
        owner = self.auth.lookup_token(token) if token else None
        sid = owner[0] if owner else self.auth.addressed_space(request.query.get("space"))
        return self.seats.get(sid) or next(iter(self.seats.values()))

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
        leaders = {
            sid: (seat.leader.node if seat.leader else None) for sid, seat in self.seats.items()
        }
        return {
            "node": self.name,
            "role": self.role,
            "leads": self.led(),
            "leader": next(iter(leaders.values()), None),
            "leaders": leaders,
            "nodes": nodes,
            "redis": {
                "url": redacted_url(self.settings.redis_url),
                "reachable": self.redis_ok,
                "latency_ms": round(self.redis_ms, 3),
            },
        }


class _NodeCollector(Collector):
    def __init__(self, node: Node) -> None:
        self.node = node

    def collect(self) -> Iterator[GaugeMetricFamily]:
        node = self.node
        yield GaugeMetricFamily(
            "hubbub_cluster_leader", "Spaces this node leads", value=len(node.led())
        )
        yield GaugeMetricFamily(
            "hubbub_cluster_links",
            "Links of other nodes to the spaces this node leads",
            value=node.metrics.cluster_links,
        )
        yield GaugeMetricFamily(
            "hubbub_redis_latency_seconds",
            "Round trip of this node's last Redis command of its supervision",
            value=node.redis_ms / 1000,
        )
        yield GaugeMetricFamily(
            "hubbub_redis_reachable", "1 while Redis answers this node", value=int(node.redis_ok)
        )
