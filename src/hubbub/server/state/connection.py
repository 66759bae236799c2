"""The gateway's receivers: pre-encoded frames into a bounded port (``state/port.py``), drained
once per loop turn by each kind's driver (a WebSocket's: :class:`SocketConnection`)."""

from __future__ import annotations

import asyncio
import logging
import struct
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Protocol

from hubbub.protocol.dialect import Dialect
from hubbub.server.state.port import Overflow, Port, Sent

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


class Connection(ABC):
    """One receiver of the gateway's writes: delivery writes frames (in the receiver's
    dialect, with the envelopes they were made from) to its :attr:`port`; the subclass is the
    driver that drains it (:class:`SocketConnection`: a WebSocket; ``/mcp``'s seat; a
    cluster link's client; a test's recorder).

    The same frame bytes go to every recipient (encode once, fan out). Frames sent to one
    receiver during one event-loop turn (a group commit delivers a batch of messages at once)
    are drained together, in order, at the end of the turn (:meth:`flush`). Nothing here
    awaits a slow reader: the port's bound and policy decide (``state/port.py``).
    """

    __slots__ = ("_frames", "_on_overflow", "_plain", "closed", "dialect", "peer", "port")

    def __init__(
        self,
        dialect: Dialect,
        port: Port,
        on_overflow: Callable[[Connection], None],
        peer: str = "",
    ) -> None:
        self.dialect = dialect
        self.port = port
        self._frames = port.frames  # the hot path's shortcuts (send: one append per frame)
        self._plain = port.plain
        self.closed = False
        self._on_overflow = on_overflow
        self.peer = peer

    @property
    def group(self) -> FanoutGroup | None:
        """The group through which a fan-out may reach this connection (as :attr:`member`), in
        one call for all the group's connections in a channel; None: one :meth:`send` each."""
        return None

    @property
    def member(self) -> int:
        """This connection's number in its :attr:`group`."""
        return 0

    @property
    def buffer_limit(self) -> int:
        """The port's bound in bytes (the slow-consumer cut)."""
        return self.port.bound

    def send(self, frame: bytes, sent: Sent = None) -> bool:
        """Queue one complete frame (``sent``: the envelopes it carries) for this loop turn's
        drain; False when the connection is gone."""
        if self.closed:
            return False
        frames = self._frames
        if not frames:  # the turn's first frame (flush checks the receiver again)
            if not self.writable():
                self.closed = True
                return False
            _cork(self)
        if self._plain:
            frames.append(frame)  # a byte port: the frame is all it keeps (state/port.py)
        else:
            self.port.put(frame, sent)
        return True

    def writable(self) -> bool:
        """Whether the receiver still takes frames."""
        return True

    def send_payloads(self, payloads: list[bytes], sent: Sent = None) -> None:
        """Frame and send several JSON payloads as one frame buffer."""
        if payloads:
            self.send(ws_text_frames(payloads), sent)

    @abstractmethod
    def flush(self) -> None:
        """Drain the port now (the end of the turn): the driver's part."""

    def overflow(self) -> None:
        """Give up on a receiver that does not keep up: the driver ends it, the gateway
        detaches its session."""
        if self.closed:
            return
        self.closed = True
        log.warning(
            "closing %s: %s (slow consumer)", self.peer, self.port.closed or "over its bound"
        )
        self.port.close(self.port.closed or "slow consumer")
        self.end_slow()
        self._on_overflow(self)

    def end_slow(self) -> None:  # noqa: B027 (a hook: drivers with nothing to end keep it)
        """End the receiver after its port overflowed (the driver's part)."""

    @abstractmethod
    def close(self, code: int, reason: str) -> None:
        """End the receiver with ``code`` and ``reason`` once what was sent before is out."""


class SocketConnection(Connection):
    """A WebSocket client: its port's frames are written to the transport in one write per
    loop turn; the transport's write buffer is what the port holds. When that passes the
    bound (``limits.send_buffer_bytes``) the reader is too slow: it gets a close frame
    (1013, "slow consumer") and is aborted shortly after, so a channel never stalls."""

    __slots__ = ("transport",)

    def __init__(
        self,
        transport: asyncio.Transport,
        dialect: Dialect,
        buffer_limit: int,
        on_overflow: Callable[[Connection], None],
        peer: str = "",
    ) -> None:
        super().__init__(dialect, Port(buffer_limit, Overflow.CLOSE), on_overflow, peer)
        self.transport = transport

    def writable(self) -> bool:
        """Whether the transport is still open."""
        return not self.transport.is_closing()

    def flush(self) -> None:
        """Write the queued frames now, in one write; close a reader that fell too far behind."""
        frames = self._frames
        if not frames:
            return
        port = self.port
        data = frames[0] if len(frames) == 1 else port.drain_bytes()
        frames.clear()
        t = self.transport
        if self.closed or t.is_closing():
            self.closed = True
            return
        t.write(data)
        held = t.get_write_buffer_size()
        if held > port.bound:  # the socket keeps more than the bound: the port's policy
            if not port.settle(held):
                self.overflow()
        else:
            port.held = held

    def end_slow(self) -> None:
        """Close frame, then abort."""
        t = self.transport
        t.write(ws_close_frame(CLOSE_TRY_AGAIN, "slow consumer: send buffer overflow"))
        asyncio.get_running_loop().call_later(2.0, t.abort)

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
