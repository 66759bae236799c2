"""Coordination engines: floor control, the timer queue, callbacks and sleep/wake.

Each engine is sans-I/O: it takes events and the current time (milliseconds) and returns what
should happen; it never sleeps and never touches a socket. The gateway wires them in.
"""

from hubbub.engines.callbacks import Callback, CallbackEngine, CallbackRejected, Fired
from hubbub.engines.floor import Claim, ClaimRejected, FloorControl, FloorOutcome, Release
from hubbub.engines.sleep import SleepEngine, SleepEntry, Verdict
from hubbub.engines.timers import TimerQueue

__all__ = [
    "Callback",
    "CallbackEngine",
    "CallbackRejected",
    "Claim",
    "ClaimRejected",
    "Fired",
    "FloorControl",
    "FloorOutcome",
    "Release",
    "SleepEngine",
    "SleepEntry",
    "TimerQueue",
    "Verdict",
]
