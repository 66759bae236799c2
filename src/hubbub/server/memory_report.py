"""Opt-in memory diagnostic: where did the gateway's memory grow between two moments?

``HUBBUB_TRACEMALLOC=<frames>`` starts :mod:`tracemalloc` when the gateway boots (keeping
``<frames>`` stack frames per allocation; 1 is enough to name the line). Each ``SIGUSR1``
then logs one report: the process RSS, the memory Python traces, SQLite's own allocations and
glibc's heap, each with its change since the previous report, and the source lines whose
allocations grew the most. Nothing is served on a port. Tracing costs CPU and memory (the
soak's RSS read 17-70 % higher), and a report pauses the event loop while it takes its
snapshot (up to 2 s there), so this is for diagnosis, not for production.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import signal
import time
import tracemalloc
from collections.abc import Mapping
from dataclasses import dataclass

from hubbub.server.config import ConfigError

log = logging.getLogger("hubbub.memory")

ENV = "HUBBUB_TRACEMALLOC"
TOP_LINES = 25
"""Source lines listed per report, largest growth first."""
MAX_FRAMES = 100
_MIB = 2**20


def frames_from_env(environ: Mapping[str, str] = os.environ) -> int:
    """The stack frames per trace that ``HUBBUB_TRACEMALLOC`` asks for (0: off)."""
    raw = environ.get(ENV, "").strip()
    if raw in ("", "0"):
        return 0
    try:
        frames = int(raw)
    except ValueError:
        frames = -1
    if not 1 <= frames <= MAX_FRAMES:
        raise ConfigError(
            f"{ENV}={raw!r} is not a number of stack frames: set it to 1-{MAX_FRAMES} "
            "(1 names the allocating line) to trace allocations, or to 0 / unset for off"
        )
    return frames


@dataclass(frozen=True)
class Figures:
    """Process-wide memory figures in bytes (None where the platform does not say)."""

    rss: int | None
    traced: int
    """Python's allocations since tracing began, the diagnostic's own snapshots excluded."""
    sqlite: int | None
    malloc_in_use: int | None
    malloc_free: int | None

    @classmethod
    def now(cls, snapshot: tracemalloc.Snapshot) -> Figures:
        """The figures of this process at the moment of ``snapshot``."""
        in_use, free = _mallinfo()
        traced = sum(stat.size for stat in snapshot.statistics("filename"))
        return cls(_rss(), traced, sqlite_bytes(), in_use, free)


class MemoryReport:
    """Snapshots of the traced allocations; each report compares with the previous one."""

    def __init__(self, frames: int, top: int = TOP_LINES) -> None:
        if not tracemalloc.is_tracing():
            tracemalloc.start(frames)
        self.frames = frames
        self.top = top
        self.count = 0
        self._snapshot = self._take()
        self._figures = Figures.now(self._snapshot)
        self._at = time.monotonic()

    def _take(self) -> tracemalloc.Snapshot:
        return tracemalloc.take_snapshot().filter_traces(
            (
                tracemalloc.Filter(False, tracemalloc.__file__),
                tracemalloc.Filter(False, "<frozen importlib._bootstrap>"),
                tracemalloc.Filter(False, "<frozen importlib._bootstrap_external>"),
            )
        )

    def report(self) -> str:
        """Memory now, its change since the previous report, and the lines that grew most."""
        snapshot = self._take()
        figures, at = Figures.now(snapshot), time.monotonic()
        key = "traceback" if self.frames > 1 else "lineno"
        stats = snapshot.compare_to(self._snapshot, key)
        self.count += 1
        lines = [
            f"memory report #{self.count} ({at - self._at:.1f} s since the previous one): "
            + ", ".join(
                f"{name} {_mib(now)} ({_delta(now, before)})"
                for name, now, before in (
                    ("RSS", figures.rss, self._figures.rss),
                    ("Python traced", figures.traced, self._figures.traced),
                    ("SQLite", figures.sqlite, self._figures.sqlite),
                    ("malloc in use", figures.malloc_in_use, self._figures.malloc_in_use),
                    ("malloc free", figures.malloc_free, self._figures.malloc_free),
                )
            )
        ]
        for stat in stats[: self.top]:
            where = " <- ".join(f"{f.filename}:{f.lineno}" for f in stat.traceback)
            lines.append(
                f"  {stat.size_diff / _MIB:+8.3f} MiB {stat.count_diff:+8d} blocks"
                f"  now {stat.size / _MIB:7.3f} MiB  {where}"
            )
        self._snapshot, self._figures, self._at = snapshot, figures, at
        return "\n".join(lines)

    def log_report(self) -> None:
        """Write :meth:`report` to the ``hubbub.memory`` log."""
        log.info("%s", self.report())


def install_from_env(environ: Mapping[str, str] = os.environ) -> MemoryReport | None:
    """Start tracing and answer SIGUSR1 with a report when ``HUBBUB_TRACEMALLOC`` asks."""
    frames = frames_from_env(environ)
    if not frames:
        return None
    report = MemoryReport(frames)
    signal.signal(signal.SIGUSR1, lambda _sig, _frame: report.log_report())
    log.info(
        "%s=%d: tracing allocations; `kill -USR1 %d` logs where memory grew",
        ENV,
        frames,
        os.getpid(),
    )
    return report


def _mib(value: int | None) -> str:
    return "n/a" if value is None else f"{value / _MIB:.1f} MiB"


def _delta(now: int | None, before: int | None) -> str:
    return "n/a" if now is None or before is None else f"{(now - before) / _MIB:+.2f}"


def _rss() -> int | None:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def _load(name: str) -> ctypes.CDLL | None:
    path = ctypes.util.find_library(name)
    try:
        return ctypes.CDLL(path) if path else None
    except OSError:
        return None


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


_LIBC = _load("c")
_SQLITE = _load("sqlite3")


def _mallinfo() -> tuple[int | None, int | None]:
    """glibc's heap: bytes in use (including mmapped blocks) and bytes free inside it."""
    fn = getattr(_LIBC, "mallinfo2", None)
    if fn is None:
        return None, None
    fn.restype = _MallInfo2
    info = fn()
    return int(info.uordblks + info.hblkhd), int(info.fordblks)


def sqlite_bytes() -> int | None:
    """Bytes SQLite has allocated (page caches, statements) across its connections."""
    fn = getattr(_SQLITE, "sqlite3_memory_used", None)
    if fn is None:
        return None
    fn.restype = ctypes.c_int64
    return int(fn())
