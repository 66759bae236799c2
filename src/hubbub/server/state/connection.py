"""One WebSocket connection's outgoing side: pre-encoded frames, a bounded send buffer."""

from __future__ import annotations

import asyncio
import logging
import struct
from collections.abc import Callable
from typing import Protocol

from hubbub.protocol.dialect import Dialect

log = logging.getLogger("hubbub.connection")

CLOSE_GOING_AWAY = 1001
CLOSE_POLICY = 1008
CLOSE_TOO_BIG = 1009
CLOSE_SERVICE_RESTART = 1012
CLOSE_TRY_AGAIN = 1013
CLOSE_REPLACED = 4000
CLOSE_KICKED = 4001


def ws_text_frame(payload: bytes) -> bytes:
    """A complete unmasked server→client text frame (FIN set, no compression)."""
    return _frame(0x81, payload)


def ws_binary_frame(payload: bytes) -> bytes:
    """A complete unmasked server→client binary frame (FIN set, no compression)."""
    return _frame(0x82, payload)


def _frame(head: int, payload: bytes) -> bytes:
    n = len(payload)
    if n < 126:
        return bytes((head, n)) + payload
    if n < 65536:
        return struct.pack("!BBH", head, 126, n) + payload
    return struct.pack("!BBQ", head, 127, n) + payload


def ws_text_frames(payloads: list[bytes]) -> bytes:
    """Several text frames as one buffer, so a recipient costs one write, not one per frame."""
    return b"".join(ws_text_frame(p) for p in payloads)


def ws_close_frame(code: int, reason: str) -> bytes:
    """A complete unmasked close frame with a status code and a UTF-8 reason (≤ 123 bytes)."""
    body = struct.pack("!H", code) + reason.encode()[:123]
    return bytes((0x88, len(body))) + body


class Members(dict[str, int]):
    """A channel's members reached through one fan-out group: participant → its number in
    the group. ``packed`` is the group's own encoding of the numbers, kept until the members
    change (the channel clears it), so a fan-out to the same members does not encode them
    again for every message."""

    __slots__ = ("packed",)

    def __init__(self) -> None:
        super().__init__()
        self.packed: object = None


class FanoutGroup(Protocol):
    """Takes one frame for many of its connections in one call (a cluster node's link)."""

    def send_many(self, frame: bytes, members: Members) -> None:
        """Queue ``frame`` for the connections numbered ``members.values()``."""


_CORKED: list[Connection] = []
"""Connections with frames waiting for the end of this event-loop turn."""
_UNCORK_ON: list[asyncio.AbstractEventLoop | None] = [None]
"""The loop on which the write of the corked frames is scheduled (None: not scheduled)."""


def _cork(conn: Connection) -> None:
    loop = asyncio.get_running_loop()
    if _UNCORK_ON[0] is not loop:
        _UNCORK_ON[0] = loop
        loop.call_soon(_uncork)
    _CORKED.append(conn)


def _uncork() -> None:
    """Write every connection's frames of this loop turn, one write per connection."""
    _UNCORK_ON[0] = None
    corked = _CORKED[:]
    _CORKED.clear()
    for conn in corked:
        conn.flush()


class Connection:
    """Writes whole frames to the transport; never awaits a slow reader.

    The same frame bytes are written to every recipient (encode once, fan out). Frames sent to
    one connection during one event-loop turn (a group commit delivers a batch of messages at
    once) leave in one write, in order, at the end of the turn. When the transport's buffer
    passes ``buffer_limit`` the reader is too slow: it gets a close frame (1013, "slow
    consumer") and is aborted shortly after, so a channel never stalls.
    """

    __slots__ = ("_on_overflow", "_out", "buffer_limit", "closed", "dialect", "peer", "transport")

    def __init__(
        self,
        transport: asyncio.Transport,
        dialect: Dialect,
        buffer_limit: int,
        on_overflow: Callable[[Connection], None],
        peer: str = "",
    ) -> None:
        self.transport = transport
        self.dialect = dialect
        self.buffer_limit = buffer_limit
        self.closed = False
        self._on_overflow = on_overflow
        self.peer = peer
        self._out: list[bytes] = []

    @property
    def group(self) -> FanoutGroup | None:
        """The group through which a fan-out may reach this connection (as :attr:`member`), in
        one call for all the group's connections in a channel; None: one :meth:`send` each."""
        return None

    @property
    def member(self) -> int:
        """This connection's number in its :attr:`group`."""
        return 0

    def send(self, frame: bytes) -> bool:
        """Queue one complete frame for this loop turn's write; False when the connection is
        gone."""
        if self.closed:
            return False
        out = self._out
        if not out:  # the turn's first frame (flush checks the transport again before writing)
            if self.transport.is_closing():
                self.closed = True
                return False
            _cork(self)
        out.append(frame)
        return True

    def flush(self) -> None:
        """Write the queued frames now, in one write; close a reader that fell too far behind."""
        out = self._out
        if not out:
            return
        data = out[0] if len(out) == 1 else b"".join(out)
        out.clear()
        t = self.transport
        if self.closed or t.is_closing():
            self.closed = True
            return
        t.write(data)
        if t.get_write_buffer_size() > self.buffer_limit:
            self.overflow()

    def send_payloads(self, payloads: list[bytes]) -> None:
        """Frame and write several JSON payloads in one write."""
        if payloads:
            self.send(ws_text_frames(payloads))

    def overflow(self) -> None:
        """Give up on a reader that does not keep up: close frame, then abort."""
        if self.closed:
            return
        self.closed = True
        log.warning(
            "closing %s: send buffer over %d bytes (slow consumer)", self.peer, self.buffer_limit
        )
        t = self.transport
        self._out.clear()
        t.write(ws_close_frame(CLOSE_TRY_AGAIN, "slow consumer: send buffer overflow"))
        asyncio.get_running_loop().call_later(2.0, t.abort)
        self._on_overflow(self)

    def close(self, code: int, reason: str) -> None:
        """Send a close frame and close the transport once it is written."""
        if self.closed:
            return
        self.flush()  # what was sent before the close goes out before it
        self.closed = True
        t = self.transport
        if not t.is_closing():
            t.write(ws_close_frame(code, reason))
            t.close()
            asyncio.get_running_loop().call_later(5.0, t.abort)
