"""The measurements: fan-out throughput, paced latency and idle-connection cost."""

from __future__ import annotations

import asyncio
import gc
import os
import statistics
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import msgspec
import psutil

from _fanout.dialects import MARKER, chat_parts, chat_text, join, tag
from _fanout.rawws import Tally, WSClient, client_frame, connect
from _fanout.servers import HOST, Endpoint

CONNECT_CONCURRENCY = 64
"""Handshakes in flight at once: below aiohttp's default listen backlog (128)."""


@dataclass
class Config:
    """Durations and sizes; ``--quick`` shortens them."""

    runs: int = 3  # throughput runs per K (fresh connections each), median reported
    warmup_s: float = 1.0  # flooding before the window opens
    window_s: float = 3.0  # measured throughput window
    senders: int = 3  # flooding senders
    inflight: int = 16  # unacknowledged messages per sender (its own echo acknowledges)
    rcvlowat: int = 0  # SO_RCVLOWAT of counting receivers (throughput only); 0 = off
    latency_rate: float = 500.0  # msgs/s, spread evenly over 2 paced senders
    latency_k: int = 100
    latency_samplers: int = 10  # receivers that parse timestamps; the others only count
    latency_warmup_s: float = 1.0
    latency_window_s: float = 5.0
    idle_n: int = 5000  # idle identified connections joined to #general
    idle_deadline_s: float = 60.0  # give up connecting after this long (reported as FAIL)


@dataclass
class Sample:
    """CPU and wall clock at one instant of a measurement window."""

    wall: float
    server_cpu: float
    gen_cpu: float
    gen_sys: float
    machine_busy: float
    aux_cpu: dict[str, float]
    parts_cpu: dict[str, float]

    @classmethod
    def take(cls, server: Endpoint) -> Sample:
        t = os.times()
        m = psutil.cpu_times()
        # guest time is already part of user time on Linux; steal is capacity lost to the host
        busy = (
            m.user
            + m.nice
            + m.system
            + sum(getattr(m, f, 0.0) for f in ("irq", "softirq", "steal"))
        )
        wall, cpu, aux = time.monotonic(), server.cpu_seconds(), server.aux_cpu()
        return cls(wall, cpu, t.user + t.system, t.system, busy, aux, server.cpu_parts())

    def aux_cores(self, later: Sample) -> dict[str, float]:
        """Cores each auxiliary process (Redis) used between two samples."""
        wall = later.wall - self.wall
        return {k: (later.aux_cpu[k] - v) / wall for k, v in self.aux_cpu.items()}

    def parts_cores(self, later: Sample) -> dict[str, float]:
        """Cores each member of a server group used between two samples."""
        wall = later.wall - self.wall
        return {k: (later.parts_cpu[k] - v) / wall for k, v in self.parts_cpu.items()}

    def other(self, later: Sample) -> float:
        """Cores used by everything but the server and this process between two samples."""
        wall = later.wall - self.wall
        total = later.machine_busy - self.machine_busy
        server = later.server_cpu - self.server_cpu
        aux = sum(later.aux_cpu.values()) - sum(self.aux_cpu.values())
        return (total - server - aux - (later.gen_cpu - self.gen_cpu)) / wall


@dataclass
class ThroughputResult:
    k: int
    deliveries_per_s: float
    msgs_per_s: float
    delivered_fraction: float
    server_cpu: float
    gen_cpu: float
    window_s: float
    other_cpu: float
    gen_sys: float
    frames_per_read: float
    disconnects: int
    sender_errors: int
    first_error: str = ""
    aux_cpu: dict[str, float] = field(default_factory=dict)
    server_cpu_parts: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class LatencyResult:
    k: int
    rate_target: float
    rate_actual: float
    samples: int
    p50_ms: float
    p90_ms: float
    p99_ms: float
    max_ms: float
    server_cpu: float
    gen_cpu: float
    other_cpu: float
    disconnects: int
    malformed: int
    first_malformed: str
    aux_cpu: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class IdleResult:
    n: int
    joined: int
    connect_join_s: float
    rss_before_mib: float
    rss_after_mib: float
    kib_per_conn: float
    server_cpu: float
    gen_cpu: float
    other_cpu: float
    received_mib: float
    disconnects: int

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


# -- clients ---------------------------------------------------------------------------------


async def _open(
    server: Endpoint,
    dialect: str,
    names: Sequence[str],
    tally: Tally,
    concurrency: int,
    deadline: float | None,
    role: str = "receiver",
) -> tuple[list[WSClient], list[BaseException]]:
    """Connect and join clients, at most ``concurrency`` at a time, until ``deadline`` s."""
    sem = asyncio.Semaphore(concurrency)

    async def one(index: int, name: str) -> WSClient:
        async with sem:
            port = server.port_for(role, index)
            client = await connect(HOST, port, "/ws", tally, MARKER)
            try:
                await join(client, dialect, name)
            except BaseException:
                client.close()
                raise
            return client

    tasks = [asyncio.ensure_future(one(i, n)) for i, n in enumerate(names)]
    _done, pending = await asyncio.wait(tasks, timeout=deadline)
    for t in pending:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    clients: list[WSClient] = []
    errors: list[BaseException] = []
    for t in tasks:
        if t.cancelled():
            continue
        exc = t.exception()
        if exc is None:
            clients.append(t.result())
        else:
            errors.append(exc)
    return clients, errors


async def open_clients(
    server: Endpoint,
    dialect: str,
    names: Sequence[str],
    tally: Tally,
    concurrency: int = CONNECT_CONCURRENCY,
    role: str = "receiver",
) -> list[WSClient]:
    """Connect and join ``len(names)`` clients; on any failure close them all and raise."""
    clients, errors = await _open(server, dialect, names, tally, concurrency, None, role)
    if errors:
        await close_clients(clients)
        raise RuntimeError(
            f"{len(errors)} of {len(names)} connections to {server.name} failed; "
            f"first: {errors[0]!r}\nserver log:\n{server.log_tail()}"
        )
    return clients


async def close_clients(clients: Sequence[WSClient], timeout: float = 5.0) -> None:
    for c in clients:
        c.close()
    if clients:
        await asyncio.wait([c.closed for c in clients], timeout=timeout)


class FloodSender:
    """Keeps ``window`` messages in flight; its own echo is the acknowledgement.

    The client counts frames carrying this sender's tag (its echoes) like a receiver counts
    deliveries, so acknowledging costs no Python call per frame; the sender acts once per read.
    """

    def __init__(self, client: WSClient, dialect: str, name: str, window: int) -> None:
        self.client = client
        self.prefix, self.suffix = chat_parts(dialect, name)
        self.window = window
        self.running = False
        self.seq = 0
        self.errors = 0
        self.first_error = ""
        self.echoes = Tally()
        client.tally = self.echoes
        client.marker = tag(name)
        client.counting = True
        client.handler = None
        client.on_chunk = self.on_chunk

    @property
    def acked(self) -> int:
        return self.echoes.delivered

    def start(self) -> None:
        self.running = True
        self._top_up()

    def on_chunk(self, data: bytearray, end: int) -> None:
        # An error frame (MEW system/error, agentchat ERROR) means a send was refused.
        errors = data.count(b"rror", 0, end) + data.count(b"RROR", 0, end)
        if errors:
            self.errors += errors
            if not self.first_error:
                i = max(data.find(b"rror", 0, end), data.find(b"RROR", 0, end))
                self.first_error = data[max(0, i - 100) : i + 200].decode(errors="replace")
        if self.running:
            self._top_up()

    def _top_up(self) -> None:
        inflight = self.seq - self.echoes.delivered - self.errors
        # Refill only once half the window is acknowledged: fewer, larger writes.
        if inflight * 2 > self.window:
            return
        n = self.window - inflight
        now = time.monotonic_ns()
        prefix, suffix, seq = self.prefix, self.suffix, self.seq
        frames = b"".join(
            client_frame(prefix + b"%d~%d" % (seq + i, now) + suffix) for i in range(n)
        )
        self.seq = seq + n
        self.client.send_raw(frames)


class PacedSender:
    """Sends one timestamped message on request (the latency test paces the requests)."""

    def __init__(self, client: WSClient, dialect: str, name: str) -> None:
        self.client = client
        self.prefix, self.suffix = chat_parts(dialect, name)
        self.seq = 0

    def send_one(self) -> None:
        self.client.send_raw(
            client_frame(self.prefix + b"%d~%d" % (self.seq, time.monotonic_ns()) + self.suffix)
        )
        self.seq += 1


class LatencyProbe:
    """A receiver that parses every frame like a real client and samples send→receive latency.

    Each frame is JSON-decoded (msgspec); chat frames are checked for the dialect's shape and the
    send timestamp is read from the text. Samples sent inside the window are kept.
    """

    def __init__(self, dialect: str, samples: list[int], window: list[int], bad: list[str]) -> None:
        self.dialect = dialect
        self.samples = samples
        self.window = window  # [start_ns, end_ns], shared and filled in by the orchestrator
        self.bad = bad  # descriptions of chat frames without the expected shape

    def on_frame(self, data: bytearray, start: int, end: int) -> None:
        now = time.monotonic_ns()
        msg = msgspec.json.decode(data[start:end])
        text = chat_text(self.dialect, msg)
        if text is None:
            if MARKER in data[start:end]:
                self.bad.append(bytes(data[start:end][:200]).decode(errors="replace"))
            return
        fields = text.split("~")  # "", "bench", sender, seq, sent ns, filler
        sent = int(fields[4])
        if self.window[0] <= sent < self.window[1]:
            self.samples.append(now - sent)

    def on_chunk_done(self) -> None:
        pass


# -- scenarios -------------------------------------------------------------------------------


async def throughput_run(
    server: Endpoint, dialect: str, k: int, run: int, cfg: Config
) -> ThroughputResult:
    """K receivers count; ``cfg.senders`` senders flood with a bounded window in flight."""
    tally = Tally()
    receivers = await open_clients(server, dialect, [f"r{run}-{i}" for i in range(k)], tally)
    if cfg.rcvlowat:
        for c in receivers:
            c.set_rcvlowat(cfg.rcvlowat)
    names = [f"s{run}-{j}" for j in range(cfg.senders)]
    sender_clients = await open_clients(server, dialect, names, Tally(), role="sender")
    senders = [
        FloodSender(client, dialect, name, cfg.inflight)
        for client, name in zip(sender_clients, names, strict=True)
    ]
    try:
        await asyncio.sleep(0.3)  # let join-time presence and history frames drain
        for s in senders:
            s.start()
        await asyncio.sleep(cfg.warmup_s)
        d0, a0, r0 = tally.delivered, sum(s.acked for s in senders), tally.chunks
        c0 = tally.closed + sum(s.echoes.closed for s in senders)
        t0 = Sample.take(server)
        await asyncio.sleep(cfg.window_s)
        t1 = Sample.take(server)
        d1, a1, r1 = tally.delivered, sum(s.acked for s in senders), tally.chunks
        c1 = tally.closed + sum(s.echoes.closed for s in senders)
    finally:
        for s in senders:
            s.running = False
        await close_clients(sender_clients)
        await close_clients(receivers)
    wall = t1.wall - t0.wall
    msgs = (a1 - a0) / wall
    deliveries = (d1 - d0) / wall
    return ThroughputResult(
        k=k,
        deliveries_per_s=deliveries,
        msgs_per_s=msgs,
        delivered_fraction=deliveries / (msgs * k) if msgs else 0.0,
        server_cpu=(t1.server_cpu - t0.server_cpu) / wall,
        gen_cpu=(t1.gen_cpu - t0.gen_cpu) / wall,
        window_s=wall,
        other_cpu=t0.other(t1),
        gen_sys=(t1.gen_sys - t0.gen_sys) / wall,
        frames_per_read=(d1 - d0) / (r1 - r0) if r1 > r0 else 0.0,
        disconnects=c1 - c0,
        sender_errors=sum(s.errors for s in senders),
        first_error=next((s.first_error for s in senders if s.first_error), ""),
        aux_cpu=t0.aux_cores(t1),
        server_cpu_parts=t0.parts_cores(t1),
    )


def _percentile(sorted_values: Sequence[int], q: float) -> float:
    if not sorted_values:
        return float("nan")
    idx = min(len(sorted_values) - 1, max(0, round(q * (len(sorted_values) - 1))))
    return sorted_values[idx] / 1e6


async def latency_run(server: Endpoint, dialect: str, cfg: Config) -> LatencyResult:
    """Paced senders at ``cfg.latency_rate`` msgs/s; a sample of receivers parse timestamps."""
    tally = Tally()
    k = cfg.latency_k
    receivers = await open_clients(server, dialect, [f"l-{i}" for i in range(k)], tally)
    samples: list[int] = []
    window = [1 << 62, 1 << 62]
    step = max(1, k // cfg.latency_samplers)
    bad: list[str] = []
    for client in receivers[::step][: cfg.latency_samplers]:
        client.handler = LatencyProbe(dialect, samples, window, bad)
    n_senders = 2
    names = [f"ls-{j}" for j in range(n_senders)]
    sender_clients = await open_clients(server, dialect, names, Tally(), role="sender")
    senders = [PacedSender(c, dialect, n) for c, n in zip(sender_clients, names, strict=True)]
    for client in sender_clients:
        client.counting = False  # senders ignore what they receive
    loop = asyncio.get_running_loop()
    interval = 1.0 / cfg.latency_rate
    stop = False
    sent_in_window = 0

    async def pace() -> None:
        nonlocal sent_in_window
        i = 0
        next_t = loop.time()
        while not stop:
            now = loop.time()
            while next_t <= now:
                senders[i % n_senders].send_one()
                if window[0] <= time.monotonic_ns() < window[1]:
                    sent_in_window += 1
                i += 1
                next_t += interval
            await asyncio.sleep(max(0.0, next_t - loop.time()))

    pacer: asyncio.Task[None] | None = None
    try:
        await asyncio.sleep(0.3)
        pacer = asyncio.create_task(pace())
        await asyncio.sleep(cfg.latency_warmup_s)
        c0 = tally.closed
        window[0] = time.monotonic_ns()
        t0 = Sample.take(server)
        await asyncio.sleep(cfg.latency_window_s)
        t1 = Sample.take(server)
        window[1] = time.monotonic_ns()
        await asyncio.sleep(0.5)  # let messages sent at the end of the window arrive
        stop = True
        await pacer
        c1 = tally.closed
    finally:
        stop = True
        if pacer is not None and not pacer.done():
            pacer.cancel()
        await close_clients(sender_clients)
        await close_clients(receivers)
    wall = t1.wall - t0.wall
    samples.sort()
    return LatencyResult(
        k=k,
        rate_target=cfg.latency_rate,
        rate_actual=sent_in_window / ((window[1] - window[0]) / 1e9),
        samples=len(samples),
        p50_ms=_percentile(samples, 0.50),
        p90_ms=_percentile(samples, 0.90),
        p99_ms=_percentile(samples, 0.99),
        max_ms=samples[-1] / 1e6 if samples else float("nan"),
        server_cpu=(t1.server_cpu - t0.server_cpu) / wall,
        gen_cpu=(t1.gen_cpu - t0.gen_cpu) / wall,
        other_cpu=t0.other(t1),
        disconnects=c1 - c0,
        malformed=len(bad),
        first_malformed=bad[0] if bad else "",
        aux_cpu=t0.aux_cores(t1),
    )


async def idle_run(server: Endpoint, dialect: str, cfg: Config) -> IdleResult:
    """RSS per idle, identified connection joined to #general; time to connect and join."""
    warm = await open_clients(server, dialect, ["warm-0", "warm-1"], Tally())
    await close_clients(warm)
    await asyncio.sleep(0.5)
    rss0 = server.rss_bytes()
    tally = Tally()
    gc.collect()
    t0 = Sample.take(server)
    names = [f"i{i}" for i in range(cfg.idle_n)]
    clients, errors = await _open(
        server, dialect, names, tally, CONNECT_CONCURRENCY, cfg.idle_deadline_s
    )
    t1 = Sample.take(server)
    elapsed = t1.wall - t0.wall
    if errors:
        await close_clients(clients)
        raise RuntimeError(
            f"{len(errors)} of {len(names)} connections failed; first: {errors[0]!r}"
        )
    joined = len(clients)
    if not joined:
        raise RuntimeError(f"no connection joined within {cfg.idle_deadline_s:.0f} s")
    try:
        await asyncio.sleep(1.5)  # coalesced presence fan-out settles
        rss1 = server.rss_bytes()
        closed = sum(1 for c in clients if c.closed.done())
    finally:
        await close_clients(clients, timeout=15.0)
    return IdleResult(
        n=cfg.idle_n,
        joined=joined,
        connect_join_s=elapsed,
        rss_before_mib=rss0 / 2**20,
        rss_after_mib=rss1 / 2**20,
        kib_per_conn=(rss1 - rss0) / 1024 / joined,
        server_cpu=(t1.server_cpu - t0.server_cpu) / elapsed,
        gen_cpu=(t1.gen_cpu - t0.gen_cpu) / elapsed,
        other_cpu=t0.other(t1),
        received_mib=tally.nbytes / 2**20,
        disconnects=closed,
    )


@dataclass
class Measured:
    """Throughput runs per K, the latency run and the idle run of one server configuration."""

    throughput: dict[int, list[ThroughputResult]] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    latency: LatencyResult | None = None
    idle: IdleResult | None = None

    def median(self, k: int) -> ThroughputResult | None:
        """The run with the median deliveries/s (the lower middle one for an even count)."""
        runs = sorted(self.throughput.get(k, []), key=lambda r: r.deliveries_per_s)
        return runs[(len(runs) - 1) // 2] if runs else None

    def spread(self, k: int) -> float | None:
        """(max - min) / median of deliveries/s over the runs of ``k``."""
        values = [r.deliveries_per_s for r in self.throughput.get(k, [])]
        if len(values) < 2:
            return None
        med = statistics.median(values)
        return (max(values) - min(values)) / med if med else None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"throughput": {}, "errors": self.errors}
        for k, runs in self.throughput.items():
            med = self.median(k)
            out["throughput"][str(k)] = {
                "runs": [r.to_json() for r in runs],
                "median_deliveries_per_s": med.deliveries_per_s if med else None,
                "spread": self.spread(k),
            }
        out["latency"] = self.latency.to_json() if self.latency else None
        out["idle"] = self.idle.to_json() if self.idle else None
        return out
