"""Peak gateway RSS while members resume a channel of large messages and never read (issue 21).

Usage::

    .venv/bin/python benchmarks/resume_rss.py [--messages 10000] [--size 60000] [--readers 4]

A real ``python -m hubbub serve`` (SQLite, rate limit off) is filled with ``--messages``
chats of ``--size`` bytes in ``#general`` and restarted (an empty recent cache: what a join
reads comes from SQLite). Then ``--readers`` raw sockets each complete the WebSocket handshake,
send a join with ``resume {"#general": 0}`` and never read again. The script samples the
gateway's RSS (psutil) every 20 ms for ``--watch`` seconds and prints idle, peak and peak −
idle. Before history answers were paged by bytes the whole missed history was built as one
``channel/joined`` frame. Numbers: docs/reliability.md#history-pages.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import websockets

from _fanout.servers import reserve_port, wait_listening  # the script's directory is on sys.path

SRC = Path(__file__).resolve().parent.parent / "src"


def _serve(port: int, data: Path) -> subprocess.Popen[bytes]:
    env = dict(os.environ, PYTHONPATH=f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    cmd = [sys.executable, "-m", "hubbub", "serve", "--port", str(port)]
    cmd += ["--data-dir", str(data), "--rate-limit", "0"]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


async def _fill(port: int, n: int, size: int) -> None:
    async with websockets.connect(f"ws://127.0.0.1:{port}/ws", max_size=None) as ws:
        await ws.send(json.dumps({"type": "join", "participantId": "writer"}))
        text = "x" * size
        sent = 0
        while sent < n:
            batch = min(10, n - sent)  # 600 KB in flight: under the 1 MiB send buffer
            for i in range(batch):
                frame = {"kind": "chat", "id": f"m{sent + i}", "payload": {"text": text}}
                await ws.send(json.dumps(frame))
            seen = 0
            while seen < batch:
                if json.loads(await ws.recv()).get("kind") == "chat":
                    seen += 1
            sent += batch


def _frame(payload: bytes) -> bytes:
    """One masked text frame (a client's), with a zero mask."""
    head = bytearray([0x81])
    n = len(payload)
    if n < 126:
        head.append(0x80 | n)
    else:
        head.append(0x80 | 126)
        head += n.to_bytes(2, "big")
    return bytes(head) + b"\0\0\0\0" + payload


def _silent_reader(port: int, pid: str) -> socket.socket:
    """Handshake, send the resume join, then never read again."""
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    key = base64.b64encode(os.urandom(16)).decode()
    s.sendall(
        (
            f"GET /ws HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
        ).encode()
    )
    head = b""
    while b"\r\n\r\n" not in head:
        head += s.recv(1)
    join = {"type": "join", "participantId": pid, "resume": {"#general": 0}}
    s.sendall(_frame(json.dumps(join).encode()))
    return s


def main() -> None:
    """Fill, restart, resume without reading, and print the gateway's RSS."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=10_000)
    ap.add_argument("--size", type=int, default=60_000)
    ap.add_argument("--readers", type=int, default=1)
    ap.add_argument("--watch", type=float, default=10.0)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        port = reserve_port()
        proc = _serve(port, Path(tmp))
        try:
            asyncio.run(wait_listening(port))
            started = time.perf_counter()
            asyncio.run(_fill(port, args.messages, args.size))
            print(
                f"filled {args.messages} x {args.size} B in {time.perf_counter() - started:.0f} s"
            )
        finally:
            proc.terminate()
            proc.wait()
        proc = _serve(port, Path(tmp))
        try:
            asyncio.run(wait_listening(port))
            time.sleep(1.0)
            rss = psutil.Process(proc.pid)
            idle = rss.memory_info().rss
            readers = [_silent_reader(port, f"r{i}") for i in range(args.readers)]
            peak = idle
            end = time.monotonic() + args.watch
            while time.monotonic() < end:
                peak = max(peak, rss.memory_info().rss)
                time.sleep(0.02)
            mib = 1024 * 1024
            print(
                f"readers {args.readers}: idle {idle / mib:.0f} MiB, peak {peak / mib:.0f} MiB, "
                f"peak - idle {(peak - idle) / mib:.1f} MiB"
            )
            for r in readers:
                r.close()
        finally:
            proc.terminate()
            proc.wait()


if __name__ == "__main__":
    main()
