"""What a client tells its application: handlers by event name, message streams, waiters.

:class:`ClientEvents` is the part of :class:`~hubbub.sdk.Client` that hands things out: an
event (a lifecycle event such as ``ready`` or an envelope kind such as ``chat``) goes to the
handlers registered for it, every envelope also to each ``async for`` stream and to the
futures of :meth:`ClientEvents.expect`. A handler that raises is logged and reported as an
``error`` event; the connection goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import difflib
import inspect
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, TypeVar

from hubbub.protocol.envelope import CLIENT_KINDS, SERVER_KINDS, Envelope

log = logging.getLogger("hubbub.sdk.client")

Handler = Callable[[Any], object]
"""An event handler: called with one argument (see :meth:`Client.on`); may be async."""
H = TypeVar("H", bound=Handler)

EVENTS: Final = frozenset(
    {
        "connected",
        "disconnected",
        "message",
        "welcome",
        "ready",
        "error",
        "reconnecting",
        "failover",
        "history_reset",
    }
)
"""Lifecycle events; any other event name is an envelope kind (``chat``, ``mcp/request``...)."""
KNOWN_KINDS: Final = CLIENT_KINDS | SERVER_KINDS


@dataclass(frozen=True)
class Reconnecting:
    """Argument of the ``reconnecting`` event."""

    attempt: int
    delay: float
    reason: str


@dataclass(frozen=True)
class Failover:
    """Argument of the ``failover`` event: the client is connected to another gateway."""

    from_url: str
    """The gateway it was connected to before."""
    to_url: str
    """The gateway it is connected to now (:attr:`Client.gateway_url`)."""


@dataclass(frozen=True)
class Disconnected:
    """Argument of the ``disconnected`` event."""

    code: int | None
    reason: str
    will_reconnect: bool


class _End:
    """Marks the end of a message stream."""


_END: Final = _End()


class Subscription:
    """An async iterator over every envelope the client receives from the moment it was
    created until the client disconnects (see :meth:`Client.messages`)."""

    def __init__(self, events: ClientEvents) -> None:
        self._events = events
        self._queue: asyncio.Queue[Envelope | _End] = asyncio.Queue()
        events.streams.add(self._queue)

    def __aiter__(self) -> Subscription:
        """The subscription itself."""
        return self

    async def __anext__(self) -> Envelope:
        """The next envelope; ``StopAsyncIteration`` once the client disconnected."""
        item = await self._queue.get()
        if isinstance(item, _End):
            self.close()
            raise StopAsyncIteration
        return item

    def close(self) -> None:
        """Stop receiving (envelopes already queued are dropped)."""
        self._events.streams.discard(self._queue)


class ClientEvents:
    """Handlers, streams and waiters of one client; ``spawn`` runs an async handler's
    awaitable as a task the client owns (cancelled when it disconnects)."""

    def __init__(self, owner: str, spawn: Callable[[Any], object]) -> None:
        self.owner = owner
        """Whose events these are (for the log)."""
        self.streams: set[asyncio.Queue[Envelope | _End]] = set()
        self._spawn = spawn
        self._handlers: dict[str, list[Handler]] = {}
        self._waiters: list[tuple[Callable[[Envelope], bool], asyncio.Future[Envelope]]] = []

    def on(self, event: str, handler: H) -> H:
        """Register ``handler`` for ``event`` (checked as :meth:`check` does)."""
        self.check(event)
        self._handlers.setdefault(event, []).append(handler)
        return handler

    @staticmethod
    def check(event: str) -> None:
        """Raise ``ValueError`` naming the events for a name that is neither a lifecycle event
        nor an envelope kind."""
        if event not in EVENTS and event not in KNOWN_KINDS:
            close = difflib.get_close_matches(event, [*EVENTS, *KNOWN_KINDS], n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ValueError(
                f"unknown event {event!r}{hint} (events: {', '.join(sorted(EVENTS))}, "
                "or an envelope kind such as 'chat' or 'mcp/request')"
            )

    def off(self, event: str, handler: Handler) -> None:
        """Remove a handler (no error if it is not registered)."""
        handlers = self._handlers.get(event)
        if handlers and handler in handlers:
            handlers.remove(handler)

    def emit(self, event: str, arg: object) -> None:
        """Call every handler of ``event`` with ``arg`` (async ones as tasks)."""
        handlers = self._handlers.get(event)
        if not handlers:
            return
        for handler in list(handlers):
            try:
                result = handler(arg)
            except Exception as exc:
                self._failed(event, exc)
                continue
            if inspect.isawaitable(result):
                self._spawn(self._await(event, result))

    def deliver(self, env: Envelope) -> None:
        """Hand one envelope to waiters, handlers (``message`` and its kind) and streams."""
        if self._waiters:
            for match, future in list(self._waiters):
                if not future.done() and match(env):
                    future.set_result(env)
        self.emit("message", env)
        self.emit(env.kind, env)
        for queue in self.streams:
            queue.put_nowait(env)

    def expect(self, match: Callable[[Envelope], bool]) -> asyncio.Future[Envelope]:
        """A future for the next envelope ``match`` accepts (cancel it to stop waiting)."""
        future: asyncio.Future[Envelope] = asyncio.get_running_loop().create_future()
        entry = (match, future)
        self._waiters.append(entry)

        def forget(_: asyncio.Future[Envelope]) -> None:
            with contextlib.suppress(ValueError):
                self._waiters.remove(entry)

        future.add_done_callback(forget)
        return future

    def end_streams(self) -> None:
        """End every ``async for`` stream."""
        for queue in list(self.streams):
            queue.put_nowait(_END)

    def fail_waiters(self, exc: BaseException) -> None:
        """Fail every pending :meth:`expect` future with ``exc``."""
        for _, future in list(self._waiters):
            if not future.done():
                future.set_exception(exc)

    async def _await(self, event: str, awaitable: Any) -> None:
        try:
            await awaitable
        except Exception as exc:
            self._failed(event, exc)

    def _failed(self, event: str, exc: Exception) -> None:
        log.exception("handler for %r of %s raised", event, self.owner, exc_info=exc)
        if event != "error":
            self.emit("error", exc)


__all__ = [
    "EVENTS",
    "KNOWN_KINDS",
    "ClientEvents",
    "Disconnected",
    "Failover",
    "Handler",
    "Reconnecting",
    "Subscription",
]
