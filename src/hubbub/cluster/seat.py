"""One space on one node: led here (its router and link site) or followed (an uplink)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import socket
import time
from collections.abc import Callable
from typing import Any, Protocol

from aiohttp import web

from hubbub.cluster import wire
from hubbub.cluster.edge import Uplink
from hubbub.cluster.leader_link import serve_link
from hubbub.cluster.lease import LeaderInfo, Lease, lease_key
from hubbub.server.config import Limits
from hubbub.server.gateway import Gateway
from hubbub.server.listener import ConnectionGate, GuardedSite
from hubbub.server.state.connection import CLOSE_SERVICE_RESTART
from hubbub.server.state.metrics import Metrics
from hubbub.server.web_guard import FORWARDED_BY_NODE
from hubbub.store.base import Store
from hubbub.store.redis import RedisStore

log = logging.getLogger("hubbub.cluster")

STEP_DOWN = "this gateway stopped leading the space; reconnect and resume (nothing is lost)"


class SeatHost(Protocol):
    """What a seat needs of its node."""

    name: str
    redis: Any
    secret: str
    metrics: Metrics
    stopping: bool
    replicas: int

    def build_router(self, space: str, store: Store) -> Gateway:
        """A router for ``space`` over ``store``."""

    def build_app(self, router: Gateway) -> web.Application:
        """The gateway application serving ``router``."""

    def link_gate(self, limits: Limits) -> ConnectionGate:
        """The gate every link port of this node shares (its caps: :func:`link_caps`)."""


class Seat:
    """A space on this node: leads it while holding its lease, else links to its leader."""

    def __init__(
        self, node: SeatHost, space: str, link_host: str, link_port: int, advertise: str | None
    ) -> None:
        self.node = node
        self.space = space
        self.router: Gateway | None = None
        """The space's router while this node leads it."""
        self.uplink: Uplink | None = None
        """The link to the space's leader while another node leads it."""
        self.leader: LeaderInfo | None = None
        self.changed = asyncio.Event()
        """Set (and replaced) whenever the leader changes."""
        self._link_host = link_host
        self._sock = self._bind(link_port)
        port = self._sock.getsockname()[1]
        self.link = f"{advertise or link_host}:{port}"
        self.lease: Lease | None = None
        self._runner: web.AppRunner | None = None
        self._free_since = 0.0
        """When this node first saw the space without a leader (0: it has one)."""
        self.handing_off = False
        """True while this node hands the lead over (it renews, admits nothing new)."""

    def _bind(self, port: int) -> socket.socket:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self._link_host, port))
        sock.listen(1024)
        sock.setblocking(False)
        return sock

    def open(self, ttl_ms: int) -> None:
        """Prepare the lease (taken by the first :meth:`tick` that finds the space free)."""
        self.lease = Lease(
            self.node.redis, lease_key(self.space), self.node.name, self.link, ttl_ms
        )

    # ------------------------------------------------------------------ the loop

    async def refresh(self) -> None:
        """Renew the lease while leading; else learn who leads and follow it."""
        lease = self.lease
        assert lease is not None
        if self.handing_off:
            await lease.renew()  # until what it admitted is committed and the lease released
            return
        if self.router is not None and not await lease.renew():
            log.warning("another node took the lead of %s; following it", self.space)
            await self.stop_leading(release=False)
        if self.router is None:
            leader = await lease.current()
            if leader is None:
                self._free_since = self._free_since or time.monotonic()
            else:
                self._free_since = 0.0
            self._follow(leader)

    @property
    def free_ms(self) -> float | None:
        """How long this node has seen the space without a leader (None: it has one)."""
        if self.router is not None or self.handing_off or not self._free_since:
            return None
        return (time.monotonic() - self._free_since) * 1000

    async def take(self) -> bool:
        """Take the free lease and lead the space (False: another node was first)."""
        lease = self.lease
        assert lease is not None
        if not await lease.acquire():
            return False
        self._free_since = 0.0
        await self._lead()
        return True

    @property
    def sessions(self) -> int:
        """Clients of the space while this node leads it (those a hand-off would move)."""
        if self.router is None:
            return 0
        return sum(len(space.online) for space in self.router.spaces.values())

    async def hand_off(self, timeout_s: float) -> None:
        """Give the lead up gracefully: stop admitting, commit what was admitted, release the
        lease (the next leader loads all of it), its clients resume on the next leader."""
        if self.router is None or self.handing_off:
            return
        self.handing_off = True
        try:
            await asyncio.wait_for(self.stop_leading(release=True), timeout_s)
        except TimeoutError:  # Redis did not take the last commit: the lease runs out instead
            log.warning("hand-off of %s did not commit within %.0f s", self.space, timeout_s)
        finally:
            self.handing_off = False
        log.info("node %s handed the lead of %s over", self.node.name, self.space)

    def _follow(self, leader: LeaderInfo | None) -> None:
        if self.router is not None:
            return
        if leader != self.leader:
            self.leader = leader
            self._changed()
        up = self.uplink
        if leader is None or (up is not None and up.alive and up.target == leader.link):
            return
        if up is not None:
            asyncio.get_running_loop().create_task(up.close())
        self.uplink = Uplink(self.node.name, leader.link, self.node.secret, self.node.metrics)
        self.uplink.start()

    def _changed(self) -> None:
        self.changed.set()
        self.changed = asyncio.Event()

    # ------------------------------------------------------------------ leading

    async def _lead(self) -> None:
        lease = self.lease
        assert lease is not None
        if self.uplink is not None:
            await self.uplink.close()
            self.uplink = None
        store = RedisStore(
            self.node.redis, fence=lease, on_fenced=self._fenced, replicas=self.node.replicas
        )
        router = self.node.build_router(self.space, store)
        app = self.node.build_app(router)  # its startup starts the router (loads the space)
        app.middlewares.insert(0, self._internal_only)
        app.router.add_get(wire.LINK_PATH, self._link)
        runner = web.AppRunner(app, handle_signals=False, access_log=None, shutdown_timeout=2.0)
        await runner.setup()
        host, port = self._sock.getsockname()[:2]
        limits = router.limits
        gate = self.node.link_gate(limits)  # the public port's guard, with the links' caps
        site = GuardedSite(
            runner, host, port, limits, self.node.metrics, sock=self._sock, gate=gate
        )
        await site.start()
        self._runner = runner
        self.router = router
        self.leader = lease.info
        self._changed()
        log.info("node %s leads space %s (links at %s)", self.node.name, self.space, self.link)

    def _fenced(self) -> None:
        if self.router is not None and not self.node.stopping:
            asyncio.get_running_loop().create_task(self.stop_leading(release=False))

    async def stop_leading(self, *, release: bool) -> None:
        """Stop leading: close the space's clients (they resume elsewhere), free the lease."""
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
        if self.lease is not None and release:
            with contextlib.suppress(Exception):
                await self.lease.release()
        if not self.node.stopping:
            self._sock = self._bind(int(self.link.rsplit(":", 1)[1]))  # the same port again

    @web.middleware
    async def _internal_only(
        self, request: web.Request, handler: Callable[[web.Request], Any]
    ) -> web.StreamResponse:
        given = request.headers.get(wire.SECRET_HEADER, "")
        if not secrets.compare_digest(given, self.node.secret):
            return web.json_response(
                {"error": "auth_failed", "message": "this port is for the cluster's nodes only"},
                status=403,
            )
        request[FORWARDED_BY_NODE] = True  # screened by the node that forwarded it
        response: web.StreamResponse = await handler(request)
        return response

    async def _link(self, request: web.Request) -> web.StreamResponse:
        router = self.router
        if router is None:
            return web.json_response(
                {"error": "unavailable", "message": f"not the leader of {self.space}"}, status=503
            )
        return await serve_link(request, router, request.headers.get(wire.NODE_HEADER, "?"))

    # ------------------------------------------------------------------ followers' clients

    async def uplink_ready(self, wait_s: float) -> Uplink | None:
        """The link to the leader, waiting up to ``wait_s`` for one (None: this node leads
        now, or no leader came)."""
        deadline = time.monotonic() + wait_s
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

    async def close(self) -> None:
        """Leave: drop the uplink; hand the lead over at once (what is queued is committed)."""
        if self.uplink is not None:
            await self.uplink.close()
        if self.router is not None:
            await self.stop_leading(release=True)
        self._sock.close()
