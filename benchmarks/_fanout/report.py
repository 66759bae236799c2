"""Targets, PASS/FAIL verdicts and the printed tables."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from _fanout.scenarios import Config, IdleResult, LatencyResult, Measured, ThroughputResult

LATENCY_P99_MS = 5.0
RSS_KIB_PER_CONN = 20.0
CONNECT_JOIN_S = 15.0

BUSY_OTHER_CPU = 0.25
"""Cores used by other processes during a window above which a result is flagged as noisy."""


def ratio_target(k: int) -> float:
    """Required fraction of the batching ceiling: 0.7x for small fan-out (K < 100), else 0.8x."""
    return 0.7 if k < 100 else 0.8


PER_FRAME = ("write", "send_str")
"""The techniques writing each frame on its own (the per-frame ceiling is the faster one)."""


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def _n(x: float) -> str:
    return f"{x:,.0f}" if math.isfinite(x) else "-"


def run_line(r: ThroughputResult) -> str:
    extra = f", {r.disconnects} disconnects" if r.disconnects else ""
    extra += f", {r.sender_errors} send errors" if r.sender_errors else ""
    return (
        f"{_n(r.deliveries_per_s)} deliveries/s ({_n(r.msgs_per_s)} msgs/s; "
        f"server {r.server_cpu:.2f} / loadgen {r.gen_cpu:.2f} / other "
        f"{max(0.0, r.other_cpu):.2f} cores{extra})"
    )


def latency_line(r: LatencyResult) -> str:
    return (
        f"p50 {r.p50_ms:.2f} ms, p90 {r.p90_ms:.2f} ms, p99 {r.p99_ms:.2f} ms, "
        f"max {r.max_ms:.1f} ms ({r.samples:,} samples at {r.rate_actual:.0f} msgs/s; "
        f"server {r.server_cpu:.2f} / loadgen {r.gen_cpu:.2f} cores)"
    )


def idle_line(r: IdleResult) -> str:
    partial = "" if r.joined == r.n else f" (only {r.joined:,} joined before the deadline)"
    return (
        f"{r.n:,} connections{partial}: {r.kib_per_conn:.1f} KiB RSS each "
        f"({r.rss_before_mib:.1f} -> {r.rss_after_mib:.1f} MiB); "
        f"connect+join {r.connect_join_s:.2f} s (server {r.server_cpu:.2f} / loadgen "
        f"{r.gen_cpu:.2f} / other {max(0.0, r.other_cpu):.2f} cores; "
        f"{r.received_mib:.1f} MiB received)"
    )


@dataclass
class Summary:
    text: str
    ceiling_per_k: dict[str, dict[str, Any]] = field(default_factory=dict)
    verdicts: dict[str, dict[str, Any]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def _all_runs(m: Measured) -> list[ThroughputResult]:
    return [r for runs in m.throughput.values() for r in runs]


def _warn_runs(label: str, m: Measured, warnings: list[str]) -> None:
    for k, runs in sorted(m.throughput.items()):
        for i, r in enumerate(runs, 1):
            where = f"{label} K={k} run {i}"
            if r.other_cpu > BUSY_OTHER_CPU:
                warnings.append(
                    f"{where}: other processes used {r.other_cpu:.2f} cores during the window "
                    "(busy machine: numbers are low and noisy)"
                )
            if r.gen_cpu >= 0.9 and r.server_cpu < 0.9:
                warnings.append(
                    f"{where}: load generator at {r.gen_cpu:.2f} cores while the server used "
                    f"{r.server_cpu:.2f}: the load generator may be the bottleneck"
                )
            if r.disconnects:
                warnings.append(f"{where}: {r.disconnects} connections closed during the window")
            if r.sender_errors:
                warnings.append(
                    f"{where}: {r.sender_errors} sends answered with an error, first: "
                    f"{r.first_error}"
                )
        spread = m.spread(k)
        if spread is not None and spread > 0.25:
            warnings.append(f"{label} K={k}: runs differ by {spread:.0%} of the median")
    for key, err in m.errors.items():
        warnings.append(f"{label} {key}: ERROR {err.splitlines()[0] if err else ''}")


def render(
    ks: list[int],
    ceiling: dict[str, Measured],
    hubbub: dict[str, Measured],
    cfg: Config,
    hubbub_ok: bool,
    hubbub_why: str,
) -> Summary:
    out: list[str] = []
    summary = Summary(text="")
    w = summary.warnings
    runs_word = f"median of {cfg.runs} runs" if cfg.runs > 1 else "1 run"
    out.append("")
    out.append(
        f"Fan-out to K receivers in #general: deliveries/s over a {cfg.window_s:g} s window "
        f"({runs_word}; {cfg.senders} senders x {cfg.inflight} msgs in flight)"
    )
    if cfg.runs == 1:
        out.append(
            "(single short runs: on a shared or virtual machine expect +/-30% per number; "
            "run without --quick for medians)"
        )
    out.append(
        "CPU columns are cores used during the window: srv = server process, "
        "gen = load generator (this process), other = rest of the machine; f/rd = frames "
        "per read at the receivers (near 1: they keep pace with the server)."
    )

    # -- ceiling -------------------------------------------------------------------------------
    ceil_by_k: dict[int, float] = {}
    per_frame_by_k: dict[int, float] = {}
    if ceiling:
        out.append("")
        out.append("Ceiling: bare aiohttp broadcast server (no validation, routing or storage)")
        header = f"  {'K':>5}  {'write()/s':>11}  {'send_str/s':>11}  {'batch/s':>11}"
        header += f"  {'srv':>5}  {'gen':>5}  {'other':>5}  {'f/rd':>5}  (batch: the ceiling)"
        out.append(header)
        for k in ks:
            meds = {t: m.median(k) for t, m in ceiling.items()}
            vals = {t: r.deliveries_per_s for t, r in meds.items() if r is not None}
            if not vals:
                out.append(f"  {k:>5}  {'ERROR':>11}")
                continue
            frame_vals = {t: v for t, v in vals.items() if t in PER_FRAME}
            if frame_vals:
                per_frame_by_k[k] = max(frame_vals.values())
            best = "batch" if "batch" in vals else max(vals, key=lambda t: vals[t])
            ceil_by_k[k] = vals[best]
            b = meds[best]
            assert b is not None
            summary.ceiling_per_k[str(k)] = {
                **vals,
                "ceiling": vals[best],
                "technique": best,
                "per_frame": per_frame_by_k.get(k),
            }
            out.append(
                f"  {k:>5}  {_n(vals.get('write', math.nan)):>11}  "
                f"{_n(vals.get('send_str', math.nan)):>11}  {_n(vals.get('batch', math.nan)):>11}"
                f"  {b.server_cpu:>5.2f}  {b.gen_cpu:>5.2f}  {max(0.0, b.other_cpu):>5.2f}"
                f"  {b.frames_per_read:>5.1f}"
            )
        for t, m in ceiling.items():
            _warn_runs(f"bare/{t}", m, w)
            if m.latency:
                out.append(f"  latency @ {cfg.latency_rate:.0f} msgs/s, K={m.latency.k} ({t}): ")
                out[-1] += latency_line(m.latency)
            if m.idle:
                out.append(f"  idle ({t}): {idle_line(m.idle)}")

    # -- hubbub --------------------------------------------------------------------------------
    if not hubbub_ok:
        out.append("")
        out.append(f"hubbub: not measured ({hubbub_why})")
    for dialect, m in hubbub.items():
        v: dict[str, Any] = {}
        summary.verdicts[dialect] = v
        out.append("")
        out.append(f"hubbub, {dialect} dialect")
        if ks:
            out.append(
                f"  {'K':>5}  {'deliv./s':>11}  {'msgs/s':>9}  {'ceiling/s':>11}  {'ratio':>6}"
                f"  {'target':>7}  {'result':>6}  {'srv':>5}  {'gen':>5}  {'other':>5}"
                f"  {'f/rd':>5}"
            )
        for k in ks:
            r = m.median(k)
            target = ratio_target(k)
            if r is None:
                out.append(f"  {k:>5}  {'ERROR':>11}  {m.errors.get(f'K={k}', '')[:60]}")
                v[f"K={k}"] = {"pass": False, "error": m.errors.get(f"K={k}", "")}
                continue
            ceil = ceil_by_k.get(k)
            ratio = r.deliveries_per_s / ceil if ceil else math.nan
            per_frame = per_frame_by_k.get(k)
            frame_ratio = r.deliveries_per_s / per_frame if per_frame else math.nan
            ok = bool(ceil) and ratio >= target
            v[f"K={k}"] = {
                "deliveries_per_s": r.deliveries_per_s,
                "ceiling": ceil,
                "ratio": ratio if ceil else None,
                "per_frame_ceiling": per_frame,
                "per_frame_ratio": frame_ratio if per_frame else None,
                "target_ratio": target,
                "pass": ok if ceil else None,
            }
            out.append(
                f"  {k:>5}  {_n(r.deliveries_per_s):>11}  {_n(r.msgs_per_s):>9}"
                f"  {_n(ceil or math.nan):>11}  {ratio:>5.2f}x  >={target:.1f}x"
                f"  {verdict(ok) if ceil else 'n/a':>6}  {frame_ratio:>6.2f}x"
                f"  {r.server_cpu:>5.2f}  {r.gen_cpu:>5.2f}"
                f"  {max(0.0, r.other_cpu):>5.2f}  {r.frames_per_read:>5.1f}"
            )
        _warn_runs(f"hubbub/{dialect}", m, w)

        lat = m.latency
        if lat is not None:
            ok = math.isfinite(lat.p99_ms) and lat.p99_ms <= LATENCY_P99_MS and lat.samples > 0
            v["latency"] = {
                "p50_ms": lat.p50_ms,
                "p99_ms": lat.p99_ms,
                "target_p99_ms": LATENCY_P99_MS,
                "pass": ok,
            }
            out.append(
                f"  latency @ {lat.rate_target:.0f} msgs/s, K={lat.k}: {latency_line(lat)}"
                f"  target p99 <= {LATENCY_P99_MS:.0f} ms: {verdict(ok)}"
            )
            if lat.rate_actual < 0.95 * lat.rate_target:
                w.append(f"hubbub/{dialect} latency: sent only {lat.rate_actual:.0f} msgs/s")
            if lat.disconnects:
                w.append(f"hubbub/{dialect} latency: {lat.disconnects} connections closed")
            if lat.other_cpu > BUSY_OTHER_CPU:
                w.append(
                    f"hubbub/{dialect} latency: other processes used {lat.other_cpu:.2f} cores "
                    "during the window (busy machine: tail latency is inflated)"
                )
            if lat.malformed:
                w.append(
                    f"hubbub/{dialect} latency: {lat.malformed} chat frames of unexpected shape, "
                    f"first: {lat.first_malformed}"
                )
        elif "latency" in m.errors:
            v["latency"] = {"pass": False, "error": m.errors["latency"]}
            out.append(f"  latency: ERROR {m.errors['latency'].splitlines()[0]}")

        idle = m.idle
        if idle is not None:
            rss_ok = idle.kib_per_conn <= RSS_KIB_PER_CONN
            conn_ok = idle.connect_join_s <= CONNECT_JOIN_S and idle.joined == idle.n
            v["idle_rss"] = {
                "kib_per_conn": idle.kib_per_conn,
                "target": RSS_KIB_PER_CONN,
                "pass": rss_ok,
            }
            v["idle_connect"] = {
                "seconds": idle.connect_join_s,
                "joined": idle.joined,
                "target": CONNECT_JOIN_S,
                "pass": conn_ok,
            }
            took = f"{idle.connect_join_s:.2f} s"
            if idle.joined < idle.n:
                took = f"> {idle.connect_join_s:.0f} s (only {idle.joined:,} joined)"
            out.append(
                f"  idle: {idle.n:,} joined connections: {idle.kib_per_conn:.1f} KiB RSS each "
                f"(target <= {RSS_KIB_PER_CONN:.0f}): {verdict(rss_ok)};  connect+join "
                f"{took} (target <= {CONNECT_JOIN_S:.0f} s): {verdict(conn_ok)}"
            )
            out.append(
                f"        server {idle.server_cpu:.2f} / loadgen {idle.gen_cpu:.2f} cores while "
                f"joining; {idle.received_mib:,.0f} MiB sent to the joining clients"
            )
            if idle.disconnects:
                w.append(f"hubbub/{dialect} idle: {idle.disconnects} connections closed")
        elif "idle" in m.errors:
            v["idle_rss"] = v["idle_connect"] = {"pass": False, "error": m.errors["idle"]}
            out.append(f"  idle: ERROR {m.errors['idle'].splitlines()[0]}")

    # -- verdict summary -----------------------------------------------------------------------
    if hubbub:
        passed = failed = 0
        for v in summary.verdicts.values():
            for item in v.values():
                if item.get("pass") is True:
                    passed += 1
                elif item.get("pass") is False:
                    failed += 1
        out.append("")
        out.append(
            f"Targets: {passed} PASS, {failed} FAIL  (ratio to the batching ceiling >= 0.8x for "
            f"K >= 100, >= 0.7x for K = 10; p99 <= {LATENCY_P99_MS:.0f} ms; "
            f"<= {RSS_KIB_PER_CONN:.0f} KiB/idle connection; 5,000 connect+join <= "
            f"{CONNECT_JOIN_S:.0f} s)"
        )
    if w:
        out.append("")
        out.append("Warnings:")
        out.extend(f"  - {line}" for line in w)
    summary.text = "\n".join(out)
    return summary
