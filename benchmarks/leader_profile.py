"""Where a space's leader spends its CPU per message: a cProfile of the leader under load.

Usage::

    .venv/bin/python benchmarks/leader_profile.py [--followers 2] [--k 100] [--seconds 8]

A fresh ``redis-server`` (AOF ``everysec``), one node that leads the space, run under
``cProfile``, and ``--followers`` nodes that follow it; every client (``--k`` receivers and 3
flooding senders with ``--inflight`` messages each, ``scale.py``'s generator processes) is on
the followers, so the leader does only what a leader does: read the links, admit and route,
commit to Redis, and write one copy per follower. Prints the leader's CPU per message
(``--no-profile``: without the profiler; profiled runs are slower, their shares are what
counts) and where its time went (own time of the functions, grouped by module; the
profile covers the whole run, start included, and leaves out the wait in ``epoll``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import pstats
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import psutil

from _fanout.servers import ServerProc, log, raise_nofile_limit, run_benchmark
from scale import REDIS_ARGS, Generator, _health

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.cluster.redis_server import RedisServer  # one place for redis-server

GROUPS = (
    ("Redis commit (store, redis-py, hiredis)", ("store/redis.py", "/redis/", "hiredis")),
    ("node link (wire, leader_link, msgpack)", ("cluster/leader_link.py", "cluster/wire.py")),
    ("admission, routing, sequencing", ("server/router.py", "server/admission.py",
                                        "server/sequencer.py", "server/space.py",
                                        "server/pipeline.py", "server/gateway.py")),
    ("delivery (encode, fan-out)", ("server/delivery.py", "server/connection.py")),
    ("protocol (envelopes, dialects, ids)", ("/protocol/",)),
    ("engines", ("/engines/",)),
    ("aiohttp / websockets I/O", ("/aiohttp/",)),
    ("event loop, sockets", ("asyncio/", "selectors.py", "socket.py")),
)  # fmt: skip


def group_of(filename: str, name: str) -> str:
    if filename == "~":  # a builtin: by what it is
        if "msgspec" in name or "msgpack" in name:
            return "msgspec encode/decode"
        if "socket" in name or "send" in name or "recv" in name or "select" in name:
            return "event loop, sockets"
        return "builtins (other)"
    for label, needles in GROUPS:
        if any(n in filename for n in needles):
            return label
    return "other"


async def run(args: argparse.Namespace) -> dict[str, object]:
    raise_nofile_limit()
    tmp = Path(tempfile.mkdtemp(prefix="hubbub-profile-"))
    prof = tmp / "leader.prof"
    redis = RedisServer(tmp / "redis", REDIS_ARGS)
    redis.start()
    leader = ServerProc.hubbub(cluster=redis.url, node="leader")
    if args.profile:
        leader.argv[1:3] = ["-m", "cProfile", "-o", str(prof), "-m", "hubbub"]
    followers = [
        ServerProc.hubbub(cluster=redis.url, node=f"follower{i}") for i in range(args.followers)
    ]
    gens: list[Generator] = []
    try:
        await leader.start(timeout=60)
        for _ in range(600):  # up to a minute for the lease (polling its /health)
            if (await _health(leader.port))["cluster"]["leads"]:
                break
            await asyncio.sleep(0.1)
        for f in followers:
            await f.start(timeout=60)
        ports = [f.port for f in followers]
        for i, port in enumerate(ports):
            share = args.k // len(ports) + (i < args.k % len(ports))
            gens.append(await Generator.start("receiver", port, ["default"], share, f"r{i}", 0))
        gens.append(await Generator.start("sender", ports[0], ["default"], 3, "s0", args.inflight))
        for g in gens:
            await g.answer(120)
        for g in gens:
            g.tell("go")
        await asyncio.sleep(2)
        assert leader.ps is not None
        ps = psutil.Process(leader.ps.pid)
        c0, t0 = sum(ps.cpu_times()[:2]), time.monotonic()
        for g in gens:
            g.tell("mark")
        a0 = sum([(await g.answer(30))["acked"] for g in gens])
        await asyncio.sleep(args.seconds)
        c1, t1 = sum(ps.cpu_times()[:2]), time.monotonic()
        for g in gens:
            g.tell("mark")
        a1 = sum([(await g.answer(30))["acked"] for g in gens])
    finally:
        for g in gens:
            await g.stop()
        leader.stop(grace=20)  # SIGTERM: the profile is written on the way out
        for f in followers:
            f.stop()
        redis.stop()
    msgs = a1 - a0
    wall = t1 - t0
    out: dict[str, object] = {
        "followers": args.followers,
        "k": args.k,
        "profiled": args.profile,
        "msgs_per_s": msgs / wall,
        "leader_cores": (c1 - c0) / wall,
        "leader_us_per_msg": (c1 - c0) / msgs * 1e6 if msgs else None,
    }
    print(
        f"leader: {msgs / wall:,.0f} msgs/s, {(c1 - c0) / wall:.2f} core, "
        f"{out['leader_us_per_msg'] or 0:.1f} us CPU per message "
        f"({'under cProfile' if args.profile else 'no profiler'}; {args.followers} followers, "
        f"K = {args.k})"
    )
    if args.profile and prof.exists():
        stats = pstats.Stats(str(prof))
        by_group: dict[str, float] = defaultdict(float)
        top: list[tuple[float, str]] = []
        total = 0.0
        for (filename, _line, name), (_cc, _nc, tt, _ct, _callers) in stats.stats.items():  # type: ignore[attr-defined]
            if "poll" in name and "epoll" in name:
                continue  # waiting for I/O: cProfile's clock is the wall clock, this is idle
            by_group[group_of(filename, name)] += tt
            total += tt
            top.append((tt, f"{Path(filename).name}:{name}"))
        print("leader time by where it went (own time, whole run incl. start, idle excluded):")
        for label, tt in sorted(by_group.items(), key=lambda kv: -kv[1]):
            print(f"  {tt / total:6.1%}  {label}")
        print("top functions (own time):")
        for tt, what in sorted(top, reverse=True)[:15]:
            print(f"  {tt / total:6.1%}  {what}")
        out["groups"] = {k: v / total for k, v in by_group.items()}
        out["top"] = [(what, tt / total) for tt, what in sorted(top, reverse=True)[:30]]
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--followers", type=int, default=2)
    p.add_argument("--k", type=int, default=100, help="receivers (on the followers)")
    p.add_argument("--seconds", type=float, default=8.0, help="the measured window")
    p.add_argument("--inflight", type=int, default=64, help="messages in flight per sender")
    p.add_argument("--no-profile", dest="profile", action="store_false", help="CPU only")
    p.add_argument("--json", metavar="PATH")
    a = p.parse_args()
    log(f"leader profile: {json.dumps(vars(a))}")
    return run_benchmark(run, a, a.json)


if __name__ == "__main__":
    sys.exit(main())
