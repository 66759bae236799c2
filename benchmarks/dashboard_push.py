"""Bytes a dashboard receives while many large proposals are pending (issue 21).

Usage::

    .venv/bin/python benchmarks/dashboard_push.py [--proposals 1000] [--size 7800] [--pushes 20]

A real ``python -m hubbub serve`` (open mode, memory store, rate limit off, the pending-proposal
caps raised to ``--proposals``) gets ``--proposals`` ``mcp/proposal``\\ s whose arguments hold
``--size`` characters, all pending. A dashboard stream (``GET /dashboard/events``) is opened;
the script prints the bytes of its snapshot and of the new-proposal events, then connects and
disconnects a participant ``--pushes`` times (each a presence change, so a ``state`` push) and
prints the bytes per ``state`` event. Before the board was taken out of state pushes every push
carried every pending proposal with its payload. To measure another version, put its ``src``
first with ``--src``. Numbers: docs/reliability.md#proposals-on-the-dashboard.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import aiohttp
import websockets

from _fanout.servers import reserve_port, wait_listening  # the script's directory is on sys.path

SRC = Path(__file__).resolve().parent.parent / "src"


class _Events:
    """Server-sent events of one response, read in chunks (an event may be megabytes)."""

    def __init__(self, resp: aiohttp.ClientResponse) -> None:
        self.resp = resp
        self.buf = b""

    async def next(self) -> tuple[str, int, dict[str, object]]:
        """The next event: its name, its size in bytes and its data."""
        while True:
            end = self.buf.find(b"\n\n")
            if end < 0:
                chunk = await self.resp.content.readany()
                if not chunk:
                    raise EOFError("the event stream ended")
                self.buf += chunk
                continue
            raw, self.buf = self.buf[:end], self.buf[end + 2 :]
            name, data = "message", []
            for line in raw.decode().split("\n"):
                key, _, value = line.partition(":")
                if key == "event":
                    name = value.strip()
                elif key == "data":
                    data.append(value.removeprefix(" "))
            if data:
                return name, len(raw) + 2, json.loads("\n".join(data))


async def run(port: int, n: int, size: int, pushes: int) -> None:
    """Fill, watch and print."""
    url = f"ws://127.0.0.1:{port}/ws"
    call = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "echo", "arguments": {"text": "x" * size}},
    }
    async with websockets.connect(url, max_size=None) as calc:
        await calc.send(json.dumps({"type": "join", "participantId": "calc"}))
        async with websockets.connect(url, max_size=None) as agent:
            await agent.send(json.dumps({"type": "join", "participantId": "agent"}))
            for i in range(n):
                frame = {"kind": "mcp/proposal", "id": f"p{i}", "to": ["calc"], "payload": call}
                await agent.send(json.dumps(frame))
            seen = 0
            while seen < n:
                got = json.loads(await agent.recv())
                if got.get("kind") == "mcp/proposal":
                    seen += 1
                elif got.get("kind") == "system/error":
                    raise RuntimeError(got["payload"])
            timeout = aiohttp.ClientTimeout(total=None, sock_read=None)
            async with (
                aiohttp.ClientSession(timeout=timeout) as http,
                http.get(f"http://127.0.0.1:{port}/dashboard/events") as resp,
            ):
                events = _Events(resp)
                name, snap, _ = await events.next()
                assert name == "snapshot"
                await agent.send(
                    json.dumps({"kind": "mcp/proposal", "to": ["calc"], "payload": call})
                )
                while True:
                    name, one, data = await events.next()
                    if name == "activity" and data.get("event") == "proposal":
                        break
                states: list[int] = []
                for i in range(pushes):
                    async with websockets.connect(url) as extra:
                        await extra.send(json.dumps({"type": "join", "participantId": f"x{i}"}))
                        while True:
                            name, b, _ = await events.next()
                            if name == "state":
                                states.append(b)
                                break
    kib = 1024
    print(f"{n} pending proposals of {size} characters:")
    print(f"  snapshot          {snap / kib:10.1f} KiB")
    print(f"  a new proposal    {one / kib:10.1f} KiB (its activity event)")
    print(f"  a state push      {statistics.median(states) / kib:10.1f} KiB (median of {pushes})")


def main() -> None:
    """Start the gateway, measure, stop it."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--proposals", type=int, default=1000)
    ap.add_argument("--size", type=int, default=7800)
    ap.add_argument("--pushes", type=int, default=20)
    ap.add_argument("--src", type=Path, default=SRC)
    args = ap.parse_args()
    port = reserve_port()
    env = dict(
        os.environ,
        PYTHONPATH=f"{args.src}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
        HUBBUB_MAX_PENDING_PROPOSALS=str(args.proposals + 1),
        HUBBUB_MAX_PENDING_PROPOSALS_PER_PARTICIPANT=str(args.proposals + 1),
    )
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "hubbub", "serve", "--port", str(port), "--store", "memory"]
        cmd += ["--data-dir", tmp, "--rate-limit", "0"]
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            asyncio.run(wait_listening(port))
            asyncio.run(run(port, args.proposals, args.size, args.pushes))
        finally:
            proc.terminate()
            proc.wait()


if __name__ == "__main__":
    main()
