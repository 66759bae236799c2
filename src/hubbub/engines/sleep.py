"""Sleep/wake (document 004): agents put themselves to sleep with ``@@sleep:Ns[:mode]@@``.

While asleep, what reaches a participant depends on the mode: ``default`` drops channel
messages and buffers direct ones (DMs, and channel messages that mention or address the
sleeper), ``buffer`` buffers everything, ``drop`` drops everything. The buffer keeps the
newest ``max_buffer`` messages. One sleep at a time: a new sleep replaces the current one and
keeps its buffer. Wake-ups are armed on the shared timer queue.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Generic, Literal, TypeVar

from hubbub.engines.timers import TimerQueue
from hubbub.protocol.markers import SleepMode, clamp_duration

T = TypeVar("T")
Verdict = Literal["deliver", "buffer", "drop"]


@dataclass(slots=True)
class SleepEntry(Generic[T]):
    """One sleeping participant."""

    participant: str
    wake_at: float
    mode: SleepMode
    created_ms: float
    buffer: deque[T] = field(default_factory=deque)
    dropped: int = 0


class SleepEngine(Generic[T]):
    """Sleeping participants of one space and their buffered messages."""

    def __init__(
        self,
        timers: TimerQueue,
        *,
        max_duration_s: float = 3600,
        max_buffer: int = 50,
        scope: str = "",
    ) -> None:
        self.timers = timers
        self.max_duration_s = max_duration_s
        self.max_buffer = max_buffer
        self.scope = scope
        self._sleeping: dict[str, SleepEntry[T]] = {}

    def __len__(self) -> int:
        return len(self._sleeping)

    def __contains__(self, participant: object) -> bool:
        return participant in self._sleeping

    def entry(self, participant: str) -> SleepEntry[T] | None:
        """The participant's sleep, if it is asleep."""
        return self._sleeping.get(participant)

    def sleepers(self) -> list[SleepEntry[T]]:
        """Every sleeping participant (for observers)."""
        return list(self._sleeping.values())

    def timer_key(self, participant: str) -> tuple[str, str, str]:
        """The timer-queue key of a participant's wake-up."""
        return (self.scope, "wake", participant)

    def sleep(
        self, now: float, participant: str, seconds: float, mode: SleepMode = "default"
    ) -> SleepEntry[T]:
        """Put ``participant`` to sleep (clamped to the maximum by :func:`clamp_duration`,
        which raises ValueError for NaN or a negative duration), replacing any current sleep."""
        seconds = clamp_duration(seconds, self.max_duration_s)
        old = self._sleeping.get(participant)
        entry: SleepEntry[T] = SleepEntry(
            participant,
            now + seconds * 1000,
            mode,
            now,
            old.buffer if old else deque(maxlen=self.max_buffer),
            old.dropped if old else 0,
        )
        self._sleeping[participant] = entry
        self.timers.arm(self.timer_key(participant), entry.wake_at)
        return entry

    def verdict(self, participant: str, *, direct: bool) -> Verdict:
        """What happens to a message for ``participant``: deliver, buffer or drop."""
        entry = self._sleeping.get(participant)
        if entry is None:
            return "deliver"
        if entry.mode == "drop" or (entry.mode == "default" and not direct):
            return "drop"
        return "buffer"

    def offer(self, participant: str, item: T, *, direct: bool) -> Verdict:
        """Apply the verdict: a buffered item is kept (the oldest goes when full)."""
        verdict = self.verdict(participant, direct=direct)
        if verdict == "buffer":
            entry = self._sleeping[participant]
            if len(entry.buffer) == self.max_buffer:
                entry.dropped += 1
            entry.buffer.append(item)
        return verdict

    def wake(self, participant: str) -> SleepEntry[T] | None:
        """End the sleep (timer fired or the sleeper spoke); returns it with its buffer."""
        entry = self._sleeping.pop(participant, None)
        if entry is not None:
            self.timers.cancel(self.timer_key(participant))
        return entry

    def forget(self, participant: str) -> bool:
        """The sleeper disconnected: cancel the sleep and discard the buffer."""
        return self.wake(participant) is not None
