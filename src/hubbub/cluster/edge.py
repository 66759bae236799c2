"""A node's uplink to the leader: its clients' frames go up, the leader's frames come down."""

from __future__ import annotations

import asyncio
import itertools
import logging
from typing import Any

import aiohttp
import msgspec

from hubbub.cluster import wire
from hubbub.server.state.connection import CLOSE_SERVICE_RESTART, Connection
from hubbub.server.state.metrics import Metrics

log = logging.getLogger("hubbub.cluster")

LEADER_LOST = "the cluster's leader changed; reconnect and resume (nothing is lost)"
UPLINK_LIMIT_BYTES = 16 * 1024 * 1024
"""How much of this node's clients' frames may wait for a leader that does not read them;
beyond it new frames are refused (``unavailable``) instead of queued."""


class Uplink:
    """The link from this node to the leader, carrying every client of this node."""

    def __init__(self, node: str, leader_link: str, secret: str, metrics: Metrics) -> None:
        self.node = node
        self.target = leader_link
        self.secret = secret
        self.metrics = metrics
        self.clients: dict[int, Connection] = {}
        self.up = asyncio.Event()
        self.closed = False
        self._ids = itertools.count(1)
        self._batch: list[list[Any]] = []
        self._scheduled = False
        self._outq: asyncio.Queue[bytes | None] = asyncio.Queue()
        self.queued_bytes = 0
        """Bytes waiting to be written to the leader."""
        self.limit_bytes = UPLINK_LIMIT_BYTES
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Connect in the background; :attr:`up` is set once linked."""
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def close(self) -> None:
        """Drop the link (its clients are closed with 1012 and resume elsewhere)."""
        self.closed = True
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        self.close_clients()

    @property
    def alive(self) -> bool:
        """Whether the link is up or still connecting."""
        return not self.closed and self._task is not None and not self._task.done()

    # ------------------------------------------------------------------ clients of this node

    def open(self, conn: Connection, dialect: str, hello: bytes, peer: str) -> int:
        """Register a client whose hello was read; the leader attaches it."""
        sid = next(self._ids)
        self.clients[sid] = conn
        self._queue([wire.OPEN, sid, dialect, hello, peer])
        return sid

    def forward(self, sid: int, data: bytes | str) -> bool:
        """Send one client frame to the leader; False (refused, nothing sent) while the
        leader lets :attr:`limit_bytes` or more wait."""
        if self.queued_bytes >= self.limit_bytes:
            return False
        self._queue([wire.IN, sid, data])
        return True

    def gone(self, sid: int) -> None:
        """A client of this node went away."""
        if self.clients.pop(sid, None) is not None and not self.closed:
            self._queue([wire.GONE, sid])

    def _queue(self, msg: list[Any]) -> None:
        self._batch.append(msg)
        if not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        self._scheduled = False
        batch, self._batch = self._batch, []
        if batch and not self.closed:
            data = wire.encode_batch(batch)
            self.queued_bytes += len(data)
            self._outq.put_nowait(data)

    # ------------------------------------------------------------------ the link

    async def _run(self) -> None:
        headers = {wire.SECRET_HEADER: self.secret, wire.NODE_HEADER: self.node}
        url = f"http://{self.target}{wire.LINK_PATH}"
        try:
            async with (
                aiohttp.ClientSession() as http,
                http.ws_connect(
                    url, headers=headers, max_msg_size=0, heartbeat=5.0, compress=0
                ) as ws,
            ):
                log.info("linked to the leader at %s", self.target)
                self.up.set()
                writer = asyncio.get_running_loop().create_task(self._write(ws))
                try:
                    async for msg in ws:
                        if msg.type != aiohttp.WSMsgType.BINARY or not self._deliver(msg.data):
                            break
                finally:
                    writer.cancel()
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            log.info("link to the leader at %s failed: %s", self.target, exc)
        finally:
            self.closed = True
            self.up.clear()
            self.close_clients()

    async def _write(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        while True:
            data = await self._outq.get()
            if data is None:
                return
            await ws.send_bytes(data)  # waits while the leader does not read
            self.queued_bytes -= len(data)

    def _deliver(self, data: bytes) -> bool:
        try:
            batch = wire.decode_batch(data)
        except msgspec.DecodeError:
            log.warning("the leader sent a malformed link frame; dropping the link")
            return False
        clients = self.clients
        i, n = 0, len(batch)
        while i < n:
            msg = batch[i]
            i += 1
            if msg[0] == wire.OUT:
                sids, frames = msg[2], [msg[1]]
                # a channel's messages of one commit go to the same clients: one send each
                while i < n and batch[i][0] == wire.OUT and batch[i][2] == sids:
                    frames.append(batch[i][1])
                    i += 1
                data = frames[0] if len(frames) == 1 else b"".join(frames)
                for sid in sids:
                    conn = clients.get(sid)
                    if conn is not None:
                        conn.send(data)
            elif msg[0] == wire.CLOSE:
                conn = clients.get(int(msg[1]))
                if conn is not None:
                    conn.close(int(msg[2]), str(msg[3]))
        return True

    def close_clients(self, code: int = CLOSE_SERVICE_RESTART, reason: str = LEADER_LOST) -> None:
        """Close every client carried by this link (by default: reconnect and resume)."""
        clients, self.clients = self.clients, {}
        for conn in clients.values():
            conn.close(code, reason)
