"""Cluster benchmark: what cluster mode costs and carries, and what uvloop would bring.

Usage::

    .venv/bin/python benchmarks/cluster.py [--quick] [--json out.json] [--only cpu,...]

Needs ``redis-server`` on the PATH (Debian's ``redis-server`` package) and the ``cluster`` extra.
Each cluster run starts its own redis-server (``--save "" --appendonly yes --appendfsync
everysec``, temporary directory) and its own gateway processes; the load generator is
``_fanout`` (raw WebSocket clients in this process, MEW dialect). Parts (``--only``):

1. ``cpu``: server CPU µs per delivered message, one ``hubbub serve`` (SQLite) vs two
   ``--cluster`` nodes with receivers and senders spread evenly over them, K = 100 and 1000,
   the same flood (3 senders, 16 messages in flight each); CPU summed over every gateway
   process; Redis CPU µs per message from ``INFO cpu`` (used_cpu_sys + used_cpu_user) deltas
   over the same window. Single and cluster runs are interleaved. ``redis-idle``: Redis's CPU
   for an idle 2-node cluster (leases, heartbeats), the background in every Redis number.
2. ``workers``: deliveries/s at K = 1000 of one ``--cluster`` node process vs ``--workers 2``
   (SO_REUSEPORT spreads the receivers), the load generator's CPU beside it; under the flood
   as above, and under the same flood read with ``SO_RCVLOWAT`` 8192 (fewer, larger reads: on
   2 cores the load generator otherwise takes the core a second worker would use).
3. ``latency``: send→receive p50/p99 at 500 msgs/s, K = 100, senders on node A, receivers on
   node B.
4. ``failover``: 100 clients spread over 3 nodes; ``kill -9`` of the leader; time from the kill
   until each client is back (reconnected to a surviving node, ``channel/joined`` received),
   p50/p99; and how late a callback (``@@cb:Ns@@``) owned by the killed leader fires.
5. ``uvloop``: deliveries per server CPU-second, fan-out style (one SQLite server), with
   ``HUBBUB_LOOP=uvloop`` vs the default asyncio loop, and the bare ceiling server on each loop.

The machine's other load is reported per run ("other" cores); numbers from a busy 2-core machine
are indicative.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import importlib.util
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from _fanout import report  # the script's directory is on sys.path
from _fanout.dialects import ERROR_MARKERS, MARKER, join
from _fanout.rawws import Expect, Tally, WSClient, client_frame, connect
from _fanout.scenarios import Config, ThroughputResult, latency_run, throughput_run
from _fanout.servers import (
    HOST,
    REPO,
    ServerGroup,
    ServerProc,
    log,
    raise_nofile_limit,
    redis_cpu_seconds,
    run_benchmark,
)

sys.path.insert(0, str(REPO))
from tests.cluster.redis_server import RedisServer  # one place for redis-server

REDIS_ARGS = ("--save", "", "--appendonly", "yes", "--appendfsync", "everysec")
PARTS = ("cpu", "redis-idle", "workers", "latency", "failover", "uvloop")
CPU_RATIO_TARGET = 1.3
REDIS_US_TARGET = 30.0
LATENCY_P99_MS = 5.0
UVLOOP_ADOPT_GAIN = 0.20


# -- processes -----------------------------------------------------------------------------


class Redis:
    """A fresh redis-server in a temporary directory, with its CPU meter."""

    def __init__(self) -> None:
        self.dir = tempfile.TemporaryDirectory(prefix="hubbub-bench-redis-")
        self.server = RedisServer(Path(self.dir.name), REDIS_ARGS)

    def __enter__(self) -> Redis:
        self.server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.stop()
        self.dir.cleanup()

    @property
    def url(self) -> str:
        return self.server.url

    def cpu_seconds(self) -> float:
        """Redis's own CPU seconds so far (``INFO cpu``)."""
        return redis_cpu_seconds(self.server.port)


async def health(port: int) -> dict[str, Any]:
    """``GET /health`` of the gateway on ``port``."""
    timeout = aiohttp.ClientTimeout(total=3)
    async with (
        aiohttp.ClientSession(timeout=timeout) as http,
        http.get(f"http://{HOST}:{port}/health") as resp,
    ):
        out: dict[str, Any] = await resp.json()
        return out


async def wait_cluster(port: int, nodes: int, timeout: float = 30.0) -> str:
    """Wait until the node on ``port`` knows the leader and ``nodes`` linked nodes; the leader."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        with contextlib.suppress(aiohttp.ClientError, OSError, TimeoutError):
            last = await health(port)
            cluster = last["cluster"]
            if last["status"] == "healthy" and len(cluster["nodes"]) >= nodes:
                return str(cluster["leader"])
        await asyncio.sleep(0.1)
    raise RuntimeError(f"the cluster on port {port} did not form within {timeout:.0f} s: {last}")


async def start_nodes(
    redis: Redis, n: int, workers: int = 1, extra: tuple[str, ...] = ()
) -> list[ServerProc]:
    """Start ``n`` cluster nodes (the first leads) and wait until all know each other."""
    nodes = [
        ServerProc.hubbub(cluster=redis.url, node=f"node{i}", workers=workers, extra=extra)
        for i in range(n)
    ]
    try:
        for node in nodes:
            await node.start()
            await wait_cluster(node.port, 1)
        for node in nodes:
            await wait_cluster(node.port, n * workers)
    except BaseException:
        for node in nodes:
            node.stop()
        raise
    return nodes


# -- 1 + 2: CPU per delivery, workers ------------------------------------------------------


@dataclass
class CpuRun:
    """One throughput run and the costs derived from it."""

    config: str
    k: int
    result: ThroughputResult

    @property
    def us_per_delivery(self) -> float:
        r = self.result
        return r.server_cpu / r.deliveries_per_s * 1e6 if r.deliveries_per_s else float("nan")

    @property
    def redis_us_per_msg(self) -> float | None:
        r = self.result
        if "redis" not in r.aux_cpu or not r.msgs_per_s:
            return None
        return r.aux_cpu["redis"] / r.msgs_per_s * 1e6

    @property
    def split(self) -> tuple[float, float] | None:
        """Two cluster nodes: (leader CPU µs per message, follower CPU µs per delivery).

        The follower delivers half of the deliveries; the leader routes every message and
        delivers the other half.
        """
        r = self.result
        parts = r.server_cpu_parts
        if set(parts) != {"node0", "node1"} or not r.msgs_per_s or not r.deliveries_per_s:
            return None
        # node0 started first and leads
        return parts["node0"] / r.msgs_per_s * 1e6, parts["node1"] / (r.deliveries_per_s / 2) * 1e6

    @property
    def routing_us_per_msg(self) -> float | None:
        """The leader's CPU per message beyond its own deliveries (priced at the follower's)."""
        split = self.split
        if split is None:
            return None
        leader, follower = split
        return leader - self.k / 2 * follower

    def to_json(self) -> dict[str, Any]:
        split = self.split
        return {
            "config": self.config,
            "k": self.k,
            "us_per_delivery": self.us_per_delivery,
            "redis_us_per_msg": self.redis_us_per_msg,
            "leader_us_per_msg": split[0] if split else None,
            "follower_us_per_delivery": split[1] if split else None,
            "routing_us_per_msg": self.routing_us_per_msg,
            **self.result.to_json(),
        }


def cpu_line(run: CpuRun) -> str:
    redis, split = run.redis_us_per_msg, run.split
    extra = f", Redis {redis:.1f} µs/msg" if redis is not None else ""
    if split is not None:
        extra += f", leader {split[0]:.1f} µs/msg, follower {split[1]:.2f} µs/delivery"
    return f"{run.us_per_delivery:.2f} µs/delivery{extra}; {report.run_line(run.result)}"


async def single_run(k: int, attempt: int, cfg: Config, loop: str = "asyncio") -> CpuRun:
    server = ServerProc.hubbub(loop=loop)
    try:
        await server.start()
        return CpuRun(f"single/{loop}", k, await throughput_run(server, "mew", k, attempt, cfg))
    finally:
        server.stop()


async def cluster_run(k: int, attempt: int, cfg: Config, nodes: int, workers: int) -> CpuRun:
    with Redis() as redis:
        procs = await start_nodes(redis, nodes, workers)
        try:
            group = ServerGroup(f"cluster x{nodes}", procs, aux={"redis": redis.cpu_seconds})
            result = await throughput_run(group, "mew", k, attempt, cfg)
        finally:
            for p in procs:
                p.stop()
    label = f"cluster {nodes} nodes" if workers == 1 else f"cluster --workers {workers}"
    return CpuRun(label, k, result)


async def part_cpu(plan: Plan) -> list[CpuRun]:
    runs: list[CpuRun] = []
    attempt = 0
    for k in plan.ks:
        for n in range(plan.cfg.runs):
            for run_one in (
                single_run(k, attempt, plan.cfg),
                cluster_run(k, attempt + 1, plan.cfg, 2, 1),
            ):
                run = await run_one
                log(f"  K={k} run {n + 1} {run.config}: {cpu_line(run)}")
                runs.append(run)
            attempt += 2
    return runs


WORKER_LOADS = (("flood", 0), ("flood, receivers with SO_RCVLOWAT 8192", 8192))
"""The load shapes of the workers part: the flood as elsewhere, and the same flood read in
fewer, larger chunks (the load generator then needs less of the 2 cores the server shares)."""


async def part_workers(plan: Plan) -> list[CpuRun]:
    runs: list[CpuRun] = []
    for load, rcvlowat in WORKER_LOADS:
        cfg = dataclasses.replace(plan.cfg, rcvlowat=rcvlowat)
        for n in range(plan.cfg.runs):
            for workers in (1, 2):
                run = await cluster_run(plan.workers_k, n, cfg, nodes=1, workers=workers)
                run.config = f"{run.config} | {load}"
                log(f"  K={plan.workers_k} run {n + 1} {run.config}: {cpu_line(run)}")
                runs.append(run)
    return runs


async def part_uvloop(plan: Plan) -> list[CpuRun]:
    if importlib.util.find_spec("uvloop") is None:
        raise RuntimeError(
            "not run: uvloop is not installed (`.venv/bin/pip install uvloop` to compare it "
            "with asyncio's loop; hubbub itself does not need it)"
        )
    runs: list[CpuRun] = []
    attempt = 0
    for k in plan.ks:
        for n in range(plan.cfg.runs):
            for loop in ("asyncio", "uvloop"):
                run = await single_run(k, attempt, plan.cfg, loop)
                attempt += 1
                log(f"  K={k} run {n + 1} hubbub/{loop}: {cpu_line(run)}")
                runs.append(run)
                bare = ServerProc.bare("write", loop)
                try:
                    await bare.start()
                    result = await throughput_run(bare, "bare", k, attempt, plan.cfg)
                finally:
                    bare.stop()
                attempt += 1
                run = CpuRun(f"bare/{loop}", k, result)
                log(f"  K={k} run {n + 1} bare/{loop}: {cpu_line(run)}")
                runs.append(run)
    return runs


# -- 3: latency across nodes ---------------------------------------------------------------


async def part_latency(plan: Plan) -> dict[str, Any]:
    """Senders on the leader (A), receivers on the follower (B); and, as a reference in the
    same run, everyone on the follower (one hop less each way) and one SQLite node."""
    out: dict[str, Any] = {}
    with Redis() as redis:
        procs = await start_nodes(redis, 2)
        try:
            for label, senders_on in (("A->B", 0), ("B->B", 1)):
                group = ServerGroup(
                    f"cluster {label}",
                    procs,
                    aux={"redis": redis.cpu_seconds},
                    senders_on=senders_on,
                    receivers_on=1,
                )
                result = await latency_run(group, "mew", plan.cfg)
                log(f"  cluster {label}: {report.latency_line(result)}")
                out[label] = result.to_json()
        finally:
            for p in procs:
                p.stop()
    single = ServerProc.hubbub()
    try:
        await single.start()
        result = await latency_run(single, "mew", plan.cfg)
    finally:
        single.stop()
    log(f"  single node (SQLite): {report.latency_line(result)}")
    out["single"] = result.to_json()
    return out


async def part_redis_idle(plan: Plan) -> dict[str, Any]:
    """Redis's CPU for an idle 2-node cluster: the leases and heartbeats behind every number."""
    with Redis() as redis:
        procs = await start_nodes(redis, 2)
        try:
            await asyncio.sleep(1.0)
            cpu0, t0 = redis.cpu_seconds(), time.monotonic()
            await asyncio.sleep(plan.cfg.window_s * 2)
            cpu1, t1 = redis.cpu_seconds(), time.monotonic()
        finally:
            for p in procs:
                p.stop()
    ms_per_s = (cpu1 - cpu0) / (t1 - t0) * 1000
    log(f"  idle 2-node cluster: Redis {ms_per_s:.2f} ms CPU per second")
    return {"redis_ms_per_s": ms_per_s}


# -- 4: failover ---------------------------------------------------------------------------


@dataclass
class FailoverResult:
    clients: int
    lease_ms: int
    retry_ms: int
    resumed: int
    p50_ms: float
    p99_ms: float
    max_ms: float
    leader_clients: int
    callback_delay_s: float
    callback_late_ms: float
    callback_late_ms_reported: float | None
    errors: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(q * (len(s) - 1))))]


async def _join_somewhere(
    name: str, ports: list[int], start: int, retry_s: float, keep: Expect | None = None
) -> WSClient:
    """Connect and join on the first of ``ports`` (from ``start``) that lets us, retrying."""
    i = start
    while True:
        port = ports[i % len(ports)]
        i += 1
        client: WSClient | None = None
        try:
            client = await connect(HOST, port, "/ws", Tally(), MARKER, timeout=5)
            await join(client, "mew", name, timeout=5, keep=keep)
            return client
        except (OSError, TimeoutError, RuntimeError):
            if client is not None:
                client.close()
            await asyncio.sleep(retry_s)


async def part_failover(plan: Plan) -> dict[str, Any]:
    n_clients, lease_ms, retry_s, delay_s = plan.failover_clients, plan.lease_ms, 0.05, 3.0
    extra = ("--lease-ms", str(lease_ms))
    with Redis() as redis:
        procs = await start_nodes(redis, 3, extra=extra)
        clients: list[WSClient] = []
        try:
            leader_name = await wait_cluster(procs[0].port, 3)
            leader = next(p for p in procs if p.name == leader_name)
            survivors = [p.port for p in procs if p is not leader]
            ports = [p.port for p in procs]
            names = [f"f{i}" for i in range(n_clients)]
            for i, name in enumerate(names):
                clients.append(await _join_somewhere(name, ports[i % 3 :] + ports[: i % 3], 0, 1))
            on_leader = sum(1 for i in range(n_clients) if ports[i % 3] == leader.port)
            # The callback's owner sits on a follower; the leader owns its timer.
            owner_home = survivors[0]
            owner = await _join_somewhere("cbowner", [owner_home], 0, 1)
            echoes = Expect(ERROR_MARKERS)
            owner.handler = echoes
            echo = echoes.expect(b"back soon")
            owner.send_raw(
                client_frame(
                    b'{"kind":"chat","channel":"#general","payload":{"text":'
                    b'"back soon @@cb:%gs@@late"}}' % delay_s
                )
            )
            await asyncio.wait_for(echo, 10)
            due = time.monotonic() + delay_s
            await asyncio.sleep(0.5)

            resumed: dict[str, float] = {}
            errors: list[str] = []

            async def comeback(i: int, client: WSClient) -> None:
                await client.closed
                again = await _join_somewhere(names[i], survivors, i, retry_s)
                resumed[names[i]] = time.monotonic() - killed
                clients.append(again)

            fire_box: dict[str, Any] = {}

            async def owner_comeback() -> None:
                await owner.closed
                keep = Expect(ERROR_MARKERS)
                fired = keep.expect(b"@@cb-fire@@")
                again = await _join_somewhere("cbowner", survivors, 0, retry_s, keep=keep)
                clients.append(again)
                payload = await fired
                fire_box["at"] = time.monotonic()
                with contextlib.suppress(ValueError, KeyError, TypeError):
                    fire_box["late_ms"] = json.loads(payload)["payload"].get("late_ms")

            tasks = [asyncio.create_task(comeback(i, c)) for i, c in enumerate(clients)]
            owner_task = asyncio.create_task(owner_comeback())
            killed = time.monotonic()
            assert leader.popen is not None
            leader.popen.kill()
            log(f"  killed leader {leader.name} (pid {leader.popen.pid}) with SIGKILL")
            done, pending = await asyncio.wait([*tasks, owner_task], timeout=60)
            for t in pending:
                t.cancel()
                errors.append("a client did not come back within 60 s")
            for t in done:
                if t.exception() is not None:
                    errors.append(repr(t.exception()))
        finally:
            for c in clients:
                c.close()
            for p in procs:
                p.stop()
    times = [v * 1000 for v in resumed.values()]
    result = FailoverResult(
        clients=n_clients,
        lease_ms=lease_ms,
        retry_ms=round(retry_s * 1000),
        resumed=len(times),
        p50_ms=_pct(times, 0.5),
        p99_ms=_pct(times, 0.99),
        max_ms=max(times) if times else float("nan"),
        leader_clients=on_leader,
        callback_delay_s=delay_s,
        callback_late_ms=(fire_box["at"] - due) * 1000 if "at" in fire_box else float("nan"),
        callback_late_ms_reported=fire_box.get("late_ms"),
        errors=errors[:5],
    )
    log(
        f"  {result.resumed}/{n_clients} clients back: p50 {result.p50_ms:.0f} ms, p99 "
        f"{result.p99_ms:.0f} ms, max {result.max_ms:.0f} ms (lease {lease_ms} ms); callback "
        f"{result.callback_late_ms:.0f} ms late (late_ms {result.callback_late_ms_reported})"
    )
    return result.to_json()


# -- report --------------------------------------------------------------------------------


def _median(values: list[float]) -> float:
    finite = [v for v in values if v == v]
    return statistics.median(finite) if finite else float("nan")


def _by(runs: list[CpuRun], config: str, k: int) -> list[CpuRun]:
    return [r for r in runs if r.config == config and r.k == k]


def render(results: dict[str, Any], runs: dict[str, list[CpuRun]], plan: Plan) -> str:
    out: list[str] = []
    verdict = report.verdict
    if "cpu" in runs:
        out.append("1. CPU per delivery, single node (SQLite) vs 2 cluster nodes (medians)")
        out.append(
            f"   {'K':>5} {'single µs/dl':>13} {'cluster µs/dl':>14} {'ratio':>6} "
            f"{'Redis µs/msg':>13} {'dl/s single':>12} {'dl/s cluster':>13}"
        )
        summary = {}
        for k in plan.ks:
            s, c = _by(runs["cpu"], "single/asyncio", k), _by(runs["cpu"], "cluster 2 nodes", k)
            s_us = _median([r.us_per_delivery for r in s])
            c_us = _median([r.us_per_delivery for r in c])
            redis = _median([r.redis_us_per_msg or float("nan") for r in c])
            ratio = c_us / s_us if s_us else float("nan")
            leader = _median([r.split[0] if r.split else float("nan") for r in c])
            follower = _median([r.split[1] if r.split else float("nan") for r in c])
            routing = _median([r.routing_us_per_msg or float("nan") for r in c])
            summary[k] = {
                "single_us_per_delivery": s_us,
                "cluster_us_per_delivery": c_us,
                "ratio": ratio,
                "redis_us_per_msg": redis,
                "leader_us_per_msg": leader,
                "follower_us_per_delivery": follower,
                "leader_routing_us_per_msg": routing,
            }
            out.append(
                f"   {k:>5} {s_us:>13.2f} {c_us:>14.2f} {ratio:>5.2f}x {redis:>13.1f} "
                f"{_median([r.result.deliveries_per_s for r in s]):>12,.0f} "
                f"{_median([r.result.deliveries_per_s for r in c]):>13,.0f}   "
                f"ratio {verdict(ratio <= CPU_RATIO_TARGET)} (≤ {CPU_RATIO_TARGET}x), Redis "
                f"{verdict(redis <= REDIS_US_TARGET)} (≤ {REDIS_US_TARGET:.0f} µs)"
            )
            out.append(
                f"         leader {leader:.1f} µs/msg (routing beyond its deliveries "
                f"{routing:.1f}), follower {follower:.2f} µs/delivery"
            )
        results["cpu_summary"] = summary
    if "redis-idle" in results:
        idle = results["redis-idle"]["redis_ms_per_s"]
        out.append(f"   Redis, idle 2-node cluster (leases, heartbeats): {idle:.2f} ms CPU/s")
    if "workers" in runs:
        k = plan.workers_k
        out.append(f"2. --workers 2 vs one node process, K = {k} (medians)")
        summary = {}
        for load, _ in WORKER_LOADS:
            out.append(f"   load: {load}")
            dls = {}
            for config in ("cluster 1 nodes", "cluster --workers 2"):
                rs = _by(runs["workers"], f"{config} | {load}", k)
                dls[config] = dl = _median([r.result.deliveries_per_s for r in rs])
                gen = _median([r.result.gen_cpu for r in rs])
                bound = "  (the load generator is the bound)" if gen >= 0.95 else ""
                out.append(
                    f"     {config:<20} {dl:>10,.0f} deliveries/s; server "
                    f"{_median([r.result.server_cpu for r in rs]):.2f} / loadgen {gen:.2f} / "
                    f"Redis {_median([r.result.aux_cpu.get('redis', 0.0) for r in rs]):.2f} "
                    f"cores{bound}"
                )
            gain = dls["cluster --workers 2"] / dls["cluster 1 nodes"] - 1
            out.append(f"     two workers vs one: {gain:+.0%}")
            summary[load] = {**dls, "gain": gain}
        results["workers_summary"] = summary
    if "latency" in results:
        out.append(f"3. Latency at {plan.cfg.latency_rate:.0f} msgs/s, K = {plan.cfg.latency_k}")
        for label, lat in results["latency"].items():
            target = (
                f"  {verdict(lat['p99_ms'] <= LATENCY_P99_MS)} (p99 ≤ {LATENCY_P99_MS:.0f} ms)"
                if label == "A->B"
                else "  (reference)"
            )
            out.append(
                f"   {label:<7} p50 {lat['p50_ms']:.2f} ms, p99 {lat['p99_ms']:.2f} ms, max "
                f"{lat['max_ms']:.1f} ms (other {max(0.0, lat['other_cpu']):.2f} cores){target}"
            )
    if "failover" in results:
        f = results["failover"]
        out.append(
            f"4. Failover (kill -9 of the leader, lease {f['lease_ms']} ms, client retry "
            f"{f['retry_ms']} ms): {f['resumed']}/{f['clients']} clients back, p50 "
            f"{f['p50_ms']:.0f} ms, p99 {f['p99_ms']:.0f} ms; callback "
            f"{f['callback_late_ms']:.0f} ms late (gateway's late_ms "
            f"{f['callback_late_ms_reported']})"
        )
    if "uvloop" in runs:
        out.append("5. Deliveries per server CPU-second, asyncio vs uvloop (medians)")
        summary = {}
        for k in plan.ks:
            for server in ("single", "bare"):
                per: dict[str, float] = {}
                for loop in ("asyncio", "uvloop"):
                    rs = _by(runs["uvloop"], f"{server}/{loop}", k)
                    per[loop] = _median([1e6 / r.us_per_delivery for r in rs])
                gain = per["uvloop"] / per["asyncio"] - 1
                name = "hubbub" if server == "single" else "bare"
                summary[f"{name} K={k}"] = {**per, "gain": gain}
                adopt = (
                    f"  adopt: {'yes' if gain >= UVLOOP_ADOPT_GAIN else 'no'} (≥ +20 %)"
                    if server == "single"
                    else ""
                )
                out.append(
                    f"   {name:<7} K={k:<5} asyncio {per['asyncio']:>9,.0f}  uvloop "
                    f"{per['uvloop']:>9,.0f}  {gain:+.0%}{adopt}"
                )
        results["uvloop_summary"] = summary
    return "\n".join(out)


# -- main ----------------------------------------------------------------------------------


@dataclass
class Plan:
    cfg: Config
    ks: list[int]
    parts: list[str]
    workers_k: int
    failover_clients: int
    lease_ms: int
    quick: bool


async def run(plan: Plan) -> dict[str, Any]:
    nofile = raise_nofile_limit()
    started = time.monotonic()
    results: dict[str, Any] = {
        "meta": {
            "python": platform.python_version(),
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "loadavg_at_start": os.getloadavg(),
            "rlimit_nofile": nofile,
            "quick": plan.quick,
            "config": vars(plan.cfg),
            "date": time.strftime("%Y-%m-%d"),
        }
    }
    runs: dict[str, list[CpuRun]] = {}
    parts: dict[str, Callable[[Plan], Any]] = {
        "cpu": part_cpu,
        "redis-idle": part_redis_idle,
        "workers": part_workers,
        "latency": part_latency,
        "failover": part_failover,
        "uvloop": part_uvloop,
    }
    for name in plan.parts:
        log(name)
        try:
            value = await parts[name](plan)
        except Exception as exc:  # one failed part must not lose the others
            log(f"  !! {name}: {exc}")
            results.setdefault("errors", {})[name] = str(exc)
            continue
        if isinstance(value, list):
            runs[name] = value
            results[name] = [r.to_json() for r in value]
        else:
            results[name] = value
    text = render(results, runs, plan)
    results["meta"]["elapsed_s"] = time.monotonic() - started
    print(text)
    return results


def parse_args(argv: list[str] | None) -> tuple[Plan, str | None]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--quick", action="store_true", help="one short run per point")
    p.add_argument("--json", metavar="PATH", help="also write every number to PATH")
    p.add_argument("--only", default=",".join(PARTS), help=f"parts to run ({','.join(PARTS)})")
    p.add_argument("--ks", default="100,1000", help="receiver counts of cpu and uvloop")
    p.add_argument("--runs", type=int, help="runs per point (default 3, 1 with --quick)")
    p.add_argument("--window", type=float, help="seconds measured per throughput run")
    p.add_argument("--lease-ms", type=int, default=3000, help="cluster lease (failover)")
    p.add_argument("--failover-clients", type=int, default=100)
    a = p.parse_args(argv)
    cfg = Config()
    if a.quick:
        cfg.runs, cfg.warmup_s, cfg.window_s = 1, 0.5, 1.5
        cfg.latency_warmup_s, cfg.latency_window_s = 0.5, 2.0
    if a.runs:
        cfg.runs = a.runs
    if a.window:
        cfg.window_s = a.window
    parts = [x for x in a.only.split(",") if x]
    unknown = set(parts) - set(PARTS)
    if unknown:
        p.error(f"unknown part(s): {', '.join(sorted(unknown))}; choose from {', '.join(PARTS)}")
    plan = Plan(
        cfg=cfg,
        ks=[int(k) for k in a.ks.split(",") if k],
        parts=parts,
        workers_k=1000,
        failover_clients=a.failover_clients,
        lease_ms=a.lease_ms,
        quick=a.quick,
    )
    return plan, a.json


def main(argv: list[str] | None = None) -> int:
    plan, json_path = parse_args(argv)
    return run_benchmark(run, plan, json_path)


if __name__ == "__main__":
    sys.exit(main())
