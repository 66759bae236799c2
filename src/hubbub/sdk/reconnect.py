"""When and where the client reconnects, sans-I/O: session outcomes in, the next step out.

:class:`ReconnectPolicy` is told how each connection ended and answers with one step:
:class:`Dial` another gateway URL now, :class:`Backoff` (wait, then start a new round), or
:class:`GiveUp` (the client stops, with the reason). It never sleeps or dials; the
:class:`~hubbub.sdk.Client` does, so the rules are tested without a gateway
(``tests/sdk/test_reconnect.py``).

A *round* tries each gateway URL once, in :func:`~hubbub.sdk.gateways.next_urls` order (the
last URL that reached ``READY`` first), moving on at once when one fails or drops; the
backoff (:func:`backoff_delay`) lies between rounds. A connection that reached ``READY``
starts a fresh round and resets the attempt count. The first connection (``connect()``) is
never retried after a full round: its caller gets the error.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from hubbub.errors import AuthRefused, ConnectionFailed
from hubbub.sdk.gateways import next_urls
from hubbub.sdk.options import ClientOptions


def backoff_delay(attempt: int, base: float, cap: float, jitter: float, rand: float) -> float:
    """Seconds to wait before reconnect ``attempt`` (1, 2, ...): exponential with jitter.

    The un-jittered delay is ``min(cap, base * 2 ** (attempt - 1))``; ``jitter`` (0..1) takes
    up to that fraction off it, scaled by ``rand`` (0..1, drawn by the caller), so the result
    always lies in ``[(1 - jitter) * d, d]`` and never exceeds ``cap``.
    """
    if attempt < 1:
        raise ValueError("attempt counts from 1")
    exponent = min(attempt - 1, 62)  # 2**62 * base exceeds any sensible cap already
    delay = min(cap, base * float(2**exponent))
    return delay * (1.0 - jitter * min(max(rand, 0.0), 1.0))


@dataclass(frozen=True)
class Dial:
    """Connect to ``url`` now (the next URL of this round)."""

    url: str


@dataclass(frozen=True)
class Backoff:
    """Every URL failed this round: wait ``delay`` seconds, then dial :meth:`~ReconnectPolicy.
    next_round`'s URL. ``attempt`` counts the failed rounds in a row (from 1)."""

    attempt: int
    delay: float
    reason: str


@dataclass(frozen=True)
class GiveUp:
    """Stop for good: ``failure`` says why; ``report`` asks for an ``error`` event too."""

    failure: ConnectionFailed
    report: bool = False


Step = Dial | Backoff | GiveUp


class ReconnectPolicy:
    """The reconnect rules of one client; one instance per ``connect()``."""

    def __init__(
        self,
        options: ClientOptions,
        last_ready: str | None,
        rand: Callable[[], float],
    ) -> None:
        self.options = options
        self.urls: Sequence[str] = options.gateways
        self.last_ready = last_ready
        """The URL of the last connection that reached ``READY`` (rounds start with it)."""
        self.attempt = 0
        """Failed rounds in a row."""
        self._rand = rand
        self._todo = next_urls(self.urls, last_ready)
        self._failures: list[tuple[str, ConnectionFailed]] = []

    def first(self) -> str:
        """The URL to dial first."""
        return self._todo.pop(0)

    def ended(
        self,
        url: str,
        failure: ConnectionFailed | None,
        reason: str,
        *,
        first: bool,
        reached_ready: bool,
        refused: bool,
    ) -> Step:
        """The next step after the connection to ``url`` ended.

        ``failure``: why it could not connect (None if it connected and later closed, for
        ``reason``); ``first``: ``connect()`` still waits for it; ``reached_ready``: it got
        to ``READY``; ``refused``: the gateway closed it with a code that forbids retrying.
        """
        opts = self.options
        if failure is not None:
            self._failures.append((url, failure))
        if reached_ready:
            self.last_ready = url
            self.attempt = 0
            self._failures = []
            self._todo = next_urls(self.urls, url)[1:]  # the dropped session was this URL's turn
        if refused and not isinstance(failure, AuthRefused):
            return GiveUp(
                failure
                if first and failure is not None
                else ConnectionFailed(
                    f"the connection to {url} closed ({reason}) and is not retried"
                )
            )
        if self._todo and (first or opts.reconnect):
            return Dial(self._todo.pop(0))
        # the round is over: every URL failed once
        failures = self._failures
        if len(failures) == len(self.urls) and all(isinstance(e, AuthRefused) for _, e in failures):
            return GiveUp(failures[-1][1], report=True)
        if first and failures:
            return GiveUp(_round_failed(failures))
        if not opts.reconnect:
            return GiveUp(
                ConnectionFailed(
                    f"the connection to {url} closed ({reason}) and is not retried "
                    "(reconnect=False)"
                )
            )
        self.attempt += 1
        limit = opts.max_reconnect_attempts
        if limit is not None and self.attempt > limit:
            return GiveUp(
                ConnectionFailed(
                    f"gave up reconnecting to {opts.gateway} after {limit} attempts ({reason}); "
                    "raise max_reconnect_attempts or check the gateway"
                ),
                report=True,
            )
        delay = backoff_delay(
            self.attempt,
            opts.reconnect_delay,
            opts.max_reconnect_delay,
            opts.reconnect_jitter,
            self._rand(),
        )
        return Backoff(self.attempt, delay, reason)

    def next_round(self) -> str:
        """After a :class:`Backoff`: start a new round; the URL to dial."""
        self._todo = next_urls(self.urls, self.last_ready)
        self._failures = []
        return self._todo.pop(0)


def _round_failed(failures: list[tuple[str, ConnectionFailed]]) -> ConnectionFailed:
    """Why a first connect failed: the one failure, or each URL's when there were several."""
    if len(failures) == 1:
        return failures[0][1]
    each = "; ".join(str(exc) if url in str(exc) else f"{url}: {exc}" for url, exc in failures)
    return ConnectionFailed(f"could not connect to any of the {len(failures)} gateways ({each})")


__all__ = ["Backoff", "Dial", "GiveUp", "ReconnectPolicy", "Step", "backoff_delay"]
