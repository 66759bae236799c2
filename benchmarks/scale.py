"""Scale benchmark: the gateway on many cores, driven by many load-generator processes.

Usage::

    .venv/bin/python benchmarks/scale.py [--quick] [--cluster] [--workers N] [--spaces S]
        [--k K] [--receivers P] [--senders Q] [--json out.json]

One server under test — ``hubbub serve`` (SQLite, one process) or, with ``--cluster``,
``hubbub serve --cluster --workers N`` on a fresh ``redis-server`` (AOF ``everysec``, no RDB),
the workers sharing the port by ``SO_REUSEPORT`` — serving ``S`` open spaces ``s0 … s{S-1}``.
``P`` receiver processes hold ``K`` receivers in ``#general`` of every space (``K / P`` each,
spread over the workers by the kernel), and ``Q`` sender processes hold ``--flooders``
flooding senders per space (each keeps ``--inflight`` messages unacknowledged; its own echo
acknowledges). The clients are ``_fanout``'s raw WebSocket clients (MEW dialect), which only
count marked frames, so one generator process carries several hundred thousand deliveries/s.

Reported for the measured window (after ``--warmup``): deliveries/s (frames the receivers
got), msgs/s (acknowledged sends), and the CPU (cores: CPU seconds / wall seconds) of every
process — each server process (its node name, and the spaces it leads), the busiest leader,
Redis, each generator — and the machine's idle cores. A generator at or above 0.9 core is
flagged **saturated**: the load generator, not the server, may be what was measured (add
``--receivers`` or ``--senders``). In cluster mode the run starts once every space has a
leader and the leads are spread (⌊S/W⌋ or ⌈S/W⌉ per worker).

Runnable on a 2-core machine (``--quick``: K = 100, 2 receiver and 1 sender processes, short
windows) and as is on a big one; ``benchmarks/scale_device.sh`` runs the table of
docs/performance.md ("Scale") with carried wheels and ``redis-server``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import psutil

from _fanout.dialects import MARKER, join  # the script's directory is on sys.path
from _fanout.rawws import Tally, WSClient, connect
from _fanout.scenarios import FloodSender
from _fanout.servers import HOST, REPO, ServerProc, log, raise_nofile_limit, run_benchmark

sys.path.insert(0, str(REPO))
from tests.cluster.redis_server import RedisServer  # one place for redis-server

REDIS_ARGS = ("--save", "", "--appendonly", "yes", "--appendfsync", "everysec")
SATURATED_CORES = 0.9
"""A generator process at or above this many cores may be the limit of the run."""
CONNECT_CONCURRENCY = 64
SCRIPT = Path(__file__).resolve()


# -- the load-generator processes -----------------------------------------------------------


async def _stdin_lines() -> asyncio.StreamReader:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    return reader


def _say(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


async def generator(
    role: str, port: int, spaces: list[str], count: int, name: str, inflight: int
) -> None:
    """A receiver or sender process: join ``count`` clients per space, then obey stdin
    (``go``: senders start; ``mark``: print the counters; ``stop``: close and exit)."""
    raise_nofile_limit()
    tally = Tally()
    sem = asyncio.Semaphore(CONNECT_CONCURRENCY)

    async def one(space: str, who: str) -> WSClient:
        async with sem:
            client = await connect(
                HOST, port, "/ws", tally if role == "receiver" else Tally(), MARKER
            )
            await join(client, "mew", who, space=space)
            return client

    plan = [(sp, f"{name}-{sp}-{i}") for sp in spaces for i in range(count)]
    try:
        clients = await asyncio.gather(*(one(sp, who) for sp, who in plan))
    except Exception as exc:
        _say({"error": f"{name}: {exc!r}"})
        return
    senders = []
    if role == "sender":
        senders = [
            FloodSender(c, "mew", who, inflight) for c, (_, who) in zip(clients, plan, strict=True)
        ]
    _say({"ready": len(clients)})
    lines = await _stdin_lines()
    while command := (await lines.readline()).decode().strip():
        if command == "go":
            for s in senders:
                s.start()
        elif command == "mark":
            _say(
                {
                    "delivered": tally.delivered,
                    "acked": sum(s.acked for s in senders),
                    "errors": sum(s.errors for s in senders),
                    "first_error": next((s.first_error for s in senders if s.first_error), ""),
                    "closed": tally.closed + sum(s.echoes.closed for s in senders),
                }
            )
        elif command == "stop":
            break
    for s in senders:
        s.running = False
    for c in clients:
        c.close()


@dataclass
class Generator:
    """One load-generator process, driven over its stdin/stdout."""

    name: str
    proc: asyncio.subprocess.Process
    ps: psutil.Process

    @classmethod
    async def start(
        cls, role: str, port: int, spaces: list[str], count: int, name: str, inflight: int
    ) -> Generator:
        argv = [sys.executable, str(SCRIPT), "--role", role, "--port", str(port)]
        argv += ["--role-spaces", ",".join(spaces), "--count", str(count), "--name", name]
        argv += ["--inflight", str(inflight)]
        proc = await asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE
        )
        return cls(name, proc, psutil.Process(proc.pid))

    async def answer(self, timeout: float) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = await asyncio.wait_for(self.proc.stdout.readline(), timeout)
        if not line:
            raise RuntimeError(f"generator {self.name} exited (status {await self.proc.wait()})")
        out: dict[str, Any] = json.loads(line)
        if "error" in out:
            raise RuntimeError(out["error"])
        return out

    def tell(self, command: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(command.encode() + b"\n")

    async def stop(self) -> None:
        with contextlib.suppress(Exception):
            self.tell("stop")
        try:
            await asyncio.wait_for(self.proc.wait(), 10)
        except TimeoutError:
            self.proc.kill()
            await self.proc.wait()


# -- the server and the meters ---------------------------------------------------------------


@dataclass
class Point:
    """One configuration measured."""

    label: str
    cluster: bool
    workers: int
    spaces: int
    k: int
    receivers: int
    senders: int
    flooders: int
    inflight: int
    warmup_s: float
    window_s: float


@dataclass
class Result:
    point: Point
    deliveries_per_s: float
    msgs_per_s: float
    delivered_fraction: float
    cores: dict[str, float]
    """Cores of each process: ``server:<node>``, ``redis``, ``gen:<name>``, ``idle``."""
    leads: dict[str, list[str]]
    """The spaces each server process led during the window."""
    busiest_leader: str
    saturated: list[str]
    disconnects: int
    sender_errors: int
    first_error: str = ""
    machine: dict[str, Any] = field(default_factory=dict)


def _cpu(p: psutil.Process) -> float:
    try:
        t = p.cpu_times()
        return float(t.user + t.system)
    except psutil.Error:
        return 0.0


def _idle() -> float:
    t = psutil.cpu_times()
    return float(t.idle + getattr(t, "iowait", 0.0))


async def _health(port: int) -> dict[str, Any]:
    reader, writer = await asyncio.open_connection(HOST, port)
    writer.write(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
    data = await reader.read()
    writer.close()
    out: dict[str, Any] = json.loads(data.partition(b"\r\n\r\n")[2])
    return out


async def settle(port: int, point: Point, timeout: float = 60.0) -> dict[str, Any]:
    """Wait until every space is led and the leads are spread (cluster); the last health."""
    deadline = time.monotonic() + timeout
    last: dict[str, Any] = {}
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError, ValueError):
            last = await _health(port)
            cluster = last.get("cluster")
            if cluster is None:
                return last
            nodes = cluster["nodes"]
            leaders = cluster["leaders"]
            counts = [len(n["leads"]) for n in nodes]
            low, high = point.spaces // point.workers, -(-point.spaces // point.workers)
            if (
                len(nodes) == point.workers
                and all(leaders.values())
                and sum(counts) == point.spaces
                and all(low <= c <= high for c in counts)
            ):
                return last
        await asyncio.sleep(0.2)
    raise RuntimeError(f"the cluster did not settle within {timeout:.0f} s: {last}")


def server_processes(
    server: ServerProc, health: dict[str, Any]
) -> tuple[dict[str, psutil.Process], dict[str, list[str]]]:
    """The server's processes by name (a worker by its node name), and what each leads."""
    assert server.ps is not None
    cluster = health.get("cluster")
    if cluster is None:
        return {"server": server.ps}, {}
    by_pid = {n["pid"]: n for n in cluster["nodes"]}
    procs: dict[str, psutil.Process] = {}
    leads: dict[str, list[str]] = {}
    for p in [server.ps, *server.ps.children(recursive=True)]:
        node = by_pid.get(p.pid)
        name = f"server:{node['node']}" if node else "server:supervisor"
        procs[name] = p
        leads[name] = list(node["leads"]) if node else []
    return procs, leads


async def measure(point: Point) -> Result:
    """Start the server (and Redis), the generators; measure one window; stop them all."""
    tmp = Path(tempfile.mkdtemp(prefix="hubbub-scale-"))
    spaces = [f"s{i}" for i in range(point.spaces)]
    extra: list[str] = []
    for sid in spaces:
        (tmp / f"{sid}.yaml").write_text(f"space: {sid}\nopen: true\n")
        extra += ["--space-config", str(tmp / f"{sid}.yaml")]
    redis: RedisServer | None = None
    generators: list[Generator] = []
    if point.cluster:
        redis = RedisServer(tmp / "redis", REDIS_ARGS)
        redis.start()
    server = ServerProc.hubbub(
        cluster=redis.url if redis else None,
        node="w" if redis else "",
        workers=point.workers if redis else 1,
        extra=extra,
    )
    try:
        await server.start()
        health = await settle(server.port, point)
        log(f"  {point.label}: server up, {len(spaces)} space(s)")
        for i in range(point.receivers):
            share = point.k // point.receivers + (i < point.k % point.receivers)
            if share:
                generators.append(
                    await Generator.start("receiver", server.port, spaces, share, f"r{i}", 0)
                )
        for j in range(point.senders):
            share = point.flooders // point.senders + (j < point.flooders % point.senders)
            if share:
                generators.append(
                    await Generator.start(
                        "sender", server.port, spaces, share, f"s{j}", point.inflight
                    )
                )
        for g in generators:
            await g.answer(300)
        health = await settle(server.port, point)  # leads may not move under load
        procs, leads = server_processes(server, health)
        if redis is not None and redis.process is not None:
            procs["redis"] = psutil.Process(redis.process.pid)
        for g in generators:
            procs[f"gen:{g.name}"] = g.ps
        await asyncio.sleep(0.3)
        for g in generators:
            g.tell("go")
        await asyncio.sleep(point.warmup_s)
        marks0, cpu0, idle0, t0 = await _mark(generators, procs)
        await asyncio.sleep(point.window_s)
        marks1, cpu1, idle1, t1 = await _mark(generators, procs)
        if not server.alive():
            raise RuntimeError(f"the server exited:\n{server.log_tail()}")
    finally:
        for g in generators:
            await g.stop()
        server.stop()
        if redis is not None:
            redis.stop()
    wall = t1 - t0
    delivered = sum(m["delivered"] for m in marks1) - sum(m["delivered"] for m in marks0)
    acked = sum(m["acked"] for m in marks1) - sum(m["acked"] for m in marks0)
    cores = {name: (cpu1[name] - cpu0[name]) / wall for name in procs}
    cores["idle"] = (idle1 - idle0) / wall
    leaders = {name: cores[name] for name, led in leads.items() if led}
    busiest = max(leaders, key=lambda n: leaders[n]) if leaders else "server"
    msgs = acked / wall
    return Result(
        point=point,
        deliveries_per_s=delivered / wall,
        msgs_per_s=msgs,
        delivered_fraction=(delivered / wall) / (msgs * point.k) if msgs else 0.0,
        cores=cores,
        leads=leads,
        busiest_leader=busiest,
        saturated=[n for n, c in cores.items() if n.startswith("gen:") and c >= SATURATED_CORES],
        disconnects=sum(m["closed"] for m in marks1) - sum(m["closed"] for m in marks0),
        sender_errors=sum(m["errors"] for m in marks1),
        first_error=next((m["first_error"] for m in marks1 if m["first_error"]), ""),
        machine={"cpus": os.cpu_count(), "loadavg": os.getloadavg()},
    )


async def _mark(
    generators: list[Generator], procs: dict[str, psutil.Process]
) -> tuple[list[dict[str, Any]], dict[str, float], float, float]:
    for g in generators:
        g.tell("mark")
    t = time.monotonic()
    cpu = {name: _cpu(p) for name, p in procs.items()}
    idle = _idle()
    marks = [await g.answer(30) for g in generators]
    return marks, cpu, idle, t


# -- report ----------------------------------------------------------------------------------


def render(r: Result) -> str:
    p, c = r.point, r.cores
    server = {n: v for n, v in c.items() if n.startswith("server")}
    gens = {n: v for n, v in c.items() if n.startswith("gen:")}
    lines = [
        f"{p.label}: {r.deliveries_per_s / 1e6:.3f} M deliveries/s, {r.msgs_per_s:,.0f} msgs/s "
        f"({p.spaces} space(s) x K={p.k}; delivered {r.delivered_fraction:.3f} of msgs x K)",
        f"  server {sum(server.values()):.2f} cores: "
        + ", ".join(
            f"{n.removeprefix('server:')} {v:.2f}"
            + (f" [leads {','.join(r.leads[n])}]" if r.leads.get(n) else "")
            for n, v in sorted(server.items())
        ),
        f"  busiest leader {r.busiest_leader.removeprefix('server:')} "
        f"{c.get(r.busiest_leader, 0):.2f} core; redis {c.get('redis', 0):.2f} core; "
        f"generators {sum(gens.values()):.2f} cores (max {max(gens.values(), default=0):.2f}); "
        f"idle {c['idle']:.2f} of {r.machine['cpus']} cores",
    ]
    if r.saturated:
        lines.append(
            f"  SATURATED generator(s): {', '.join(r.saturated)} at >= {SATURATED_CORES} core: "
            "the load generator may be the limit (add --receivers/--senders)"
        )
    if r.disconnects or r.sender_errors:
        lines.append(
            f"  disconnects {r.disconnects}, sender errors {r.sender_errors} {r.first_error[:160]}"
        )
    return "\n".join(lines)


def to_json(r: Result) -> dict[str, Any]:
    out = asdict(r)
    out["distinct_leaders"] = sum(1 for led in r.leads.values() if led)
    return out


def table(folder: Path) -> str:
    """The points measured into ``folder`` (their JSON files) as one markdown table."""
    rows = [
        "| point | deliveries/s | msgs/s | server cores | busiest leader | Redis | "
        "generators (max one) | idle | leaders | note |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for path in sorted(folder.glob("*.json"), key=lambda p: p.stat().st_mtime):
        r = json.loads(path.read_text()).get("result")
        if r is None:
            continue
        c = r["cores"]
        server = sum(v for n, v in c.items() if n.startswith("server"))
        gens = [v for n, v in c.items() if n.startswith("gen:")]
        note = "generator saturated" if r["saturated"] else ""
        rows.append(
            f"| {r['point']['label']} | {r['deliveries_per_s'] / 1e6:.2f} M | "
            f"{r['msgs_per_s']:,.0f} | {server:.2f} | {c.get(r['busiest_leader'], 0):.2f} | "
            f"{c.get('redis', 0):.2f} | {sum(gens):.2f} ({max(gens, default=0):.2f}) | "
            f"{c['idle']:.2f} / {r['machine']['cpus']} | {r['distinct_leaders']} | {note} |"
        )
    return "\n".join(rows)


# -- command line ----------------------------------------------------------------------------


async def run(point: Point) -> dict[str, Any]:
    raise_nofile_limit()
    log(f"scale: {point}")
    result = await measure(point)
    print(render(result), flush=True)
    return {
        "meta": {"python": platform.python_version(), "platform": platform.platform()},
        "result": to_json(result),
    }


def parse_args(argv: list[str] | None) -> tuple[Point, str | None, argparse.Namespace]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="small and short (a 2-core machine)")
    p.add_argument("--cluster", action="store_true", help="--cluster on a fresh redis-server")
    p.add_argument("--workers", type=int, default=1, help="with --cluster: worker processes")
    p.add_argument("--spaces", type=int, default=1, help="spaces s0..s{S-1} (default 1)")
    p.add_argument("--k", type=int, help="receivers per space (default 1000, 100 with --quick)")
    p.add_argument("--receivers", type=int, help="receiver processes (default 6, 2 --quick)")
    p.add_argument("--senders", type=int, help="sender processes (default 2, 1 --quick)")
    p.add_argument("--flooders", type=int, default=3, help="flooding senders per space (3)")
    p.add_argument("--inflight", type=int, default=16, help="messages in flight per sender")
    p.add_argument("--warmup", type=float, help="seconds of load before the window (3; 1)")
    p.add_argument("--window", type=float, help="seconds measured (5; 2 with --quick)")
    p.add_argument("--label", help="the point's name in the report")
    p.add_argument("--json", metavar="PATH", help="also write every number to PATH")
    p.add_argument("--table", metavar="DIR", help="print the JSON results in DIR as a table")
    # a generator process (started by the benchmark itself)
    p.add_argument("--role", choices=("receiver", "sender"), help=argparse.SUPPRESS)
    p.add_argument("--port", type=int, help=argparse.SUPPRESS)
    p.add_argument("--role-spaces", help=argparse.SUPPRESS)
    p.add_argument("--count", type=int, help=argparse.SUPPRESS)
    p.add_argument("--name", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    quick = a.quick
    mode = f"cluster --workers {a.workers}" if a.cluster else "single"
    point = Point(
        label=a.label or f"{mode}, {a.spaces} space(s)",
        cluster=a.cluster,
        workers=a.workers if a.cluster else 1,
        spaces=a.spaces,
        k=a.k or (100 if quick else 1000),
        receivers=a.receivers or (2 if quick else 6),
        senders=a.senders or (1 if quick else 2),
        flooders=a.flooders,
        inflight=a.inflight,
        warmup_s=a.warmup if a.warmup is not None else (1.0 if quick else 3.0),
        window_s=a.window or (2.0 if quick else 5.0),
    )
    return point, a.json, a


def main(argv: list[str] | None = None) -> int:
    point, json_path, a = parse_args(argv)
    if a.table:
        print(table(Path(a.table)))
        return 0
    if a.role:
        spaces = a.role_spaces.split(",")
        asyncio.run(generator(a.role, a.port, spaces, a.count, a.name, a.inflight))
        return 0
    return run_benchmark(run, point, json_path)


if __name__ == "__main__":
    sys.exit(main())
