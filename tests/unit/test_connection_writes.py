"""A connection writes a loop turn's frames in one write, in order, and nothing once its
transport is closing (on a real socket pair)."""

from __future__ import annotations

import asyncio
import socket

from hubbub.protocol.dialects import DIALECTS
from hubbub.server.state.connection import SocketConnection


async def _pair() -> tuple[SocketConnection, asyncio.StreamReader, list[int]]:
    """A connection on one end of a socket pair, a reader of the other end, and the sizes
    of the writes it makes."""
    a, b = socket.socketpair()
    loop = asyncio.get_running_loop()
    transport, _ = await loop.create_connection(asyncio.Protocol, sock=a)
    reader = asyncio.StreamReader()
    await loop.create_connection(lambda: asyncio.StreamReaderProtocol(reader), sock=b)
    writes: list[int] = []
    write = transport.write

    def counted(data: bytes | bytearray | memoryview) -> None:
        writes.append(len(data))
        write(data)

    transport.write = counted  # type: ignore[method-assign]
    conn = SocketConnection(transport, DIALECTS["mew"], 1 << 20, lambda c: None, "peer")
    return conn, reader, writes


async def _turn() -> None:
    await asyncio.sleep(0)
    await asyncio.sleep(0)


def test_a_turns_frames_leave_in_one_write_in_order() -> None:
    async def main() -> None:
        conn, reader, writes = await _pair()
        assert all(conn.send(f) for f in (b"one", b"two", b"three"))
        await _turn()
        assert writes == [11]
        assert await reader.readexactly(11) == b"onetwothree"
        conn.transport.close()

    asyncio.run(main())


def test_nothing_is_written_to_a_closing_transport() -> None:
    async def main() -> None:
        conn, reader, writes = await _pair()
        assert conn.send(b"before")
        conn.transport.close()  # closed during the turn, after its first frame
        conn.send(b"during")
        await _turn()
        assert conn.send(b"after") is False
        await _turn()
        assert writes == []
        assert await reader.read() == b""  # end of stream, no frame

    asyncio.run(main())
