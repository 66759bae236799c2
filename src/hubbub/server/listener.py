"""The gateway's listening socket: connection limits, the request-head timeout, accept errors.

Every accepted connection passes a gate before aiohttp sees it:

- it is **served** while fewer than ``max_connections`` are served and its address holds
  fewer than ``max_connections_per_ip``; a served connection must send a complete HTTP
  request head within ``header_timeout_s`` or it gets 408 and is closed;
- over a limit it is **refused**: answered at once with 503 and a JSON body naming the limit,
  then closed (a bounded number of refusals are in flight at once);
- when even that pool is full it is **dropped**: closed at accept, without an answer.

So a flood of half-open connections never reaches the open-file limit, and the clients
already served, and ``/health`` from other addresses, keep working. Accept errors that still
happen (``EMFILE`` when the open-file limit is too low for the configured caps) are logged
at most once per second with a count, not once per retry with a traceback.
"""

from __future__ import annotations

import asyncio
import enum
import errno
import json
import logging
import resource
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from hubbub.server.config import Limits
from hubbub.server.metrics import Metrics

log = logging.getLogger("hubbub.server.listener")

RESERVED_FDS = 256
"""Open files kept free for everything but connections (SQLite, logs, Redis, pipes)."""
MIN_CONNECTIONS = 16
MIN_REFUSALS = 64
REFUSAL_LINGER_S = 2.0
"""How long a refused connection may take to read its 503 before it is cut."""
ACCEPT_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
_HEAD_ENDS = (b"\r\n\r\n", b"\n\n")


@dataclass(frozen=True)
class Caps:
    """The connection limits in force."""

    total: int
    per_ip: int
    refusals: int
    """Refused connections being answered at once; beyond, new ones are dropped at accept."""


def open_file_limit() -> int:
    """This process's soft limit on open files."""
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def connection_caps(limits: Limits, nofile: int) -> Caps:
    """The configured caps, with unset ones derived from the open-file limit ``nofile``."""
    total = limits.max_connections or max(MIN_CONNECTIONS, (nofile - RESERVED_FDS) * 3 // 4)
    per_ip = limits.max_connections_per_ip or max(1, total // 2)
    return Caps(total=total, per_ip=min(per_ip, total), refusals=max(MIN_REFUSALS, total // 4))


class Verdict(enum.Enum):
    """What the gate decided for a new connection."""

    SERVE = "served"
    REFUSE_IP = "max_connections_per_ip"
    REFUSE_TOTAL = "max_connections"
    DROP = "dropped_at_accept"


class ConnectionGate:
    """Counts open connections, in total and per address, and admits or refuses new ones."""

    def __init__(self, caps: Caps) -> None:
        self.caps = caps
        self.open = 0
        self.per_ip: dict[str, int] = {}
        self.refusing = 0

    def admit(self, ip: str) -> Verdict:
        """Decide for a new connection from ``ip`` and count it."""
        caps = self.caps
        if self.open < caps.total and self.per_ip.get(ip, 0) < caps.per_ip:
            self.open += 1
            self.per_ip[ip] = self.per_ip.get(ip, 0) + 1
            return Verdict.SERVE
        if self.refusing >= caps.refusals:
            return Verdict.DROP
        self.refusing += 1
        return Verdict.REFUSE_TOTAL if self.open >= caps.total else Verdict.REFUSE_IP

    def release(self, ip: str, verdict: Verdict) -> None:
        """Forget a connection that ended."""
        if verdict is Verdict.SERVE:
            self.open -= 1
            left = self.per_ip[ip] - 1
            if left:
                self.per_ip[ip] = left
            else:
                del self.per_ip[ip]
        elif verdict is not Verdict.DROP:
            self.refusing -= 1


class Throttle:
    """Counts a repeated event and says when to report it: at most once per interval."""

    def __init__(self, interval_s: float, clock: Callable[[], float]) -> None:
        self.interval_s = interval_s
        self.clock = clock
        self._last = float("-inf")
        self._pending = 0

    def hit(self) -> int:
        """Count one event; the number to report now (0: stay quiet, it is kept for later)."""
        self._pending += 1
        return self.flush()

    def flush(self) -> int:
        """The events kept back, if an interval has passed since the last report; else 0."""
        now = self.clock()
        if not self._pending or now - self._last < self.interval_s:
            return 0
        n, self._pending, self._last = self._pending, 0, now
        return n

    def due(self) -> float | None:
        """When the events kept back may be reported (None: there are none)."""
        return self._last + self.interval_s if self._pending else None


class AcceptErrorLog:
    """The event loop's exception handler: resource errors (EMFILE…) become one line a second."""

    def __init__(
        self, loop: asyncio.AbstractEventLoop, caps: Caps, nofile: int, interval_s: float = 1.0
    ) -> None:
        self.loop = loop
        self.caps = caps
        self.nofile = nofile
        self.throttle = Throttle(interval_s, loop.time)
        self.previous = loop.get_exception_handler()
        self._last_error = ""
        self._flush: asyncio.TimerHandle | None = None

    def __call__(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        exc = context.get("exception")
        if not (isinstance(exc, OSError) and exc.errno in ACCEPT_ERRNOS):
            if self.previous is not None:
                self.previous(loop, context)
            else:
                loop.default_exception_handler(context)
            return
        self._last_error = f"{context.get('message', 'socket error')}: {exc}"
        self._report(self.throttle.hit())

    def _report(self, n: int) -> None:
        if n:
            log.warning(
                "%s (%d times since the last report); new connections wait in the backlog. "
                "The open-file limit is %d and the gateway serves up to %d connections "
                "(limits.max_connections): raise the limit (ulimit -n) or lower the cap",
                self._last_error,
                n,
                self.nofile,
                self.caps.total,
            )
        due = self.throttle.due()
        if due is not None and self._flush is None:
            self._flush = self.loop.call_at(due, self._on_flush)

    def _on_flush(self) -> None:
        self._flush = None
        self._report(self.throttle.flush())

    def close(self) -> None:
        """Stop the pending report timer."""
        if self._flush is not None:
            self._flush.cancel()


def _answer(status: str, error: str, message: str) -> bytes:
    body = json.dumps({"error": error, "message": message}).encode()
    head = (
        f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\nRetry-After: 1\r\n\r\n"
    )
    return head.encode() + body


class _Guarded(asyncio.Protocol):
    """One accepted connection: the gate's verdict, then aiohttp's own protocol if served."""

    __slots__ = ("_inner", "_ip", "_site", "_tail", "_timer", "_transport", "_verdict")

    def __init__(self, site: GuardedSite) -> None:
        self._site = site
        self._inner: asyncio.Protocol | None = None
        self._transport: asyncio.Transport | None = None
        self._ip = ""
        self._verdict = Verdict.DROP
        self._timer: asyncio.TimerHandle | None = None
        self._tail = b""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        site = self._site
        self._transport = transport
        peer = transport.get_extra_info("peername")
        self._ip = str(peer[0]) if isinstance(peer, tuple) else str(peer)
        self._verdict = verdict = site.gate.admit(self._ip)
        loop = asyncio.get_running_loop()
        if verdict is Verdict.SERVE:
            self._timer = loop.call_later(site.limits.header_timeout_s, self._head_timeout)
            self._inner = site.handler_factory()
            self._inner.connection_made(transport)
            return
        site.metrics.connections_refused[verdict.value] += 1
        if verdict is Verdict.DROP:
            transport.abort()
            return
        transport.write(site.refusals[verdict])
        if transport.can_write_eof():
            transport.write_eof()  # the client reads the answer, then closes: no reset
        self._timer = loop.call_later(REFUSAL_LINGER_S, transport.abort)

    def data_received(self, data: bytes) -> None:
        if self._inner is None:
            return  # a refused connection: its request is not read
        if self._timer is not None:
            seen = self._tail + data
            if any(end in seen for end in _HEAD_ENDS):
                self._timer.cancel()
                self._timer, self._tail = None, b""
            else:
                self._tail = seen[-3:]
        self._inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self._inner.eof_received() if self._inner is not None else None

    def connection_lost(self, exc: Exception | None) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._site.gate.release(self._ip, self._verdict)
        if self._inner is not None:
            self._inner.connection_lost(exc)

    def pause_writing(self) -> None:
        if self._inner is not None:
            self._inner.pause_writing()

    def resume_writing(self) -> None:
        if self._inner is not None:
            self._inner.resume_writing()

    def _head_timeout(self) -> None:
        self._timer = None
        transport = self._transport
        if transport is None or transport.is_closing():
            return
        self._site.metrics.connections_refused["header_timeout"] += 1
        transport.write(self._site.timeout_answer)
        transport.close()


class GuardedSite(web.BaseSite):
    """A TCP site whose connections pass the gate and the request-head timeout (see above)."""

    def __init__(
        self,
        runner: web.BaseRunner,
        host: str,
        port: int,
        limits: Limits,
        metrics: Metrics,
        *,
        backlog: int = 4096,
    ) -> None:
        super().__init__(runner, backlog=backlog)
        self.host = host
        self.requested_port = port
        self.limits = limits
        self.metrics = metrics
        self.nofile = open_file_limit()
        self.gate = ConnectionGate(connection_caps(limits, self.nofile))
        caps = self.gate.caps
        self.refusals = {
            Verdict.REFUSE_IP: _answer(
                "503 Service Unavailable",
                "too_many_connections",
                f"this address already holds {caps.per_ip} connections, the most one address "
                "may (limits.max_connections_per_ip); close some, or raise the limit with "
                "--max-connections-per-ip or HUBBUB_MAX_CONNECTIONS_PER_IP",
            ),
            Verdict.REFUSE_TOTAL: _answer(
                "503 Service Unavailable",
                "too_many_connections",
                f"the gateway is serving its limit of {caps.total} connections "
                "(limits.max_connections); try again shortly, or raise the limit with "
                "--max-connections or HUBBUB_MAX_CONNECTIONS",
            ),
        }
        self.timeout_answer = _answer(
            "408 Request Timeout",
            "header_timeout",
            f"no complete HTTP request within {limits.header_timeout_s:g} s of connecting "
            "(limits.header_timeout_s); send the request line and headers at once",
        )
        self._accept_log: AcceptErrorLog | None = None
        self.handler_factory: Callable[[], asyncio.Protocol] = self._no_server

    @staticmethod
    def _no_server() -> asyncio.Protocol:
        raise RuntimeError("GuardedSite.start() was not called")

    @property
    def name(self) -> str:
        """The URL this site serves."""
        return f"http://{self.host}:{self.port}"

    @property
    def port(self) -> int:
        """The bound port (the requested one before start)."""
        server = self._server
        if isinstance(server, asyncio.Server) and server.sockets:
            return int(server.sockets[0].getsockname()[1])
        return self.requested_port

    async def start(self) -> None:
        """Listen, and route resource errors of this loop through the throttled log."""
        await super().start()
        server = self._runner.server
        assert server is not None, "call runner.setup() first"
        self.handler_factory = server
        loop = asyncio.get_running_loop()
        caps = self.gate.caps
        if caps.total + caps.refusals > self.nofile - RESERVED_FDS:
            log.warning(
                "limits.max_connections=%d (+%d refusals in flight) does not fit the open-file "
                "limit of %d: accept() may fail with EMFILE; raise `ulimit -n` or lower the cap",
                caps.total,
                caps.refusals,
                self.nofile,
            )
        if not isinstance(loop.get_exception_handler(), AcceptErrorLog):
            self._accept_log = AcceptErrorLog(loop, caps, self.nofile)
            loop.set_exception_handler(self._accept_log)
        self._server = await loop.create_server(
            lambda: _Guarded(self), self.host, self.requested_port, backlog=self._backlog
        )

    async def stop(self) -> None:
        """Stop listening; put the loop's previous exception handler back."""
        accept_log = self._accept_log
        if accept_log is not None:
            accept_log.close()
            loop = asyncio.get_running_loop()
            if loop.get_exception_handler() is accept_log:
                loop.set_exception_handler(accept_log.previous)
            self._accept_log = None
        await super().stop()
