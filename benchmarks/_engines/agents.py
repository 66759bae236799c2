"""MEW participants for the engine benchmarks, on the fan-out benchmark's raw WebSocket client.

An :class:`Agent` reads only the ``kind`` of each frame (the first ``"kind":"`` of a MEW
envelope: the gateway encodes ``kind`` first) and hands the frames of the kinds a scenario
registered in :attr:`Agent.hooks` to it, with the time of arrival. Control replies
(``channel/joined``, ``channel/list-response``) resolve futures, and error frames are
recorded. Many agents share one process and one event loop.
"""

from __future__ import annotations

import asyncio
import collections
import time
from collections.abc import Callable, Sequence
from typing import Any

import msgspec

from _fanout.rawws import Tally, WSClient, connect
from _fanout.servers import HOST, ServerProc

CONNECT_CONCURRENCY = 64
"""Handshakes in flight at once: below aiohttp's default listen backlog (128)."""

_KIND = b'"kind":"'
_SYNC = b'{"kind":"channel/list"}'
_DECODE = msgspec.json.Decoder(dict[str, Any])

Hook = Callable[["Agent", bytes, float], None]
"""``(agent, frame payload, time.perf_counter() at arrival)``."""


class Agent:
    """One MEW participant: a raw client plus a handler that dispatches frames by kind."""

    def __init__(self, pid: str, client: WSClient) -> None:
        self.pid = pid
        self.client = client
        self.hooks: dict[bytes, Hook] = {}
        self.errors: list[str] = []
        self._waiters: dict[bytes, collections.deque[asyncio.Future[bytes]]] = {}
        client.handler = self

    # -- the rawws FrameHandler protocol ------------------------------------------------------

    def on_frame(self, data: bytearray, start: int, end: int) -> None:
        i = data.find(_KIND, start, end)
        if i < 0:
            return
        i += len(_KIND)
        kind = bytes(data[i : data.find(b'"', i, end)])
        hook = self.hooks.get(kind)
        if hook is not None:
            hook(self, bytes(data[start:end]), time.perf_counter())
            return
        if kind == b"system/error":
            payload = bytes(data[start:end])
            self.errors.append(payload.decode(errors="replace")[:400])
            for queue in self._waiters.values():
                while queue:
                    fut = queue.popleft()
                    if not fut.done():
                        fut.set_exception(RuntimeError(f"{self.pid}: error frame {payload!r}"))
            return
        waiting = self._waiters.get(kind)
        if waiting:
            fut = waiting.popleft()
            if not fut.done():
                fut.set_result(bytes(data[start:end]))

    def on_chunk_done(self) -> None:
        pass

    # -- sending and waiting -------------------------------------------------------------------

    def send(self, frame: bytes) -> None:
        """Send one text frame (a JSON envelope)."""
        self.client.send_text(frame)

    def expect(self, kind: bytes) -> asyncio.Future[bytes]:
        """A future for the next frame of ``kind`` (first come, first served)."""
        fut: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        self._waiters.setdefault(kind, collections.deque()).append(fut)
        return fut

    def sync(self) -> asyncio.Future[bytes]:
        """Resolves once the gateway has handled every frame this agent sent before it."""
        fut = self.expect(b"channel/list-response")
        self.send(_SYNC)
        return fut

    def close(self) -> None:
        self.client.close()


def decode(payload: bytes) -> dict[str, Any]:
    """A frame as a dict."""
    return _DECODE.decode(payload)


async def _open_one(server: ServerProc, pid: str, kind: str, timeout: float) -> Agent:
    client = await connect(HOST, server.port, "/ws", Tally(), b"\x00", timeout=timeout)
    agent = Agent(pid, client)
    try:
        async with asyncio.timeout(timeout):
            joined = agent.expect(b"channel/joined")
            agent.send(
                b'{"type":"join","participantId":"%s","space":"default","kind":"%s"}'
                % (pid.encode(), kind.encode())
            )
            either: set[asyncio.Future[Any]] = {joined, client.closed}
            done, _ = await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
            if joined not in done:
                raise ConnectionError(
                    f"{pid}: connection closed during join: {client.close_reason}"
                )
            joined.result()
    except BaseException:
        client.close()
        raise
    return agent


async def open_agents(
    server: ServerProc,
    pids: Sequence[str],
    kind: str = "agent",
    timeout: float = 30.0,
) -> list[Agent]:
    """Connect and join ``#general`` with each id; on any failure close them all and raise."""
    sem = asyncio.Semaphore(CONNECT_CONCURRENCY)

    async def one(pid: str) -> Agent:
        async with sem:
            return await _open_one(server, pid, kind, timeout)

    results = await asyncio.gather(*(one(p) for p in pids), return_exceptions=True)
    agents = [r for r in results if isinstance(r, Agent)]
    errors = [r for r in results if not isinstance(r, Agent)]
    if errors:
        await close_agents(agents)
        raise RuntimeError(
            f"{len(errors)} of {len(pids)} connections failed; first: {errors[0]!r}\n"
            f"server log:\n{server.log_tail()}"
        )
    return agents


async def sync_all(agents: Sequence[Agent], timeout: float = 60.0) -> None:
    """Wait until the gateway has handled everything each of ``agents`` sent so far."""
    async with asyncio.timeout(timeout):
        await asyncio.gather(*(a.sync() for a in agents))


async def close_agents(agents: Sequence[Agent], timeout: float = 5.0) -> None:
    for a in agents:
        a.close()
    if agents:
        await asyncio.wait([a.client.closed for a in agents], timeout=timeout)
