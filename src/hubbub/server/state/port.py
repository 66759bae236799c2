"""A receiver's out-going queue, without I/O: what the gateway wrote to one receiver and its
driver has not taken yet, counted in bytes, with one slow-consumer policy.

Every receiver of the gateway's writes — a WebSocket connection, an ``/mcp`` session, a
cluster link, a test — has a :class:`Port`. Delivery only ever puts into ports (a frame in
the receiver's dialect, with the envelopes it was made from); a driver drains each port its
own way: the WebSocket writer writes the bytes to the socket, the ``/mcp`` seat hands the
envelopes to its desk (no encode, decode or frame in between), a test reads them.

The bound: a port holds the bytes queued here (:attr:`Port.queued`) plus those its driver
took but the receiver has not consumed yet (:attr:`Port.held`: a socket's write buffer, the
messages an ``/mcp`` session has not listened for). Past :attr:`Port.bound` the receiver is a
slow consumer, and the port's :class:`Overflow` policy applies:

- ``CLOSE``: the port closes (:attr:`Port.closed` says why); the driver ends the receiver (a
  WebSocket gets 1013 and is cut; an ``/mcp`` session ends and its next request is told why;
  a cluster link is dropped and its edge's clients resume elsewhere). It is judged when the
  driver settles (:meth:`Port.settle`, after each drain), so one loop turn's burst that the
  receiver takes at once is not a slow consumer.
- ``DROP_OLDEST``: the oldest queued items are dropped until the port fits again, at every
  :meth:`Port.put`; the port counts them as a gap (:meth:`Port.take_gap`) for the driver to
  tell the receiver, which then reads the missed range from history.

Nothing here does I/O or knows an event loop: the unit tests drive a port directly.
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeAlias

from hubbub.protocol.envelope import Envelope

Sent: TypeAlias = "Envelope | Sequence[Envelope] | None"
"""The envelopes a frame was made from (one, several in order, or None: raw bytes such as a
relayed stream frame)."""
Item: TypeAlias = "tuple[bytes, Sent]"


class Overflow(enum.Enum):
    """What a port does once it holds more than its bound (module docstring)."""

    CLOSE = "close"
    DROP_OLDEST = "drop_oldest"


@dataclass(frozen=True, slots=True)
class Gap:
    """What a drop-oldest port dropped since the last :meth:`Port.take_gap`."""

    items: int
    """Frames dropped."""
    bytes: int
    """Their bytes."""
    first: Envelope | None
    """The first envelope dropped (the receiver names the missed range from it)..."""
    last: Envelope | None
    """... to the last."""


class Port:
    """One receiver's out-going frames (and, where its driver wants them, the envelopes
    they carry), their bytes, and its bound.

    A *plain* port — close policy, no envelopes kept (a WebSocket, a cluster link) — is put
    into by appending to :attr:`frames` alone (:meth:`Connection.send
    <hubbub.server.state.connection.Connection.send>` does so: the WebSocket write path stays
    one append per frame); its :attr:`queued` is counted when asked (at :meth:`settle`, after
    a drain, that is nothing). Every other port counts as it goes."""

    __slots__ = (
        "_gap_bytes",
        "_gap_first",
        "_gap_items",
        "_gap_last",
        "_queued",
        "bound",
        "closed",
        "frames",
        "held",
        "plain",
        "policy",
        "sent",
    )

    def __init__(
        self, bound: int, policy: Overflow = Overflow.CLOSE, *, envelopes: bool = False
    ) -> None:
        if bound <= 0:
            raise ValueError(f"a port's bound must be > 0 bytes, not {bound}")
        self.bound = bound
        self.policy = policy
        self.frames: deque[bytes] = deque()
        self.sent: deque[Sent] | None = deque() if envelopes else None
        """The envelopes of each frame in :attr:`frames` (None: not kept, a byte port)."""
        self.plain = policy is Overflow.CLOSE and not envelopes
        self._queued = 0
        self.held = 0
        """Bytes the driver took and the receiver has not consumed (its last :meth:`settle`)."""
        self.closed: str | None = None
        """Why the port closed (None: open)."""
        self._gap_items = 0
        self._gap_bytes = 0
        self._gap_first: Envelope | None = None
        self._gap_last: Envelope | None = None

    @property
    def queued(self) -> int:
        """Bytes of the queued frames."""
        return sum(map(len, self.frames)) if self.plain else self._queued

    @property
    def pending(self) -> int:
        """Bytes written to the receiver and not consumed yet: queued plus held."""
        return self.queued + self.held

    def put(self, data: bytes, sent: Sent = None) -> bool:
        """Queue one frame (``sent``: the envelopes it carries); False once the port is
        closed (nothing is queued then)."""
        if self.closed is not None:
            return False
        self.frames.append(data)
        if self.sent is not None:
            self.sent.append(sent)
        self._queued += len(data)
        if self.policy is Overflow.DROP_OLDEST and self._queued + self.held > self.bound:
            self._drop_oldest()
        return True

    def drain(self) -> list[Item]:
        """Take every queued frame with its envelopes, oldest first (the driver's turn)."""
        frames = self.frames
        sent = self.sent
        items: list[Item]
        if sent is not None:
            items = list(zip(frames, sent, strict=True))
        else:
            items = [(f, None) for f in frames]
        self._clear()
        return items

    def drain_bytes(self) -> bytes:
        """Take every queued frame as one buffer (a socket writer: one write per turn)."""
        frames = self.frames
        data = frames[0] if len(frames) == 1 else b"".join(frames)
        frames.clear()
        if not self.plain:
            self._clear()
        return data

    def _clear(self) -> None:
        self.frames.clear()
        if self.sent is not None:
            self.sent.clear()
        self._queued = 0

    def settle(self, held: int) -> bool:
        """The driver holds ``held`` bytes the receiver has not consumed (after a drain);
        False when that makes a close port a slow consumer (it is closed then)."""
        self.held = held
        if self.closed is not None:
            return False
        if self.plain and not self.frames and held <= self.bound:
            return True  # a socket writer's every turn: nothing queued, the socket keeps up
        if self.policy is Overflow.CLOSE:
            queued = self.queued
            if queued + held > self.bound:
                self.close(
                    f"slow consumer: {queued + held} bytes not taken, over the bound of "
                    f"{self.bound} bytes"
                )
                return False
        elif self._queued + held > self.bound:
            self._drop_oldest()
        return True

    def close(self, reason: str) -> bool:
        """Close the port (its queue is dropped); False when it was closed already."""
        if self.closed is not None:
            return False
        self.closed = reason
        self._clear()
        return True

    def take_gap(self) -> Gap | None:
        """What was dropped since the last call (None: nothing)."""
        if not self._gap_items:
            return None
        gap = Gap(self._gap_items, self._gap_bytes, self._gap_first, self._gap_last)
        self._gap_items = self._gap_bytes = 0
        self._gap_first = self._gap_last = None
        return gap

    def _drop_oldest(self) -> None:
        frames, sent = self.frames, self.sent
        while frames and self._queued + self.held > self.bound:
            data = frames.popleft()
            carried = sent.popleft() if sent is not None else None
            self._queued -= len(data)
            self._gap_items += 1
            self._gap_bytes += len(data)
            envs = (carried,) if isinstance(carried, Envelope) else carried or ()
            if envs:
                if self._gap_first is None:
                    self._gap_first = envs[0]
                self._gap_last = envs[-1]

    def __len__(self) -> int:
        return len(self.frames)
