"""The leader's end of a node link: the edge's clients as sessions of the local router."""

from __future__ import annotations

import asyncio
import logging
from typing import Any, cast

import msgspec
from aiohttp import WSMsgType, web

from hubbub.cluster import wire
from hubbub.protocol.dialect import Dialect
from hubbub.protocol.dialects import DIALECTS, NATIVE
from hubbub.protocol.errors import ProtocolError
from hubbub.server.app import error_frames, open_session
from hubbub.server.gateway import Gateway
from hubbub.server.state.connection import (
    CLOSE_POLICY,
    Connection,
    Members,
    SocketConnection,
    ws_binary_frame,
)
from hubbub.server.state.port import Sent
from hubbub.server.state.space import Session

log = logging.getLogger("hubbub.cluster")

LINK_BUFFER_BYTES = 256 * 1024 * 1024
"""How far a link may fall behind before the edge is cut off (its clients then resume)."""


class RemoteConnection(Connection):
    """A client connected to another node: what the router writes goes over the link, whose
    port (the link's own connection's) holds it and counts its bytes for every client of the
    link; slow readers are cut off by their own node."""

    __slots__ = ("link", "sid")

    def __init__(self, link: LeaderLink, sid: int, dialect: Dialect, peer: str) -> None:
        super().__init__(dialect, link.conn.port, link.router.on_overflow, peer)
        self.link = link
        self.sid = sid

    @property
    def group(self) -> LeaderLink:
        """Its node's link: a channel's fan-out reaches all of the link's clients in one call."""
        return self.link

    @property
    def member(self) -> int:
        """Its id on the link."""
        return self.sid

    def send(self, frame: bytes, sent: Sent = None) -> bool:
        """Queue one frame for this client on its node's link."""
        if self.closed:
            return False
        self.link.out(frame, self.sid)
        return True

    def flush(self) -> None:
        """Nothing to flush: the link writes once per loop turn."""

    def overflow(self) -> None:
        """Slow readers are cut off by their own node."""

    def close(self, code: int, reason: str) -> None:
        """Ask the client's node to close it with ``code``."""
        if self.closed:
            return
        self.closed = True
        self.link.close(self.sid, code, reason)


class LeaderLink:
    """One edge node's link on the leader: attach, route and detach its clients."""

    def __init__(self, router: Gateway, node: str, conn: Connection) -> None:
        self.router = router
        self.node = node
        self.conn = conn
        self.sessions: dict[int, Session] = {}
        self._opening: dict[int, list[Any]] = {}
        """Frames of clients whose attach is still running (routed once it is done)."""
        self._batch: list[list[Any]] = []
        self.last: bytes | None = None
        """The frame of the batch's last entry (``[OUT, frame, ids]``; None when the last
        entry is another): the same frame for more clients adds to its ids."""
        self._scheduled = False

    # ------------------------------------------------------------------ to the edge

    def out(self, frame: bytes, sid: int) -> None:
        """Queue ``frame`` for client ``sid``; a frame fanned out to many is sent once."""
        if frame is self.last:
            self._last_ids().append(sid)
            return
        self.last = frame
        self._batch.append([wire.OUT, frame, [sid]])
        self._schedule()

    def send_many(self, frame: bytes, members: Members) -> None:
        """Queue ``frame`` for clients ``members`` (a channel's fan-out: one call per link;
        the members' ids are encoded once until they change, not once per message)."""
        if frame is self.last:
            self._last_ids().extend(members.values())
            return
        packed = members.packed
        if not isinstance(packed, msgspec.Raw):
            packed = members.packed = wire.packed_ids(list(members.values()))
        self.last = frame
        self._batch.append([wire.OUT, frame, packed])
        self._schedule()

    def _last_ids(self) -> list[int]:
        """The ids of the last entry, as a list that may grow (a packed one is unpacked)."""
        entry = self._batch[-1]
        ids = entry[2]
        if isinstance(ids, msgspec.Raw):
            ids = entry[2] = wire.unpacked_ids(ids)
        return cast(list[int], ids)

    def close(self, sid: int, code: int, reason: str) -> None:
        """Queue closing client ``sid``."""
        self.last = None
        self._batch.append([wire.CLOSE, sid, code, reason])
        self._schedule()

    def _schedule(self) -> None:
        if not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        self._scheduled = False
        self.last = None
        batch, self._batch = self._batch, []
        if batch:
            self.conn.send(ws_binary_frame(wire.encode_batch(batch)))

    # ------------------------------------------------------------------ from the edge

    def handle(self, data: bytes) -> None:
        """Act on one batch from the edge."""
        for msg in wire.decode_batch(data):
            kind, sid = msg[0], int(msg[1])
            if kind == wire.IN:
                session = self.sessions.get(sid)
                if session is not None:
                    self.router.receive(session, msg[2])
                elif sid in self._opening:
                    self._opening[sid].append(msg[2])
            elif kind == wire.OPEN:
                self._opening[sid] = []
                self.router.spawn(self._open(sid, str(msg[2]), bytes(msg[3]), str(msg[4])))
            elif kind == wire.GONE:
                session = self.sessions.pop(sid, None)
                if session is not None:
                    self.router.detach(session)
                elif sid in self._opening:
                    self._opening[sid].append(None)  # gone while attaching

    async def _open(self, sid: int, dialect_name: str, hello: bytes, peer: str) -> None:
        dialect = DIALECTS.get(dialect_name, NATIVE)
        conn = RemoteConnection(self, sid, dialect, peer)
        try:
            frame = msgspec.json.decode(hello)
        except msgspec.DecodeError:
            frame = None
        if not isinstance(frame, dict) or dialect_name not in DIALECTS:
            self._opening.pop(sid, None)
            conn.close(CLOSE_POLICY, "malformed hello")
            return
        session, refusal = await open_session(self.router, dialect, frame, conn)
        waiting = self._opening.pop(sid, [])
        if session is None:
            assert refusal is not None
            self._refuse(conn, dialect, refusal)
            return
        self.sessions[sid] = session
        for data in waiting:
            if data is None or self.sessions.get(sid) is not session:
                self.sessions.pop(sid, None)
                self.router.detach(session)
                return
            self.router.receive(session, data)

    def _refuse(self, conn: RemoteConnection, dialect: Dialect, exc: ProtocolError) -> None:
        self.out(error_frames(dialect, exc), conn.sid)
        conn.close(CLOSE_POLICY, exc.message[:120])

    def drop(self) -> None:
        """The link is gone: its clients are offline (they reconnect and resume)."""
        for session in self.sessions.values():
            session.conn.closed = True
            self.router.detach(session, stranded=True)  # their callbacks wait for them
        self.sessions.clear()
        self._opening.clear()


async def serve_link(request: web.Request, router: Gateway, node: str) -> web.WebSocketResponse:
    """Serve one edge node's link until it closes."""
    ws = web.WebSocketResponse(max_msg_size=0, compress=False, heartbeat=5.0)
    await ws.prepare(request)
    transport = request.transport
    assert transport is not None
    conn = SocketConnection(transport, NATIVE, LINK_BUFFER_BYTES, lambda c: None, node)
    link = LeaderLink(router, node, conn)
    log.info("node %s linked", node)
    router.metrics.cluster_links += 1
    try:
        async for msg in ws:
            if msg.type == WSMsgType.BINARY:
                try:
                    link.handle(msg.data)
                except (msgspec.DecodeError, ValueError, IndexError, TypeError):
                    log.warning("node %s sent a malformed link frame; dropping the link", node)
                    break
            elif msg.type == WSMsgType.ERROR:
                break
    finally:
        router.metrics.cluster_links -= 1
        link.drop()
        log.info("node %s unlinked", node)
    return ws
