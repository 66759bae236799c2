"""CPU per delivery of the gateway's message pipeline, in process, without sockets.

Usage::

    .venv/bin/python benchmarks/pipeline_cpu.py [--against OTHER_CHECKOUT] [--rounds 3]
        [--k 100] [--dialect mew|agentchat]

A gateway (``hubbub.server.app.make_router``, SQLite in a temporary directory, no rate limit)
gets K receivers in ``#general`` whose connections write to a transport that only counts
bytes, and one sender whose chat frames go through ``receive`` exactly as the WebSocket hands
them over: admission, sequencing, the group commit, fan-out. All of them speak ``--dialect``
(MEW, or agentchat's ``MSG`` frames, decoded and encoded by that codec). What is measured is
this process's CPU time (``time.process_time``) per message and per delivery while N messages are
routed in batches of 50 (each batch awaited until durable), so other load on the machine
slows the run down but hardly changes the figures.

``--against DIR`` measures another checkout's ``src`` (say, main before a change) in the same
invocation, the two interleaved round by round, each in its own subprocess.
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
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


class _Transport(asyncio.Transport):
    """Counts what a connection writes."""

    def __init__(self) -> None:
        super().__init__()
        self.written = 0

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.written += len(data)

    def is_closing(self) -> bool:
        return False

    def get_write_buffer_size(self) -> int:
        return 0

    def close(self) -> None:
        pass

    def abort(self) -> None:
        pass


def _frame(dialect: str, i: int) -> bytes:
    text = f"message {i} " + "x" * 60
    if dialect == "agentchat":
        return json.dumps({"type": "MSG", "to": "#general", "content": text}).encode()
    return json.dumps({"kind": "chat", "payload": {"text": text}}).encode()


async def _measure(k: int, n: int, batch: int, dialect_name: str = "mew") -> dict[str, float]:
    from hubbub.protocol.agentchat import AgentchatDialect
    from hubbub.protocol.hello import Hello
    from hubbub.protocol.mew import MewDialect
    from hubbub.server.app import make_router
    from hubbub.server.config import Limits

    try:
        from hubbub.server.state.connection import SocketConnection as Connection
    except ImportError:  # before ports (state/port.py), or before server/ had parts
        try:
            from hubbub.server.state.connection import Connection  # type: ignore[assignment]
        except ImportError:
            from hubbub.server.connection import Connection  # type: ignore[no-redef]

    with tempfile.TemporaryDirectory() as data:
        gw: Any = make_router(None, data_dir=data, limits=Limits(rate_per_s=0))
        await gw.start()
        dialect = AgentchatDialect() if dialect_name == "agentchat" else MewDialect()
        sessions = []
        for i in range(k + 1):
            hello = Hello(participant_id=f"p{i}", channels=["#general"])
            conn = Connection(_Transport(), dialect, 1 << 30, lambda c: None, f"p{i}")
            sessions.append(await gw.attach(gw.authenticate(hello), conn, hello))
        await gw.durable()
        await asyncio.sleep(0.05)  # presence flushes
        sender = sessions[0]
        frames = [_frame(dialect_name, i) for i in range(n)]
        t0, c0 = time.perf_counter(), time.process_time()
        for start in range(0, n, batch):
            for frame in frames[start : start + batch]:
                gw.receive(sender, frame)
            await gw.durable()
            await asyncio.sleep(0)  # the connections' end-of-turn writes
        cpu, wall = time.process_time() - c0, time.perf_counter() - t0
        await gw.stop()
    return {
        "cpu_us_per_message": cpu / n * 1e6,
        "cpu_us_per_delivery": cpu / (n * (k + 1)) * 1e6,
        "messages_per_cpu_s": n / cpu,
        "wall_s": wall,
    }


def _child(args: argparse.Namespace) -> None:
    print(json.dumps(asyncio.run(_measure(args.k, args.n, args.batch, args.dialect))))


def _run(src: Path, args: argparse.Namespace) -> dict[str, float]:
    env = dict(os.environ, PYTHONPATH=str(src))
    argv = [sys.executable, __file__, "--child", f"--k={args.k}", f"--n={args.n}"]
    argv += [f"--batch={args.batch}", f"--dialect={args.dialect}"]
    out = subprocess.run(argv, env=env, capture_output=True)
    if out.returncode != 0:
        raise SystemExit(out.stderr.decode())
    result: dict[str, float] = json.loads(out.stdout.decode().strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", type=Path, help="another checkout, measured interleaved")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--k", type=int, default=100, help="receivers in #general")
    parser.add_argument("--n", type=int, default=5000, help="messages per run")
    parser.add_argument("--batch", type=int, default=50)
    parser.add_argument("--dialect", choices=("mew", "agentchat"), default="mew")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args)
        return
    trees = {"this": HERE.parent / "src"}
    if args.against is not None:
        trees["against"] = args.against.resolve() / "src"
    results: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
    for r in range(args.rounds):
        for name, src in trees.items():
            got = _run(src, args)
            results[name].append(got)
            print(
                f"round {r + 1} {name:8} {got['cpu_us_per_message']:7.1f} µs CPU/message "
                f"{got['cpu_us_per_delivery']:6.3f} µs CPU/delivery  ({got['wall_s']:.1f} s)"
            )
    for name, runs in results.items():
        per = statistics.median(x["cpu_us_per_delivery"] for x in runs)
        msg = statistics.median(x["cpu_us_per_message"] for x in runs)
        print(
            f"median {name:8} {msg:7.1f} µs CPU/message {per:6.3f} µs CPU/delivery "
            f"(K={args.k}, {args.dialect})"
        )


if __name__ == "__main__":
    main()
