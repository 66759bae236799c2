"""The three measurements: callback fire lateness, memory per pending callback, floor yields."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import math
import os
import random
import time
import tracemalloc
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import aiohttp
import psutil

from _engines.agents import Agent, close_agents, decode, open_agents, sync_all
from _fanout.servers import HOST, ServerProc
from hubbub.protocol.ids import ulid_time_ms

MIB = 1024 * 1024


def percentile(sorted_xs: Sequence[float], q: float) -> float:
    """Nearest-rank percentile of an ascending sequence (nan when empty)."""
    if not sorted_xs:
        return math.nan
    rank = max(1, math.ceil(q / 100 * len(sorted_xs)))
    return sorted_xs[rank - 1]


def _machine_busy() -> float:
    """CPU seconds the whole machine spent busy (steal counts: capacity lost to the host)."""
    m = psutil.cpu_times()
    extra = sum(float(getattr(m, f, 0.0)) for f in ("irq", "softirq", "steal"))
    return float(m.user + m.nice + m.system) + extra


class CpuMeter:
    """Server, load-generator and everyone else's CPU (cores) since construction."""

    def __init__(self, server: ServerProc) -> None:
        self.server = server
        self.wall = time.monotonic()
        self.server_cpu = server.cpu_seconds()
        t = os.times()
        self.gen_cpu = t.user + t.system
        self.busy = _machine_busy()

    def cores(self) -> tuple[float, float, float]:
        """``(server, load generator, other processes)`` cores used on average."""
        wall = max(1e-9, time.monotonic() - self.wall)
        t = os.times()
        server = self.server.cpu_seconds() - self.server_cpu
        gen = t.user + t.system - self.gen_cpu
        other = _machine_busy() - self.busy - server - gen
        return server / wall, gen / wall, max(0.0, other / wall)


# -- 1. callback fire lateness ----------------------------------------------------------------


@dataclass
class CallbackConfig:
    agents: int = 1000
    per_agent: int = 10
    delay_min_s: float = 5.0
    delay_max_s: float = 20.0
    batch: int = 20  # agents that send their markers before one round of syncs


@dataclass
class CallbackResult:
    agents: int
    scheduled: int
    fired: int
    timed: int  # fires whose scheduling echo was seen (the samples of p50_ms...)
    duplicates: int
    misrouted: int
    errors: int
    first_error: str
    schedule_s: float  # first marker sent → last sync answered
    first_due_after_s: float  # from the end of scheduling to the earliest due time
    # lateness = arrival − (the gateway's receipt of the marker + delay): a tight upper bound
    p50_ms: float
    p90_ms: float
    p99_ms: float
    max_ms: float
    mean_ms: float
    # lateness = arrival − (this client's send + delay): includes queueing while scheduling
    send_p50_ms: float
    send_p99_ms: float
    send_max_ms: float
    server_cpu: float  # cores, while callbacks fired
    gen_cpu: float
    other_cpu: float  # everything else on the machine (and steal): interference

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


async def callback_run(
    server: ServerProc, cfg: CallbackConfig, rng: random.Random
) -> CallbackResult:
    """Schedule ``agents × per_agent`` DM callbacks, then time each fire at its agent.

    Each callback is scheduled by its own message, a DM from the agent to itself:
    ``k<i> @@cb:<N>s@@c<i>``. The gateway relays the text ``k<i>`` back (the marker stripped)
    with a ULID whose timestamp is the gateway's clock, in ms, when it handled the message —
    just before it computed the callback's due time. So ``arrival − (that timestamp + N)``
    bounds the fire error plus delivery from above, within 1 ms. The looser bound
    ``arrival − (send + N)`` is reported too: it also counts the time the message waited in
    the gateway's queue during the scheduling burst. All on the wall clock of this machine.
    """
    per = cfg.per_agent
    agents = await open_agents(server, [f"cb{i:05d}" for i in range(cfg.agents)])
    try:
        await asyncio.sleep(0.5)  # the presence of the last joins is flushed
        n = cfg.agents * per
        delay_ms = [0.0] * n
        sent = [0.0] * n  # wall ms
        handled = [math.nan] * n  # the gateway's ms timestamp of the scheduling message
        got = [math.nan] * n  # wall ms
        index = {id(a): i for i, a in enumerate(agents)}
        counts = {"dup": 0, "misrouted": 0, "fired": 0}
        all_fired = asyncio.Event()
        fire_marker = b"@@cb-fire@@c"
        echo_marker = b'"text":"k'
        wall_offset = (time.time() - time.perf_counter()) * 1000  # perf_counter s → wall ms

        def on_chat(agent: Agent, payload: bytes, t: float) -> None:
            i = payload.find(fire_marker)
            if i >= 0:
                i += len(fire_marker)
                idx = int(payload[i : payload.find(b'"', i)])
                if not math.isnan(got[idx]):
                    counts["dup"] += 1
                    return
                got[idx] = t * 1000 + wall_offset
                if idx // per != index[id(agent)]:
                    counts["misrouted"] += 1
                counts["fired"] += 1
                if counts["fired"] == n:
                    all_fired.set()
                return
            i = payload.find(echo_marker)
            if i >= 0:
                i += len(echo_marker)
                idx = int(payload[i : payload.find(b'"', i)])
                handled[idx] = ulid_time_ms(decode(payload)["id"])

        for a in agents:
            a.hooks[b"chat"] = on_chat

        started = time.perf_counter()
        idx = 0
        for b in range(0, len(agents), cfg.batch):
            batch = agents[b : b + cfg.batch]
            for a in batch:
                pid = a.pid.encode()
                for _ in range(per):
                    delay = round(rng.uniform(cfg.delay_min_s, cfg.delay_max_s), 3)
                    delay_ms[idx] = delay * 1000
                    frame = (
                        b'{"kind":"chat","to":["%s"],"private":true,'
                        b'"payload":{"text":"k%d @@cb:%.3fs@@c%d"}}' % (pid, idx, delay, idx)
                    )
                    sent[idx] = time.time() * 1000
                    a.send(frame)
                    idx += 1
            await sync_all(batch)
        schedule_s = time.perf_counter() - started
        scheduled_at = time.time() * 1000
        first_due_after = min(s + d for s, d in zip(sent, delay_ms, strict=True)) - scheduled_at
        last_due = max(s + d for s, d in zip(sent, delay_ms, strict=True))

        meter = CpuMeter(server)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(all_fired.wait(), (last_due - scheduled_at) / 1000 + 5.0)
        await asyncio.sleep(0.3)  # duplicates, if any, would arrive now
        server_cpu, gen_cpu, other_cpu = meter.cores()
        late: list[float] = []
        late_send: list[float] = []
        for g, h, s_, d in zip(got, handled, sent, delay_ms, strict=True):
            if math.isnan(g):
                continue
            late_send.append(g - (s_ + d))
            if not math.isnan(h):
                late.append(g - (h + d))
        late.sort()
        late_send.sort()
        errors = [e for a in agents for e in a.errors]
        return CallbackResult(
            agents=cfg.agents,
            scheduled=n,
            fired=counts["fired"],
            timed=len(late),
            duplicates=counts["dup"],
            misrouted=counts["misrouted"],
            errors=len(errors),
            first_error=errors[0] if errors else "",
            schedule_s=schedule_s,
            first_due_after_s=first_due_after / 1000,
            p50_ms=percentile(late, 50),
            p90_ms=percentile(late, 90),
            p99_ms=percentile(late, 99),
            max_ms=late[-1] if late else math.nan,
            mean_ms=sum(late) / len(late) if late else math.nan,
            send_p50_ms=percentile(late_send, 50),
            send_p99_ms=percentile(late_send, 99),
            send_max_ms=late_send[-1] if late_send else math.nan,
            server_cpu=server_cpu,
            gen_cpu=gen_cpu,
            other_cpu=other_cpu,
        )
    finally:
        await close_agents(agents)


# -- 2. memory per pending callback -----------------------------------------------------------


@dataclass
class MemoryConfig:
    agents: int = 2000
    per_agent: int = 50
    delay_min_s: float = 3000.0
    delay_max_s: float = 3500.0
    batch: int = 100


@dataclass
class MemoryResult:
    agents: int
    sent: int
    pending: int  # the sum of pending_callbacks over GET /participants
    errors: int
    first_error: str
    schedule_s: float
    rss_connected_mib: float
    rss_scheduled_mib: float
    delta_mib: float
    bytes_per_callback: float
    engine_bytes_per_callback: float  # tracemalloc, in this process, engine structures only

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


async def settled_rss(server: ServerProc, timeout: float = 15.0) -> int:
    """The server's RSS once it stops changing (two samples 0.5 s apart within 256 KiB)."""
    deadline = time.monotonic() + timeout
    last = server.rss_bytes()
    while time.monotonic() < deadline:
        await asyncio.sleep(0.5)
        now = server.rss_bytes()
        if abs(now - last) < 256 * 1024:
            return now
        last = now
    return last


async def pending_callbacks(server: ServerProc) -> int:
    """Pending callbacks the gateway reports in ``GET /participants`` (open mode)."""
    url = f"http://{HOST}:{server.port}/participants"
    async with (
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as http,
        http.get(url) as resp,
    ):
        resp.raise_for_status()
        body = await resp.json()
    return sum(int(p.get("pending_callbacks", 0)) for p in body["participants"])


def engine_bytes_per_callback(cfg: MemoryConfig) -> float:
    """What the engine's own structures hold per callback (tracemalloc, in this process).

    The same ``CallbackEngine`` and ``TimerQueue`` the gateway uses, with ids from the same
    generator and the benchmark's payloads: a floor under the RSS measurement, which also sees
    the interpreter's and the allocator's overheads.
    """
    from hubbub.engines.callbacks import CallbackEngine
    from hubbub.engines.timers import TimerQueue
    from hubbub.protocol.ids import UlidGenerator

    ids = UlidGenerator()
    origins = [f"mem{i:05d}" for i in range(cfg.agents)]
    n = cfg.agents * cfg.per_agent
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        timers = TimerQueue()
        engine = CallbackEngine(
            timers, max_per_agent=cfg.per_agent, max_per_space=n, scope="default"
        )
        now = time.time() * 1000
        i = 0
        for _ in range(cfg.per_agent):
            for origin in origins:
                engine.schedule(now, ids.new(int(now)), origin, cfg.delay_min_s, f"m{i}")
                i += 1
        gc.collect()
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    del engine, timers
    return (after - before) / n


async def memory_run(server: ServerProc, cfg: MemoryConfig, rng: random.Random) -> MemoryResult:
    """RSS with ``agents`` connected and no callbacks, then with ``per_agent`` each pending."""
    agents = await open_agents(server, [f"mem{i:05d}" for i in range(cfg.agents)])
    try:
        await asyncio.sleep(1.0)  # presence flushed, send buffers drained
        await sync_all(agents)
        before = await settled_rss(server)
        started = time.perf_counter()
        idx = 0
        for b in range(0, len(agents), cfg.batch):
            batch = agents[b : b + cfg.batch]
            for a in batch:
                for _ in range(cfg.per_agent):
                    delay = round(rng.uniform(cfg.delay_min_s, cfg.delay_max_s), 3)
                    a.send(
                        b'{"kind":"chat","channel":"#general","payload":{"text":"@@cb:%.3fs@@m%d"}}'
                        % (delay, idx)
                    )
                    idx += 1
            await sync_all(batch)
        schedule_s = time.perf_counter() - started
        await asyncio.sleep(1.0)  # the store's last group commit
        after = await settled_rss(server)
        pending = await pending_callbacks(server)
        errors = [e for a in agents for e in a.errors]
        delta = after - before
        return MemoryResult(
            agents=cfg.agents,
            sent=idx,
            pending=pending,
            errors=len(errors),
            first_error=errors[0] if errors else "",
            schedule_s=schedule_s,
            rss_connected_mib=before / MIB,
            rss_scheduled_mib=after / MIB,
            delta_mib=delta / MIB,
            bytes_per_callback=delta / max(1, pending),
            engine_bytes_per_callback=engine_bytes_per_callback(cfg),
        )
    finally:
        await close_agents(agents)


# -- 3. floor control: 20 agents claim one message ---------------------------------------------


@dataclass
class FloorConfig:
    agents: int = 20
    rounds: int = 200
    gap_s: float = 0.02  # pause between rounds (relays drain)
    yield_timeout_s: float = 2.0


@dataclass
class _Round:
    msg_id: str
    started: dict[str, int]
    sent_first: float = 0.0
    sent_last: float = 0.0
    yields: list[tuple[str, float]] = field(default_factory=list)
    complete: asyncio.Event = field(default_factory=asyncio.Event)


@dataclass
class FloorResult:
    agents: int
    rounds: int
    correct_rounds: int
    first_problem: str
    p50_ms: float  # last claim sent → last yield received
    p90_ms: float
    p99_ms: float
    max_ms: float
    from_first_p99_ms: float  # first claim sent → last yield received
    send_spread_p50_us: float  # first → last claim written by the client
    server_cpu: float
    gen_cpu: float
    other_cpu: float
    errors: int
    first_error: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


async def floor_run(server: ServerProc, cfg: FloorConfig, rng: random.Random) -> FloorResult:
    """Per round: a person asks in ``#general``, every agent claims it at once."""
    human = (await open_agents(server, ["floor-human"], kind="human"))[0]
    agents = await open_agents(server, [f"floor-a{i:02d}" for i in range(cfg.agents)])
    everyone = [human, *agents]
    try:
        await asyncio.sleep(0.3)
        rounds: dict[str, _Round] = {}
        asked: dict[str, Any] = {"text": b"", "seen": 0, "id": "", "event": asyncio.Event()}

        def on_chat(agent: Agent, payload: bytes, t: float) -> None:
            if asked["text"] and asked["text"] in payload:
                asked["seen"] += 1
                asked["id"] = decode(payload)["id"]
                if asked["seen"] == cfg.agents:
                    asked["event"].set()

        def on_yield(agent: Agent, payload: bytes, t: float) -> None:
            frame = decode(payload)
            r = rounds.get(frame["payload"]["msg_id"])
            if r is None:
                return
            r.yields.append((agent.pid, t))
            if len(r.yields) >= cfg.agents - 1:
                r.complete.set()

        for a in agents:
            a.hooks[b"chat"] = on_chat
            a.hooks[b"floor/yield"] = on_yield

        meter = CpuMeter(server)
        order = list(agents)
        timed_out = 0
        for rno in range(cfg.rounds):
            text = b"round %d: who takes this one?" % rno
            asked.update(text=text, seen=0, id="", event=asyncio.Event())
            human.send(b'{"kind":"chat","channel":"#general","payload":{"text":"%s"}}' % text)
            await asyncio.wait_for(asked["event"].wait(), 10.0)
            msg_id: str = asked["id"]
            msg_ts = ulid_time_ms(msg_id)
            now = max(msg_ts, int(time.time() * 1000))
            started = {a.pid: rng.randint(msg_ts, now) for a in agents}
            rng.shuffle(order)
            frames = [
                (
                    a,
                    b'{"kind":"floor/responding-to","channel":"#general",'
                    b'"payload":{"msg_id":"%s","started_at":%d}}'
                    % (msg_id.encode(), started[a.pid]),
                )
                for a in order
            ]
            r = rounds[msg_id] = _Round(msg_id, started)
            r.sent_first = time.perf_counter()
            for a, frame in frames:
                a.send(frame)
            r.sent_last = time.perf_counter()
            try:
                await asyncio.wait_for(r.complete.wait(), cfg.yield_timeout_s)
            except TimeoutError:
                timed_out += 1
            await asyncio.sleep(cfg.gap_s)
        await asyncio.sleep(0.3)  # late or extra yields
        server_cpu, gen_cpu, other_cpu = meter.cores()

        lat: list[float] = []
        from_first: list[float] = []
        spread: list[float] = []
        correct = 0
        problem = ""
        all_pids = {a.pid for a in agents}
        for r in rounds.values():
            winner = min(all_pids, key=lambda p: (r.started[p], p))
            got = [pid for pid, _ in r.yields]
            if len(got) == cfg.agents - 1 and set(got) == all_pids - {winner}:
                correct += 1
            elif not problem:
                problem = (
                    f"message {r.msg_id}: {len(got)} yields (want {cfg.agents - 1}), "
                    f"holder should be {winner}, yielded: {sorted(got)}"
                )
            if r.yields:
                last = max(t for _, t in r.yields)
                lat.append((last - r.sent_last) * 1000)
                from_first.append((last - r.sent_first) * 1000)
            spread.append((r.sent_last - r.sent_first) * 1e6)
        lat.sort()
        from_first.sort()
        spread.sort()
        errors = [e for a in everyone for e in a.errors]
        return FloorResult(
            agents=cfg.agents,
            rounds=cfg.rounds,
            correct_rounds=correct,
            first_problem=problem or (f"{timed_out} rounds timed out" if timed_out else ""),
            p50_ms=percentile(lat, 50),
            p90_ms=percentile(lat, 90),
            p99_ms=percentile(lat, 99),
            max_ms=lat[-1] if lat else math.nan,
            from_first_p99_ms=percentile(from_first, 99),
            send_spread_p50_us=percentile(spread, 50),
            server_cpu=server_cpu,
            gen_cpu=gen_cpu,
            other_cpu=other_cpu,
            errors=len(errors),
            first_error=errors[0] if errors else "",
        )
    finally:
        await close_agents(everyone)
