"""MEW stream frames vs chat messages through the gateway (issue 24 item 9).

Usage::

    .venv/bin/python benchmarks/streams.py [--receivers 10] [--frames 20000] [--bytes 100]

One ``hubbub serve`` subprocess (SQLite, rate limit off), raw MEW WebSocket clients in this
process: a writer and ``--receivers`` listeners. The writer opens a stream
(``stream/request`` → ``stream/open``) and sends ``--frames`` raw ``#<stream_id>#<data>``
frames of ``--bytes`` bytes of data, as fast as its socket takes them; then the same number of
``chat`` envelopes with the same text. Measured for each: the time until every listener has
them all (delivered/s over all listeners) and the gateway's CPU seconds per 1,000 sent.
A frame is relayed without being stored; a chat is numbered, stored (group commit) and fanned
out, so the gap is what a stream saves per token of, say, an agent's reasoning.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import sys
import time
from pathlib import Path
from typing import Any

import websockets

from _fanout.servers import ServerProc  # the script's directory is on sys.path


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


async def join(port: int, pid: str) -> Any:
    ws = await websockets.connect(f"ws://127.0.0.1:{port}/ws", max_size=None, compression=None)
    await ws.send(json.dumps({"type": "join", "participantId": pid, "space": "default"}))
    while json.loads(await ws.recv()).get("kind") != "system/welcome":
        pass
    return ws


async def count(ws: Any, n: int, is_item: Any) -> None:
    """Read until ``n`` items arrived."""
    got = 0
    while got < n:
        if is_item(await ws.recv()):
            got += 1


async def run(server: ServerProc, frames: int, receivers: int, size: int) -> dict[str, Any]:
    writer = await join(server.port, "writer")
    listeners = [await join(server.port, f"listener-{i}") for i in range(receivers)]
    await writer.send(json.dumps({"kind": "stream/request", "payload": {"direction": "upload"}}))
    while True:
        env = json.loads(await writer.recv())
        if env.get("kind") == "stream/open":
            sid = env["payload"]["stream_id"]
            break
    data = "x" * size
    out: dict[str, Any] = {}
    for what in ("stream frames", "chat messages"):
        if what == "stream frames":
            item = f"#{sid}#{data}"

            def is_item(raw: str | bytes) -> bool:
                return isinstance(raw, str) and raw.startswith("#")
        else:
            item = json.dumps({"kind": "chat", "payload": {"text": data}})

            def is_item(raw: str | bytes) -> bool:
                return '"kind":"chat"' in str(raw)

        waits = [asyncio.create_task(count(ws, frames, is_item)) for ws in [writer, *listeners]]
        cpu0, t0 = server.cpu_seconds(), time.perf_counter()
        for _ in range(frames):
            await writer.send(item)
        await asyncio.wait_for(asyncio.gather(*waits), 300)
        elapsed, cpu = time.perf_counter() - t0, server.cpu_seconds() - cpu0
        delivered = frames * (receivers + 1)
        out[what] = {
            "seconds": round(elapsed, 3),
            "sent_per_s": round(frames / elapsed),
            "delivered_per_s": round(delivered / elapsed),
            "gateway_cpu_s_per_1000_sent": round(cpu / frames * 1000, 4),
        }
        log(f"{what}: {out[what]}")
    for ws in [writer, *listeners]:
        await ws.close()
    return out


async def measure(frames: int, receivers: int, size: int) -> dict[str, Any]:
    server = ServerProc.hubbub()
    await server.start()
    try:
        return await run(server, frames, receivers, size)
    finally:
        server.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--receivers", type=int, default=10)
    ap.add_argument("--frames", type=int, default=20000)
    ap.add_argument("--bytes", type=int, default=100)
    ap.add_argument("--json", help="write the results to this file")
    args = ap.parse_args()
    results = asyncio.run(measure(args.frames, args.receivers, args.bytes))
    report = {
        "machine": f"{platform.machine()} {platform.python_version()}",
        "receivers": args.receivers,
        "frames": args.frames,
        "bytes": args.bytes,
        "results": results,
    }
    print(json.dumps(report, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
