"""Shared fixtures: a real gateway on a real socket with a real SQLite file.

One factory starts every test gateway (:func:`gateways`); ``gateway`` (default limits) and
``gw`` (no rate limit) are the two open-mode gateways most tests use.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import websockets
from aiohttp import web
from hypothesis import settings

from hubbub.server.app import build_app, make_router
from hubbub.server.config import EngineSettings, Limits, SpaceConfig
from hubbub.server.gateway import Gateway
from hubbub.server.listener import GuardedSite
from tests.timing import POLL, WAIT

# No timed assertions: hypothesis' per-example deadline (200 ms) fails a property on a busy
# machine, not on a wrong answer.
settings.register_profile("hubbub", deadline=None)
# The fast lane (`make test-fast`): a tenth of the examples (tests/strength.py scales the
# properties that name their own number) and shorter stateful runs.
settings.register_profile("fast", deadline=None, max_examples=10, stateful_step_count=20)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "hubbub"))

SLOW_FIXTURES = frozenset({"browser", "redis_server", "locked_redis"})
"""A test that uses one of these drives Chromium or a redis-server: it is marked ``slow``."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark ``slow`` every test that needs a browser or a redis-server (tests that start
    processes carry the mark themselves): ``make test-fast`` runs the rest."""
    for item in items:
        if SLOW_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)


class Door:
    """A gateway on 127.0.0.1 at ``port``: the join helpers of every test gateway."""

    port: int
    clients: list[WsClient]
    join_timeout = WAIT
    """How long a join may take (a cluster node carries it to the space's leader)."""

    async def connect(self) -> WsClient:
        # max_queue=None: the client reads whatever the gateway sends even when the test does
        # not consume it, so closing it never waits behind unread frames (a 10 s close timeout)
        ws = await websockets.connect(self.url, max_size=None, max_queue=None, compression=None)
        client = WsClient(ws, self)
        self.clients.append(client)
        return client

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/ws"

    async def settle(self) -> None:
        """Return once the gateway has done what it accepted so far, as far as this process
        can see: nothing for a gateway in another process (a fence orders what it wrote)."""

    @property
    def http(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def mew(self, pid: str, **extra: Any) -> WsClient:
        """Connect and join on the MEW dialect; return once welcome and joins arrived."""
        c = await self.connect()
        await c.send({"type": "join", "participantId": pid, "space": "default", **extra})
        c.welcome = await c.expect("system/welcome", self.join_timeout)
        for _ in extra.get("channels", ["#general"]):
            await c.expect("channel/joined", self.join_timeout)
        return c

    async def agentchat(self, name: str, *, join: bool = True, **extra: Any) -> WsClient:
        """Connect with IDENTIFY; return once WELCOME arrived (the auto-join of #general is
        silent and done by then, as agentchat's).

        ``join=False`` asks for no channel at all (``channels: []``, a hubbub extension).
        """
        c = await self.connect()
        hello = {"type": "IDENTIFY", "name": name, **extra}
        if not join:
            hello.setdefault("channels", [])
        await c.send(hello)
        c.welcome = await c.expect_type("WELCOME", self.join_timeout)
        return c


@dataclass
class RunningGateway(Door):
    """A gateway listening on 127.0.0.1 for one test."""

    router: Gateway
    runner: web.AppRunner
    port: int
    data_dir: Path
    clients: list[WsClient] = field(default_factory=list)
    stopped: bool = False

    async def settle(self) -> None:
        """Return once everything the gateway accepted so far is committed and delivered, its
        background joins and history reads are done and its coalesced presence is sent."""
        gateway = self.router

        async def busy() -> bool:
            await gateway.store.flush()
            return bool(
                gateway.tasks.running or any(s.presence_scheduled for s in gateway.spaces.values())
            )

        loop = asyncio.get_running_loop()
        deadline = loop.time() + WAIT
        while await busy():
            if loop.time() >= deadline:
                raise AssertionError(f"the gateway did not settle within {WAIT:g}s")
            await asyncio.sleep(POLL)


_FENCES = itertools.count(1)


class WsClient:
    """A test client on a real WebSocket that reads JSON frames."""

    def __init__(self, ws: Any, door: Door | None = None) -> None:
        self.ws = ws
        self.door = door
        """The gateway this client was connected to by :meth:`Door.connect` (None: by hand)."""
        self.welcome: dict[str, Any] = {}

    async def send(self, frame: dict[str, Any] | str) -> None:
        await self.ws.send(frame if isinstance(frame, str) else json.dumps(frame))

    async def recv(self, timeout: float = WAIT) -> dict[str, Any]:
        raw = await asyncio.wait_for(self.ws.recv(), timeout)
        out = json.loads(raw)
        assert isinstance(out, dict)
        return out

    async def next_where(
        self, pred: Callable[[dict[str, Any]], bool], timeout: float = WAIT
    ) -> dict[str, Any]:
        """The next frame matching ``pred``, skipping others."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            left = deadline - loop.time()
            if left <= 0:
                raise TimeoutError("no matching frame")
            frame = await self.recv(left)
            if pred(frame):
                return frame

    async def expect(self, kind: str, timeout: float = WAIT) -> dict[str, Any]:
        """The next MEW envelope of ``kind`` (presence frames in between are skipped)."""
        return await self.next_where(lambda f: f.get("kind") == kind, timeout)

    async def expect_type(self, type_: str, timeout: float = WAIT) -> dict[str, Any]:
        """The next agentchat frame of ``type_``."""
        return await self.next_where(lambda f: f.get("type") == type_, timeout)

    async def fence(self, timeout: float = WAIT) -> list[dict[str, Any]]:
        """Ask the gateway something it answers at once (MEW ``channel/list``, agentchat
        ``PING``) and return the frames that arrived before the answer: everything the gateway
        wrote to this client before it read the question is among them."""
        if self.welcome.get("type") == "WELCOME":  # agentchat
            await self.send({"type": "PING"})

            def answer(f: dict[str, Any]) -> bool:
                return f.get("type") == "PONG"
        else:
            ident = f"fence-{next(_FENCES)}"
            await self.send({"kind": "channel/list", "id": ident})

            def answer(f: dict[str, Any]) -> bool:  # a refusal is an answer too
                return f.get("kind") == "channel/list-response" or (
                    f.get("kind") == "system/error" and ident in (f.get("correlation_id") or ())
                )

        before: list[dict[str, Any]] = []
        while not answer(frame := await self.recv(timeout)):
            before.append(frame)
        return before

    async def silent(self, pred: Callable[[dict[str, Any]], bool]) -> None:
        """Assert that no frame matching ``pred`` came, without waiting on the clock.

        First the gateway settles (:meth:`Door.settle`: what it accepted is committed,
        delivered and announced), then a :meth:`fence` on this connection: the gateway writes
        to each connection in order, so a frame it sent for anything it did before the fence is
        among the frames that arrived before the fence's answer. That proves it for what the
        test already caused (a sender saw its echo, its error or its answer; a test clock
        fired its timers).
        """
        if self.door is not None:
            await self.door.settle()
        seen = [f for f in await self.fence() if pred(f)]
        assert seen == [], f"unexpected frame {seen[0]}"

    async def close(self) -> None:
        await self.ws.close()


async def start_gateway(
    data_dir: Path,
    spaces: list[SpaceConfig] | None = None,
    limits: Limits | None = None,
    port: int = 0,
    engines: EngineSettings | None = None,
    clock: Callable[[], float] | None = None,
    wall_clock: Callable[[], float] | None = None,
) -> RunningGateway:
    """Start a gateway with an SQLite file in ``data_dir`` (``clock``: the engines' timeline,
    ``wall_clock``: Unix time, both injectable)."""
    router = make_router(
        spaces,
        data_dir=data_dir,
        limits=limits or Limits(),
        engines=engines,
        clock=clock,
        wall_clock=wall_clock,
    )
    runner = web.AppRunner(build_app(router), handle_signals=False, shutdown_timeout=2.0)
    await runner.setup()
    site = GuardedSite(runner, "127.0.0.1", port, router.limits, router.metrics)
    await site.start()
    server = site._server
    assert server is not None
    bound = server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return RunningGateway(router, runner, bound, data_dir)


async def stop_gateway(gw: RunningGateway) -> None:
    """Close its test clients and stop it (again: nothing)."""
    if gw.stopped:
        return
    gw.stopped = True
    for c in gw.clients:
        await c.ws.close()
    await gw.runner.cleanup()


MakeGateway = Callable[..., Awaitable[RunningGateway]]


@pytest.fixture
async def gateways(tmp_path: Path) -> AsyncIterator[MakeGateway]:
    """``await gateways(**options)``: start a gateway (``spaces``, ``limits``, ``engines``,
    ``clock``, ``port`` as :func:`start_gateway`; ``data_dir`` defaults to ``tmp_path`` for
    the first one, a folder of its own for each later one); all are stopped after the test."""
    started: list[RunningGateway] = []

    async def make(data_dir: Path | None = None, **options: Any) -> RunningGateway:
        if data_dir is None:
            data_dir = tmp_path if not started else tmp_path / f"gateway-{len(started)}"
        gw = await start_gateway(data_dir, **options)
        started.append(gw)
        return gw

    yield make
    for gw in reversed(started):
        await stop_gateway(gw)


@pytest.fixture
async def gateway(gateways: MakeGateway) -> RunningGateway:
    """An open-mode gateway with default limits (the rate limit on)."""
    return await gateways()


@pytest.fixture
async def gw(gateways: MakeGateway) -> RunningGateway:
    """An open-mode gateway without a rate limit."""
    return await gateways(limits=Limits(rate_per_s=0))
