"""One reader that stops reading never stalls a channel: it is disconnected with a reason."""

from __future__ import annotations

import asyncio
import json
import socket
from pathlib import Path

import pytest
import websockets

from hubbub.server.config import Limits
from tests.conftest import start_gateway, stop_gateway


@pytest.mark.slow  # load: fills a 256 KiB send buffer
async def test_stalled_reader_is_disconnected_and_channel_keeps_flowing(tmp_path: Path) -> None:
    gw = await start_gateway(tmp_path, limits=Limits(rate_per_s=0, send_buffer_bytes=256 * 1024))
    try:
        alice = await gw.mew("alice")
        fast = await gw.mew("fast")
        # a reader with a tiny socket buffer whose library stops reading after one frame
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect(("127.0.0.1", gw.port))
        sock.setblocking(False)
        slow = await websockets.connect(gw.url, sock=sock, max_queue=1, max_size=None)
        await slow.send(json.dumps({"type": "join", "participantId": "slow"}))
        await asyncio.sleep(0.2)
        n = 3000
        blob = "x" * 2000

        left: list[str] = []
        progress = [0, 0]  # messages each reading peer has received
        window = 40  # at most this many (80 KB) in flight to a reader: well under its buffer
        moved = asyncio.Event()
        slow_left = asyncio.Event()

        async def read_all(client: object, k: int) -> int:
            while progress[k] < n:
                frame = await client.recv(timeout=10)  # type: ignore[attr-defined]
                if frame.get("kind") == "system/presence" and frame["payload"]["event"] == "leave":
                    left.append(frame["payload"]["participant"]["id"])
                    slow_left.set()
                if frame.get("kind") == "chat":
                    assert frame["payload"]["text"].startswith(f"{progress[k]}:")
                    progress[k] += 1
                    moved.set()
            return progress[k]

        async def read_slow_once_cut() -> websockets.ConnectionClosed:
            # the slow reader reads again once its peers hear it was cut (the gateway aborts
            # the connection 2 s after its close frame): it finds the close frame and reason
            await slow_left.wait()
            try:
                while True:
                    await asyncio.wait_for(slow.recv(), 5)
            except websockets.ConnectionClosed as exc:
                return exc

        slow_reader = asyncio.create_task(read_slow_once_cut())
        readers = [asyncio.create_task(read_all(c, k)) for k, c in enumerate((alice, fast))]
        for i in range(n):
            # pace the flood by the readers that do read, however busy the machine: only the
            # reader that stopped reading may fall behind
            while i - min(progress) > window and not any(r.done() for r in readers):
                moved.clear()
                await asyncio.wait_for(moved.wait(), 10)
            await alice.send({"kind": "chat", "payload": {"text": f"{i}:{blob}"}})
        assert await asyncio.gather(*readers) == [n, n]
        assert gw.router.metrics.slow_consumer_disconnects == 1
        assert "slow" not in gw.router.spaces["default"].online
        assert left == ["slow", "slow"], "both peers saw the slow reader leave"
        exc = await slow_reader
        assert exc.rcvd is not None and exc.rcvd.code == 1013
        assert "slow consumer" in exc.rcvd.reason
    finally:
        await stop_gateway(gw)


async def test_a_silent_dead_peer_is_dropped_by_the_ping(tmp_path: Path) -> None:
    gw = await start_gateway(tmp_path, limits=Limits(ping_interval_s=0.2))
    try:
        alice = await gw.mew("alice")
        ghost = await gw.mew("ghost")
        ghost.ws.transport.pause_reading()  # a peer that vanished without closing: no pongs
        left = await alice.next_where(
            lambda f: f.get("kind") == "system/presence" and f["payload"]["event"] == "leave",
            timeout=5,
        )
        assert left["payload"]["participant"]["id"] == "ghost"
        assert "ghost" not in gw.router.spaces["default"].online
        ghost.ws.transport.abort()
    finally:
        await stop_gateway(gw)
