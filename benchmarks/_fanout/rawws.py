"""A minimal asyncio WebSocket client, cheap enough to act as a load generator.

Only the subset of RFC 6455 a benchmark client needs:

* the HTTP/1.1 upgrade handshake (``Sec-WebSocket-Key``, no extensions, no compression);
* client→server text frames, masked with the all-zero masking key (legal per RFC 6455 §5.3:
  the key only has to be present, and XOR with zero makes masking free);
* server→client frames are unmasked, so receiving only walks frame headers. Frames split
  across reads are stitched together.

It is an ``asyncio.BufferedProtocol``: every client of the process reads into one shared
buffer (no allocation per read); an unfinished frame is kept and copied in front of the next
read. A client has three receive paths that can be combined:

* counting (``counting = True``): every complete data frame whose payload contains ``marker``
  adds one to the shared :class:`Tally`. This is one ``bytes.find`` per frame and nothing else;
* full (``handler`` set): every complete data frame is handed to ``handler.on_frame`` with
  the buffer and payload offsets, for clients that must look at payloads (latency samplers,
  handshake waiters);
* per read (``on_chunk`` set): called once per read with the buffer and the end of the complete
  frames in it (senders count their own echoes with ``counting`` and act once per read).
"""

from __future__ import annotations

import asyncio
import base64
import collections
import hashlib
import os
import socket
import struct
from collections.abc import Callable
from typing import Protocol

_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
_ZERO_MASK = b"\x00\x00\x00\x00"
_PACK_LEN2 = struct.Struct("!BBH").pack
_PACK_LEN3 = struct.Struct("!BBQ").pack
_CLOSE_FRAME = b"\x88\x82" + _ZERO_MASK + b"\x03\xe8"  # masked close, code 1000
_MAX_HANDSHAKE = 16 * 1024

OP_CONT = 0x0
OP_TEXT = 0x1
OP_BINARY = 0x2
OP_CLOSE = 0x8
OP_PING = 0x9
OP_PONG = 0xA


def client_frame(payload: bytes, opcode: int = OP_TEXT) -> bytes:
    """Encode one client→server frame (FIN set) masked with the zero key."""
    n = len(payload)
    first = 0x80 | opcode
    if n < 126:
        header = bytes((first, 0x80 | n))
    elif n < 65536:
        header = _PACK_LEN2(first, 0x80 | 126, n)
    else:
        header = _PACK_LEN3(first, 0x80 | 127, n)
    return header + _ZERO_MASK + payload


class Tally:
    """Counters shared by many clients (one attribute add per received chunk)."""

    __slots__ = ("chunks", "closed", "delivered", "nbytes")

    def __init__(self) -> None:
        self.delivered = 0
        self.chunks = 0
        self.nbytes = 0
        self.closed = 0


class _RecvBuffer:
    """The receive buffer shared by every client of the process."""

    def __init__(self, size: int) -> None:
        self.buf = bytearray(size)
        self.view = memoryview(self.buf)

    def grow(self, size: int) -> None:
        self.buf = bytearray(size)
        self.view = memoryview(self.buf)


_RECV = _RecvBuffer(256 * 1024)


class FrameHandler(Protocol):
    """Receives complete data frames of one client (the "full" receive path)."""

    def on_frame(self, data: bytearray, start: int, end: int) -> None:
        """One complete data frame; its payload is ``data[start:end]`` (valid during the call)."""

    def on_chunk_done(self) -> None:
        """Called after all frames of one ``data_received`` chunk were handed over."""


class HandshakeError(RuntimeError):
    """The server refused the WebSocket upgrade."""


class WSClient(asyncio.BufferedProtocol):
    """One WebSocket connection; see the module docstring for the receive paths."""

    def __init__(
        self,
        host: str,
        port: int,
        path: str,
        tally: Tally,
        marker: bytes,
    ) -> None:
        self.host = host
        self.port = port
        self.path = path
        self.tally = tally
        self.marker = marker
        self.counting = False
        self.handler: FrameHandler | None = None
        self.on_chunk: Callable[[bytearray, int], None] | None = None
        self.transport: asyncio.Transport | None = None
        loop = asyncio.get_running_loop()
        self.opened: asyncio.Future[None] = loop.create_future()
        self.closed: asyncio.Future[None] = loop.create_future()
        self.close_reason = ""
        self._upgraded = False
        self._hs_buf = b""
        self._pending = b""
        self._accept = b""

    # -- asyncio.Protocol -------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        key = base64.b64encode(os.urandom(16))
        self._accept = base64.b64encode(hashlib.sha1(key + _GUID).digest())
        transport.write(
            b"GET %s HTTP/1.1\r\nHost: %s:%d\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            b"Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n"
            % (self.path.encode(), self.host.encode(), self.port, key)
        )

    def connection_lost(self, exc: Exception | None) -> None:
        self.tally.closed += 1
        if not self.close_reason:
            self.close_reason = repr(exc) if exc else "connection closed"
        if not self.opened.done():
            self.opened.set_exception(ConnectionError(self.close_reason))
        if not self.closed.done():
            self.closed.set_result(None)

    def get_buffer(self, sizehint: int) -> memoryview:
        # All clients read into one shared buffer (reads never interleave on one thread);
        # the unfinished frame left over by the previous read is copied in front first.
        pending = self._pending
        if not pending:
            return _RECV.view
        np = len(pending)
        if np * 2 > len(_RECV.buf):
            _RECV.grow(np * 4)
        _RECV.buf[:np] = pending
        return _RECV.view[np:]

    def buffer_updated(self, nbytes: int) -> None:
        self.tally.nbytes += nbytes
        n = len(self._pending) + nbytes
        self._pending = b""
        if self._upgraded:
            self._frames(_RECV.buf, n)
            return
        rest = self._handshake(bytes(_RECV.buf[:n]))
        if rest:
            self._frames(bytearray(rest), len(rest))

    def _frames(self, data: bytearray, n: int) -> None:
        """Walk the complete frames in ``data[:n]``; keep an unfinished one for the next read."""
        pos = 0
        hits = 0
        marker = self.marker
        counting = self.counting
        handler = self.handler
        while pos + 2 <= n:
            b1 = data[pos + 1]
            ln = b1 & 0x7F
            if ln < 126:
                start = pos + 2
            elif ln == 126:
                if pos + 4 > n:
                    break
                ln = (data[pos + 2] << 8) | data[pos + 3]
                start = pos + 4
            else:
                if pos + 10 > n:
                    break
                ln = int.from_bytes(data[pos + 2 : pos + 10], "big")
                start = pos + 10
            if b1 & 0x80:  # servers must not mask (RFC 6455 5.1); skip the key, count anyway
                start += 4
            end = start + ln
            if end > n:
                break
            op = data[pos] & 0x0F
            if op <= OP_BINARY:
                if counting and data.find(marker, start, end) >= 0:
                    hits += 1
                if handler is not None:
                    handler.on_frame(data, start, end)
            else:
                self._control(op, bytes(data[start:end]))
            pos = end
        self._pending = bytes(data[pos:n]) if pos < n else b""
        tally = self.tally
        tally.chunks += 1
        if hits:
            tally.delivered += hits
        if handler is not None:
            handler.on_chunk_done()
        if self.on_chunk is not None:
            self.on_chunk(data, pos)

    # -- sending ----------------------------------------------------------------------------

    def send_text(self, payload: bytes) -> None:
        """Send one text frame (``payload`` is UTF-8)."""
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(client_frame(payload))

    def send_raw(self, frames: bytes) -> None:
        """Write already-encoded frames (see :func:`client_frame`)."""
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(frames)

    def set_rcvlowat(self, nbytes: int) -> None:
        """Ask the kernel to report readability only once ``nbytes`` are queued (fewer reads)."""
        if self.transport is not None:
            sock = self.transport.get_extra_info("socket")
            if sock is not None:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, nbytes)

    def close(self) -> None:
        """Send a close frame and close the socket without waiting for the server's reply."""
        if self.transport is not None and not self.transport.is_closing():
            self.close_reason = self.close_reason or "closed by client"
            self.transport.write(_CLOSE_FRAME)
            self.transport.close()

    # -- internals --------------------------------------------------------------------------

    def _handshake(self, data: bytes) -> bytes:
        """Consume the HTTP upgrade response; return the bytes that follow it."""
        buf = self._hs_buf + data
        idx = buf.find(b"\r\n\r\n")
        if idx < 0:
            if len(buf) > _MAX_HANDSHAKE:
                self._fail("handshake response too long")
            self._hs_buf = buf
            return b""
        head, rest = buf[:idx], buf[idx + 4 :]
        self._hs_buf = b""
        lines = head.split(b"\r\n")
        status = lines[0].split(b" ", 2)
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            headers[name.strip().lower()] = value.strip()
        if len(status) < 2 or status[1] != b"101":
            self._fail(f"upgrade refused: {lines[0].decode(errors='replace')}")
            return b""
        if headers.get(b"sec-websocket-accept") != self._accept:
            self._fail("bad Sec-WebSocket-Accept")
            return b""
        self._upgraded = True
        if not self.opened.done():
            self.opened.set_result(None)
        return rest

    def _fail(self, reason: str) -> None:
        self.close_reason = reason
        if not self.opened.done():
            self.opened.set_exception(HandshakeError(reason))
        if self.transport is not None:
            self.transport.abort()

    def _control(self, op: int, payload: bytes) -> None:
        if op == OP_PING:
            self.send_raw(client_frame(payload, OP_PONG))
        elif op == OP_CLOSE:
            code = int.from_bytes(payload[:2], "big") if len(payload) >= 2 else 1005
            self.close_reason = f"server closed: {code} {payload[2:].decode(errors='replace')}"
            if self.transport is not None and not self.transport.is_closing():
                self.transport.write(client_frame(payload[:2], OP_CLOSE))
                self.transport.close()


class Expect:
    """A handler that resolves futures when a frame containing a byte string arrives."""

    def __init__(self, error_markers: tuple[bytes, ...] = ()) -> None:
        self._waiters: list[tuple[bytes, asyncio.Future[bytes]]] = []
        self._errors = error_markers
        self.recent: collections.deque[bytes] = collections.deque(maxlen=8)

    def expect(self, needle: bytes) -> asyncio.Future[bytes]:
        """A future resolved with the first later frame payload containing ``needle``."""
        fut: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        self._waiters.append((needle, fut))
        return fut

    def on_frame(self, data: bytearray, start: int, end: int) -> None:
        payload = bytes(data[start:end])
        self.recent.append(payload[:300])
        if not self._waiters:
            return
        if any(e in payload for e in self._errors):
            for _, fut in self._waiters:
                if not fut.done():
                    fut.set_exception(RuntimeError(f"server error frame: {payload[:300]!r}"))
            self._waiters.clear()
            return
        keep = []
        for needle, fut in self._waiters:
            if needle in payload and not fut.done():
                fut.set_result(payload)
            elif not fut.done():
                keep.append((needle, fut))
        self._waiters = keep

    def on_chunk_done(self) -> None:
        pass


async def connect(
    host: str,
    port: int,
    path: str,
    tally: Tally,
    marker: bytes,
    timeout: float = 10.0,
) -> WSClient:
    """Open a TCP connection and complete the WebSocket upgrade."""
    loop = asyncio.get_running_loop()
    client = WSClient(host, port, path, tally, marker)
    async with asyncio.timeout(timeout):
        await loop.create_connection(lambda: client, host, port)
        await client.opened
    return client
