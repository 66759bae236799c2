"""Coordination-engine benchmark: callback timing and memory, and floor-control yields.

Usage::

    .venv/bin/python benchmarks/engines.py [--quick] [--json out.json]

Each measurement runs against a fresh ``python -m hubbub serve --rate-limit 0`` subprocess
(this repository's ``src`` first on ``PYTHONPATH``; the default SQLite store, so every pending
callback is also persisted) with MEW clients on the fan-out benchmark's light raw WebSocket
client, many per task, in this process:

1. **Callback fire lateness**: 1,000 agents schedule 10 callbacks each, one message per
   callback (``k<i> @@cb:Ns@@c<i>``, a DM to themselves; N uniform in 5–20 s, so scheduling
   ends before the first is due and 10,000 are pending), and time each ``@@cb-fire@@c<i>`` at
   its agent. Lateness is arrival − (the gateway's timestamp of the scheduling message + N):
   the echo of ``k<i>`` carries a ULID stamped when the gateway handled the message, just
   before it computed the due time, so this bounds fire error plus delivery from above within
   1 ms. The looser arrival − (send + N) is shown too; it also counts the time the message
   queued in the gateway during the scheduling burst. Target: p99 ≤ 15 ms, and every callback
   fires exactly once, to its agent.
2. **Memory**: server RSS with 2,000 agents connected and no callbacks, then with 50 pending
   callbacks each (100,000, due in 3,000–3,500 s; the server runs with
   ``AGENTCHAT_CB_MAX_PER_SPACE`` raised to hold them, over its default 10,000). Target: the
   difference ≤ 60 MB. The count
   is checked against ``GET /participants``; the engine's own structures are also measured
   in-process with tracemalloc, as a floor under the RSS figure.
3. **Floor**: 20 agents and 1 person in ``#general``; per round the person asks, and once every
   agent has the message, all 20 send ``floor/responding-to`` at once (written back to back
   by this process) with random ``started_at`` between the message's timestamp and now.
   Measured: last claim sent → last ``floor/yield`` received; checked: exactly the 19 agents
   other than the rightful holder (least ``(started_at, id)``) got a yield. Target: p99 ≤ 10 ms.

The load generator and the server share this machine's cores; on the project's 2-core machine
the timings therefore include competition between them. Other processes are measured too:
without ``--quick`` a timing run during which they used more than 0.3 cores is run once more
and the less disturbed run is kept (chosen by interference, not by result); a warning says so.
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import json
import math
import os
import platform
import random
import signal
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any, TypeVar

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from _engines.scenarios import (
    CallbackConfig,
    CallbackResult,
    FloorConfig,
    FloorResult,
    MemoryConfig,
    MemoryResult,
    callback_run,
    floor_run,
    memory_run,
)
from _fanout.servers import (
    ServerProc,
    hubbub_runnable,
    raise_nofile_limit,
    stop_all,
)

R = TypeVar("R")

TARGET_LATE_P99_MS = 15.0
TARGET_MEMORY_MB = 60.0  # MB = 10^6 bytes, for 100,000 pending callbacks
TARGET_FLOOR_P99_MS = 10.0
BUSY_OTHER_CPU = 0.3
"""Cores used by other processes (or stolen by the host) above which a run counts as disturbed."""
REFERENCE = (
    "the server these documents come from polls once a second and fired a 1.5 s callback "
    "after 2.3 s"
)
ENGINE_ENV = {
    # the documents' defaults, set explicitly so the caller's environment does not leak in
    "AGENTCHAT_CB_MAX_DURATION_S": "3600",
    "AGENTCHAT_CB_MAX_PER_AGENT": "50",
    "AGENTCHAT_CB_MAX_PAYLOAD": "500",
    "AGENTCHAT_CB_POLL_MS": "1000",
    "AGENTCHAT_CB_GRACE_S": "30",
    "AGENTCHAT_RESPOND_ENABLED": "true",
    "AGENTCHAT_RESPOND_TTL_MS": "45000",
}


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


@dataclass
class Plan:
    callbacks: CallbackConfig
    memory: MemoryConfig
    floor: FloorConfig
    run_callbacks: bool = True
    run_memory: bool = True
    run_floor: bool = True
    seed: int = 1
    quick: bool = False
    retry_busy: bool = True


@dataclass
class Results:
    callbacks: CallbackResult | None = None
    memory: MemoryResult | None = None
    floor: FloorResult | None = None
    errors: dict[str, str] = field(default_factory=dict)


def engine_server(per_agent: int = 50, total: int = 0) -> ServerProc:
    """A hubbub subprocess with the documents' engine settings, the pending limits raised
    where a run needs more: ``per_agent`` over the default 50 per agent, ``total`` over the
    default 10,000 per space (the memory run holds 100,000)."""
    server = ServerProc.hubbub()
    assert server.env is not None
    server.env.update(ENGINE_ENV)
    server.env["AGENTCHAT_CB_MAX_PER_AGENT"] = str(max(50, per_agent))
    server.env["AGENTCHAT_CB_MAX_PER_SPACE"] = str(max(10_000, total))
    return server


async def with_server(
    label: str,
    results: Results,
    body: Callable[[ServerProc], Awaitable[R]],
    per_agent: int = 50,
    total: int = 0,
) -> R | None:
    """Run ``body`` against a fresh server; record (not raise) a failure under ``label``."""
    server = engine_server(per_agent, total)
    started = time.monotonic()
    try:
        await server.start()
        out = await body(server)
        if not server.alive():
            raise RuntimeError(f"the server exited:\n{server.log_tail()}")
        return out
    except Exception as exc:  # one failed measurement must not lose the others
        text = str(exc) or repr(exc)
        results.errors[label] = text
        log(f"  !! {label}: {text.splitlines()[0]}")
        tail = server.log_tail(15)
        if tail:
            log("     server log tail:\n" + "\n".join("       " + ln for ln in tail.splitlines()))
        return None
    finally:
        if not server.stop():
            log(f"  ({label}: server did not exit within 3 s of SIGTERM; killed)")
        log(f"  ({label}: {time.monotonic() - started:.1f} s)")


async def run(plan: Plan) -> Results:
    nofile = raise_nofile_limit()
    need = max(plan.callbacks.agents, plan.memory.agents) + 100
    if nofile < need:
        raise SystemExit(
            f"RLIMIT_NOFILE is {nofile}, the benchmark needs about {need} descriptors: "
            "raise the hard limit (ulimit -Hn) or run with fewer agents"
        )
    ok, why = hubbub_runnable()
    if not ok:
        raise SystemExit(f"cannot run `python -m hubbub serve`: {why}")
    rng = random.Random(plan.seed)
    res = Results()
    if plan.run_callbacks:
        c = plan.callbacks
        log(
            f"callbacks: {c.agents} agents x {c.per_agent}, delays "
            f"{c.delay_min_s:g}-{c.delay_max_s:g} s"
        )
        res.callbacks = await with_server(
            "callbacks", res, lambda s: callback_run(s, plan.callbacks, rng), c.per_agent
        )
        c1 = res.callbacks
        if plan.retry_busy and c1 is not None and c1.other_cpu > BUSY_OTHER_CPU:
            log(f"  (other processes used {c1.other_cpu:.2f} cores meanwhile: running it again)")
            c2 = await with_server(
                "callbacks", res, lambda s: callback_run(s, plan.callbacks, rng), c.per_agent
            )
            # keep the less disturbed run (chosen by interference, not by result)
            if c2 is not None and c2.other_cpu < c1.other_cpu:
                res.callbacks = c2
    if plan.run_memory:
        m = plan.memory
        log(f"memory: {m.agents} agents x {m.per_agent} pending callbacks")
        res.memory = await with_server(
            "memory",
            res,
            lambda s: memory_run(s, plan.memory, rng),
            m.per_agent,
            m.agents * m.per_agent,
        )
    if plan.run_floor:
        log(f"floor: {plan.floor.agents} agents + 1 person, {plan.floor.rounds} rounds")
        res.floor = await with_server("floor", res, lambda s: floor_run(s, plan.floor, rng))
        f1 = res.floor
        if plan.retry_busy and f1 is not None and f1.other_cpu > BUSY_OTHER_CPU:
            log(f"  (other processes used {f1.other_cpu:.2f} cores meanwhile: running it again)")
            f2 = await with_server("floor", res, lambda s: floor_run(s, plan.floor, rng))
            if f2 is not None and f2.other_cpu < f1.other_cpu:
                res.floor = f2
    return res


# -- report -----------------------------------------------------------------------------------


def _verdict(ok: bool | None) -> str:
    return "n/a" if ok is None else ("PASS" if ok else "FAIL")


def _num(x: float, fmt: str = "{:.2f}") -> str:
    return "-" if math.isnan(x) else fmt.format(x)


def render(plan: Plan, res: Results) -> tuple[str, bool]:
    """The report table and whether every target measured passed."""
    rows: list[tuple[str, str, str, str]] = []
    notes: list[str] = []
    verdicts: list[bool] = []

    def row(what: str, measured: str, target: str, ok: bool | None) -> None:
        rows.append((what, measured, target, _verdict(ok)))
        if ok is not None:
            verdicts.append(ok)

    c = res.callbacks
    if c is not None:
        late_ok = c.timed > 0 and c.p99_ms <= TARGET_LATE_P99_MS
        row(
            f"callback lateness, {c.scheduled:,} pending ({c.agents:,} agents), p50/p99/max",
            f"{_num(c.p50_ms)} / {_num(c.p99_ms)} / {_num(c.max_ms)} ms",
            f"p99 ≤ {TARGET_LATE_P99_MS:g} ms",
            late_ok,
        )
        row(
            "  the same from the client's send (incl. queueing while scheduling)",
            f"{_num(c.send_p50_ms)} / {_num(c.send_p99_ms)} / {_num(c.send_max_ms)} ms",
            "(upper bound)",
            None,
        )
        all_ok = c.fired == c.scheduled and c.duplicates == 0 and c.misrouted == 0 and c.errors == 0
        row(
            "callbacks fired (exactly once, to their agent)",
            f"{c.fired:,} / {c.scheduled:,}"
            + (f", {c.duplicates} twice" if c.duplicates else "")
            + (f", {c.misrouted} misrouted" if c.misrouted else "")
            + (f", {c.errors} error frames" if c.errors else ""),
            "all",
            all_ok,
        )
        notes.append(
            f"callbacks: scheduled in {c.schedule_s:.2f} s, the first was due "
            f"{c.first_due_after_s:.2f} s after scheduling ended; while they fired the server "
            f"used {c.server_cpu:.2f} cores, the load generator {c.gen_cpu:.2f}, other "
            f"processes {c.other_cpu:.2f}; "
            f"p90 {_num(c.p90_ms)} ms, mean {_num(c.mean_ms)} ms; lateness = arrival at the "
            "agent − (the gateway's timestamp of the scheduling message + delay)"
            + (f"; timed {c.timed:,} of {c.fired:,} fires" if c.timed != c.fired else "")
        )
        if c.other_cpu > BUSY_OTHER_CPU:
            notes.append(
                "  WARNING: other processes were busy while callbacks fired: the timings are "
                "disturbed; re-run on a quiet machine"
            )
        if c.first_due_after_s <= 0:
            notes.append("  WARNING: scheduling overlapped the first fires; widen the window")
        if c.first_error:
            notes.append(f"  first error frame: {c.first_error}")
    elif plan.run_callbacks:
        row("callback lateness", "not measured", f"p99 ≤ {TARGET_LATE_P99_MS:g} ms", False)

    m = res.memory
    if m is not None:
        mb = m.delta_mib * 1024 * 1024 / 1e6
        counted = m.pending == m.sent and m.errors == 0
        at_target = m.sent == 100_000
        row(
            f"server memory for {m.pending:,} pending callbacks (RSS delta)",
            f"{mb:.1f} MB ({m.bytes_per_callback:.0f} B each)",
            f"≤ {TARGET_MEMORY_MB:g} MB" if at_target else "(target is for 100,000)",
            (counted and mb <= TARGET_MEMORY_MB) if at_target else None,
        )
        notes.append(
            f"memory: RSS {m.rss_connected_mib:.1f} MiB with {m.agents:,} agents connected, "
            f"{m.rss_scheduled_mib:.1f} MiB with {m.pending:,} of {m.sent:,} callbacks pending "
            f"(scheduled in {m.schedule_s:.1f} s; SQLite store, each callback persisted too); "
            f"the engine's own structures hold {m.engine_bytes_per_callback:.0f} B per "
            "callback (tracemalloc, in-process)"
        )
        if not counted:
            notes.append(
                f"  WARNING: {m.pending} pending of {m.sent} sent, {m.errors} error frames"
                + (f"; first: {m.first_error}" if m.first_error else "")
            )
    elif plan.run_memory:
        row("server memory for pending callbacks", "not measured", "≤ 60 MB", False)

    f = res.floor
    if f is not None:
        row(
            f"floor: last claim → last YIELD, {f.agents} agents, p50/p99/max",
            f"{_num(f.p50_ms)} / {_num(f.p99_ms)} / {_num(f.max_ms)} ms",
            f"p99 ≤ {TARGET_FLOOR_P99_MS:g} ms",
            f.p99_ms <= TARGET_FLOOR_P99_MS,
        )
        row(
            f"floor: rounds where exactly the {f.agents - 1} losers got YIELD",
            f"{f.correct_rounds} / {f.rounds}",
            "all",
            f.correct_rounds == f.rounds and f.errors == 0,
        )
        notes.append(
            f"floor: first claim → last YIELD p99 {_num(f.from_first_p99_ms)} ms; the "
            f"{f.agents} claims are written within {_num(f.send_spread_p50_us, '{:.0f}')} µs "
            f"(median); server {f.server_cpu:.2f} cores, load generator {f.gen_cpu:.2f}, "
            f"other processes {f.other_cpu:.2f}"
        )
        if f.other_cpu > BUSY_OTHER_CPU:
            notes.append(
                "  WARNING: other processes were busy during the rounds: the timings are "
                "disturbed; re-run on a quiet machine"
            )
        if f.first_problem:
            notes.append(f"  first problem: {f.first_problem}")
        if f.first_error:
            notes.append(f"  first error frame: {f.first_error}")
    elif plan.run_floor:
        row("floor yields", "not measured", f"p99 ≤ {TARGET_FLOOR_P99_MS:g} ms", False)

    head = ("measure", "result", "target", "verdict")
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(4)]
    lines = [
        "hubbub coordination engines"
        + (" (--quick)" if plan.quick else "")
        + f" — Python {platform.python_version()}, {os.cpu_count()} cores; the load "
        "generator (this process) and the server share them, so timings include their "
        "competition",
        "",
        "  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)),
        "  ".join("-" * w for w in widths),
    ]
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)) for r in rows]
    lines += ["", *notes]
    for label, text in res.errors.items():
        parts = [ln.strip() for ln in text.splitlines() if ln.strip()] or ["?"]
        why = parts[0] if len(parts) == 1 else f"{parts[0]} … {parts[-1]}"
        lines.append(f"{label}: FAILED: {why}")
    lines += ["", f"For comparison: {REFERENCE}."]
    return "\n".join(lines), bool(verdicts) and all(verdicts) and not res.errors


def to_json(plan: Plan, res: Results) -> dict[str, Any]:
    return {
        "meta": {
            "python": platform.python_version(),
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "quick": plan.quick,
            "seed": plan.seed,
            "config": {
                "callbacks": vars(plan.callbacks),
                "memory": vars(plan.memory),
                "floor": vars(plan.floor),
            },
        },
        "callbacks": res.callbacks.to_json() if res.callbacks else None,
        "memory": res.memory.to_json() if res.memory else None,
        "floor": res.floor.to_json() if res.floor else None,
        "errors": res.errors,
    }


# -- command line -----------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> tuple[Plan, str | None]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument(
        "--quick", action="store_true", help="shorter windows, 50 floor rounds (under 2 min)"
    )
    p.add_argument("--json", metavar="PATH", help="also write every number to PATH")
    p.add_argument(
        "--only",
        choices=["callbacks", "memory", "floor"],
        action="append",
        help="run only this measurement (repeatable)",
    )
    p.add_argument("--cb-agents", type=int, default=1000, help="callback test agents [1000]")
    p.add_argument("--cb-per-agent", type=int, default=10, help="callbacks per agent [10]")
    p.add_argument("--mem-agents", type=int, default=2000, help="memory test agents [2000]")
    p.add_argument("--mem-per-agent", type=int, default=50, help="pending per agent [50]")
    p.add_argument("--floor-rounds", type=int, help="floor rounds [200; 50 with --quick]")
    p.add_argument("--seed", type=int, default=1, help="random seed for delays and claims [1]")
    p.add_argument(
        "--no-retry",
        action="store_true",
        help="keep a timing run even when other processes used the CPU during it (default "
        "without --quick: run it once more and keep the less disturbed one)",
    )
    a = p.parse_args(argv)
    cb = CallbackConfig(agents=a.cb_agents, per_agent=a.cb_per_agent)
    if a.quick:
        cb.delay_min_s, cb.delay_max_s = 4.0, 12.0
    fl = FloorConfig(rounds=a.floor_rounds or (50 if a.quick else 200))
    mem = MemoryConfig(agents=a.mem_agents, per_agent=a.mem_per_agent)
    only = set(a.only or ["callbacks", "memory", "floor"])
    plan = Plan(
        callbacks=cb,
        memory=mem,
        floor=fl,
        run_callbacks="callbacks" in only,
        run_memory="memory" in only,
        run_floor="floor" in only,
        seed=a.seed,
        quick=a.quick,
        retry_busy=not (a.no_retry or a.quick),
    )
    return plan, a.json


def _interrupt(_signum: int, _frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    plan, json_path = parse_args(argv)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _interrupt)
    atexit.register(stop_all)
    started = time.monotonic()
    try:
        res = asyncio.run(run(plan))
    except KeyboardInterrupt:
        log("interrupted")
        return 130
    text, ok = render(plan, res)
    print(text)
    log(f"({time.monotonic() - started:.0f} s)")
    if json_path:
        Path(json_path).write_text(json.dumps(to_json(plan, res), indent=2, default=str) + "\n")
        log(f"wrote {json_path}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
