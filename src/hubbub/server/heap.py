"""Give the C heap's free memory back to the system once the gateway is quiet again.

A burst of work — 5,000 clients joining, each sent every other's presence — allocates
gigabytes of short-lived frames. glibc keeps most of what they freed in its heap (it returns
only the top of it), so an idle gateway's RSS stayed ~3-4 KiB per connection above what its
live objects use (``docs/performance.md``, idle memory). Twice a second the gateway asks
:class:`QuietTrim` whether a busy spell has just ended (frames went out or connections came
and went since the last look, and none in the last half second); if so it calls glibc's
``malloc_trim(0)``, which hands the free pages back (about 0.3 ms when there is little to
return, tens of ms after a storm of hundreds of MiB). Under steady traffic it never runs, so
the fan-out does not pay page faults for memory handed back and taken again. Elsewhere than
glibc there is nothing to call and nothing happens.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import logging
from collections.abc import Callable

from hubbub.server.state.metrics import Metrics

log = logging.getLogger("hubbub.heap")

PERIOD_S = 0.5
"""How often the gateway looks whether a busy spell has ended."""


def _malloc_trim() -> Callable[[], object] | None:
    """glibc's ``malloc_trim(0)``, or None where the C library has none."""
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        fn = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_size_t]
    fn.restype = ctypes.c_int
    return lambda: fn(0)


class QuietTrim:
    """Decides, from the gateway's counters at each look, when a busy spell has ended."""

    def __init__(self) -> None:
        self._last: tuple[int, int] | None = None
        self._busy = False
        """Something happened since the last trim."""

    def due(self, frames_out: int, connections: int) -> bool:
        """Whether to trim now: the counters did not move since the previous look, and they
        had moved before it (since the last trim)."""
        now = (frames_out, connections)
        quiet = now == self._last
        if not quiet and self._last is not None:
            self._busy = True
        self._last = now
        if quiet and self._busy:
            self._busy = False
            return True
        return False


class HeapTrimmer:
    """Looks once a :data:`PERIOD_S` and trims the heap when :class:`QuietTrim` says so."""

    def __init__(self, metrics: Metrics, trim: Callable[[], object] | None = None) -> None:
        self.metrics = metrics
        self.trim = trim if trim is not None else _malloc_trim()
        self.decider = QuietTrim()
        self._handle: asyncio.TimerHandle | None = None

    def start(self) -> None:
        """Begin looking (nothing where there is no ``malloc_trim``)."""
        if self.trim is not None and self._handle is None:
            self._handle = asyncio.get_running_loop().call_later(PERIOD_S, self._look)

    def stop(self) -> None:
        """Stop looking."""
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _look(self) -> None:
        m = self.metrics
        if self.trim is not None and self.decider.due(m.messages_out, sum(m.connections.values())):
            self.trim()
        self._handle = asyncio.get_running_loop().call_later(PERIOD_S, self._look)
