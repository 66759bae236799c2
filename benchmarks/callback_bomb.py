"""Callbacks as a disk and memory bomb (issue 21 item 10): what a flood of HTTP posts, each
from a throw-away id with 50 ``@@cb:3600s@@`` markers, leaves in a gateway.

Usage::

    .venv/bin/python benchmarks/callback_bomb.py [--posts 10000] [--concurrency 32]
        [--grace-s 30] [--extra-serve-args "--rate-limit 0"] [--plain]

Starts ``python -m hubbub serve`` (open mode, SQLite in a temporary folder, this checkout's
``src`` first on the path), posts from one client as fast as it answers, then prints: posts
answered 202 and refused (by status), callbacks scheduled (markers minus the refusals listed
in the 202 answers), the gateway's pending callbacks (``GET /participants`` sums), its RSS
(``/proc/PID/status``) before and after, and the size of the SQLite files; then, after the
callback grace window (``AGENTCHAT_CB_GRACE_S``, shortened by ``--grace-s``), the same again.
``--plain`` posts ``hi`` instead (the rate limits against throw-away ids: posts/s accepted).
Numbers: docs/reliability.md#callbacks-and-rate-limits-against-throw-away-ids.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shlex
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import aiohttp

SRC = Path(__file__).resolve().parent.parent / "src"
sys.path.insert(0, str(SRC.parent))  # tests.ports: one place for test servers' ports
from tests.ports import reserve_port  # noqa: E402

BOMB = "x " + "@@cb:3600s@@p" * 50


def rss_mib(pid: int) -> float:
    """The resident set of process ``pid`` in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def disk_mb(folder: Path) -> float:
    """The size of the SQLite files in ``folder`` in MB."""
    return sum(p.stat().st_size for p in folder.glob("hubbub.db*")) / 1e6


async def pending(http: aiohttp.ClientSession, base: str) -> int:
    """Pending callbacks of the open space, summed over its participants."""
    async with http.get(f"{base}/participants") as resp:
        body: Any = await resp.json()
    people = body["participants"] if isinstance(body, dict) else body
    return sum(int(p.get("pending_callbacks", 0)) for p in people)


async def flood(
    base: str, posts: int, concurrency: int, text: str
) -> tuple[Counter[int], int, float]:
    """Post ``posts`` texts from throw-away ids; the statuses, callbacks scheduled, seconds."""
    statuses: Counter[int] = Counter()
    scheduled = 0
    ids = iter(range(posts))
    body = {"kind": "chat", "channel": "#general", "payload": {"text": text}}
    markers = text.count("@@cb:")

    async def worker(http: aiohttp.ClientSession) -> None:
        nonlocal scheduled
        for n in ids:
            async with http.post(f"{base}/participants/tmp{n}/messages", json=body) as resp:
                statuses[resp.status] += 1
                if resp.status == 202:
                    answer = await resp.json()
                    scheduled += markers - len(answer.get("errors", []))
                else:
                    await resp.read()

    start = time.perf_counter()
    conn = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=conn) as http:
        await asyncio.gather(*(worker(http) for _ in range(concurrency)))
    return statuses, scheduled, time.perf_counter() - start


async def main(args: argparse.Namespace) -> None:
    """Run the flood against a fresh gateway and print what it left."""
    folder = Path(tempfile.mkdtemp(prefix="cb-bomb-"))
    port = reserve_port()
    env = {**os.environ, "PYTHONPATH": f"{SRC}:{os.environ.get('PYTHONPATH', '')}"}
    env["AGENTCHAT_CB_GRACE_S"] = str(args.grace_s)
    cmd = [sys.executable, "-m", "hubbub", "serve", "--port", str(port), "--data-dir", str(folder)]
    cmd += shlex.split(args.extra_serve_args)
    log = (folder / "serve.log").open("wb")
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=log)
    base = f"http://127.0.0.1:{port}"
    try:
        async with aiohttp.ClientSession() as http:
            for _ in range(600):
                try:
                    async with http.get(f"{base}/health") as resp:
                        if resp.status == 200:
                            break
                except aiohttp.ClientError:
                    await asyncio.sleep(0.05)
            before = rss_mib(proc.pid)
            text = "hi" if args.plain else BOMB
            statuses, scheduled, seconds = await flood(base, args.posts, args.concurrency, text)
            print(f"serve {' '.join(cmd[4:])}")
            print(f"{args.posts} posts in {seconds:.1f} s: statuses {dict(statuses)}")
            print(f"accepted: {statuses[202] / seconds:.0f} posts/s")
            print(f"callbacks scheduled: {scheduled}; pending: {await pending(http, base)}")
            rss = rss_mib(proc.pid)
            print(f"RSS {before:.0f} MiB -> {rss:.0f} MiB; disk {disk_mb(folder):.1f} MB")
            await asyncio.sleep(args.grace_s + 2)  # the grace window, on the real clock
            print(
                f"after the {args.grace_s} s grace window: pending {await pending(http, base)}, "
                f"RSS {rss_mib(proc.pid):.0f} MiB, disk {disk_mb(folder):.1f} MB"
            )
    finally:
        proc.terminate()
        proc.wait(10)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--posts", type=int, default=10_000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--grace-s", type=float, default=30)
    parser.add_argument("--extra-serve-args", default="")
    parser.add_argument("--plain", action="store_true", help="post 'hi' (no markers)")
    asyncio.run(main(parser.parse_args()))
