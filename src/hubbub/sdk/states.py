"""The client's connection states, as one transition table (like h11's ``_state.py``).

Sans-I/O: :class:`ConnectionState` only says which transitions are legal; the client does the
I/O and reports what happened. When to reconnect is :mod:`hubbub.sdk.reconnect`'s.

```
                 DIAL             OPENED            JOIN_SENT          WELCOMED
  DISCONNECTED ───────► CONNECTING ───────► CONNECTED ───────► JOINED ───────► READY
        ▲                   │                   │                 │              │
        └───────────────────┴───── CLOSED ──────┴─────────────────┴──────────────┘
```

``READY`` means the gateway's welcome arrived *and* the channels asked for in the join frame
are joined (their ``channel/joined`` arrived), so that a message sent in ``READY`` can go to
them. A reconnect walks the same path again (``DIAL`` from ``DISCONNECTED``).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final


class State(StrEnum):
    """Where a client's connection is."""

    DISCONNECTED = "disconnected"
    CONNECTING = "connecting"
    CONNECTED = "connected"
    JOINED = "joined"
    READY = "ready"


class Event(StrEnum):
    """What happened to the connection."""

    DIAL = "dial"
    """Start opening the WebSocket (``connect()`` or a reconnect attempt)."""
    OPENED = "opened"
    """The WebSocket handshake completed."""
    JOIN_SENT = "join_sent"
    """The join frame was written."""
    WELCOMED = "welcomed"
    """``system/welcome`` and the initial ``channel/joined`` frames arrived."""
    CLOSED = "closed"
    """The socket closed, failed or was dropped (or ``disconnect()`` closed it)."""


TRANSITIONS: Final[dict[tuple[State, Event], State]] = {
    (State.DISCONNECTED, Event.DIAL): State.CONNECTING,
    (State.CONNECTING, Event.OPENED): State.CONNECTED,
    (State.CONNECTING, Event.CLOSED): State.DISCONNECTED,
    (State.CONNECTED, Event.JOIN_SENT): State.JOINED,
    (State.CONNECTED, Event.CLOSED): State.DISCONNECTED,
    (State.JOINED, Event.WELCOMED): State.READY,
    (State.JOINED, Event.CLOSED): State.DISCONNECTED,
    (State.READY, Event.CLOSED): State.DISCONNECTED,
}
"""Every legal transition; any (state, event) pair not listed is a bug in the caller."""


class IllegalTransition(RuntimeError):
    """An event that the current state does not allow (a bug in the client, not the user)."""


class ConnectionState:
    """The current state and the table that moves it; refuses illegal sequences."""

    __slots__ = ("state",)

    def __init__(self, state: State = State.DISCONNECTED) -> None:
        self.state = state

    def handle(self, event: Event) -> State:
        """Apply ``event`` and return the new state; raise :class:`IllegalTransition` if the
        table has no entry for (current state, event)."""
        try:
            new = TRANSITIONS[(self.state, event)]
        except KeyError:
            allowed = sorted(e.value for (s, e) in TRANSITIONS if s is self.state)
            raise IllegalTransition(
                f"event {event.value!r} is not allowed in state {self.state.value!r} "
                f"(allowed: {', '.join(allowed)})"
            ) from None
        self.state = new
        return new

    def __repr__(self) -> str:
        """Debug form."""
        return f"ConnectionState({self.state.value})"
