"""The gateway's listening socket: connection limits, the request-head timeout, accept errors.

Every accepted connection passes a gate before aiohttp sees it:

- it is **served** while fewer than ``max_connections`` are served and its address holds
  fewer than ``max_connections_per_ip``; a served connection must send a complete HTTP
  request head within ``header_timeout_s`` or it gets 408 and is closed;
- over a limit it is **refused**: answered at once with 503 and a JSON body naming the limit,
  then closed (a bounded number of refusals are in flight at once);
- when even that pool is full it is **dropped**: closed at accept, without an answer.

So a flood of half-open connections never reaches the open-file limit, and the clients
already served, and ``/health`` from other addresses, keep working. A cluster node's link
ports (one per space it leads, for the other nodes) pass the same gate and timeout, with caps
of their own: together one ``LINK_SHARE``-th of the public port's (:func:`link_caps`), so a
flood of either port leaves the other its connections and the process its open files.

The site runs its own accept loop (asyncio's retries a failing ``accept()`` up to the backlog
in one tick, logging a traceback each time): an accept error such as ``EMFILE`` (an
open-file limit too low for the configured caps) pauses accepting for ``ACCEPT_RETRY_S`` and
is logged at most once per second with a count.
"""

from __future__ import annotations

import asyncio
import enum
import errno
import json
import logging
import os
import resource
import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

from aiohttp import web

from hubbub.server.config import Limits
from hubbub.server.state.metrics import Metrics

log = logging.getLogger("hubbub.server.listener")

RESERVED_FDS = 256
"""Open files kept free for everything but connections (SQLite, logs, Redis, pipes)."""
MIN_CONNECTIONS = 16
MIN_REFUSALS = 64
REFUSAL_LINGER_S = 2.0
"""How long a refused connection may take to read its 503 before it is cut."""
ACCEPT_BATCH = 256
"""Most connections accepted in one turn of the event loop (other work runs in between)."""
ACCEPT_RETRY_S = 0.1
"""Pause after a failed ``accept()`` before trying again."""
_HEAD_ENDS = (b"\r\n\r\n", b"\n\n")


@dataclass(frozen=True)
class Caps:
    """The connection limits in force."""

    total: int
    per_ip: int
    refusals: int
    """Refused connections being answered at once; beyond, new ones are dropped at accept."""


def open_file_limit() -> int:
    """This process's soft limit on open files (2**20 when it is unlimited)."""
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return soft if 0 < soft != resource.RLIM_INFINITY else 1 << 20


def connection_caps(limits: Limits, nofile: int) -> Caps:
    """The configured caps, with unset ones derived from the open-file limit ``nofile``."""
    total = limits.max_connections or max(MIN_CONNECTIONS, (nofile - RESERVED_FDS) * 3 // 4)
    per_ip = limits.max_connections_per_ip or max(1, total // 2)
    return Caps(total=total, per_ip=min(per_ip, total), refusals=max(MIN_REFUSALS, total // 4))


LINK_SHARE = 8
"""A node's link ports together serve at most this fraction of the public port's caps."""
MIN_LINK_REFUSALS = 16


def link_caps(public: Caps) -> Caps:
    """The caps of a node's link ports together, beside the public port's ``public``: the
    other nodes hold one link per space and a pool of forwarded requests each."""
    total = max(MIN_CONNECTIONS, public.total // LINK_SHARE)
    return Caps(total=total, per_ip=max(1, total // 2), refusals=max(MIN_LINK_REFUSALS, total // 4))


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

    def hold(self, ip: str) -> Verdict:
        """Count a receiver from ``ip`` that is no connection of its own (an ``/mcp``
        session) against the same caps: ``SERVE`` (counted until :meth:`release`), or the
        cap that refuses it."""
        caps = self.caps
        if self.open >= caps.total:
            return Verdict.REFUSE_TOTAL
        if self.per_ip.get(ip, 0) >= caps.per_ip:
            return Verdict.REFUSE_IP
        self.open += 1
        self.per_ip[ip] = self.per_ip.get(ip, 0) + 1
        return Verdict.SERVE

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


PUBLIC_FIXES = (
    "--max-connections-per-ip or HUBBUB_MAX_CONNECTIONS_PER_IP",
    "--max-connections or HUBBUB_MAX_CONNECTIONS",
)
"""How a public port's caps are raised (per address, in total)."""


def refusal_message(verdict: Verdict, caps: Caps, fixes: tuple[str, str] = PUBLIC_FIXES) -> str:
    """Why a connection (or an ``/mcp`` session) over a cap is refused, and what to do."""
    if verdict is Verdict.REFUSE_IP:
        return (
            f"this address already holds {caps.per_ip} connections (WebSockets, HTTP "
            "connections and /mcp sessions together), the most one address may "
            f"(limits.max_connections_per_ip); close some, or raise the limit with {fixes[0]}"
        )
    return (
        f"the gateway is serving its limit of {caps.total} connections "
        f"(limits.max_connections); try again shortly, or raise the limit with {fixes[1]}"
    )


CONNECTION_GATES = web.AppKey("connection_gates", list[ConnectionGate])
"""The gate of the public port serving an app (a list: filled when its site is made), so
that receivers that are no connection of their own count against the same caps."""


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


def _answer(status: str, error: str, message: str) -> bytes:
    body = json.dumps({"error": error, "message": message}).encode()
    head = (
        f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\nRetry-After: 1\r\n\r\n"
    )
    return head.encode() + body


class _Guarded(asyncio.Protocol):
    """One admitted connection: aiohttp's own protocol if served, a 503 answer if refused."""

    __slots__ = ("_counted", "_inner", "_ip", "_site", "_tail", "_timer", "_transport", "_verdict")

    def __init__(self, site: GuardedSite, ip: str, verdict: Verdict) -> None:
        self._site = site
        self._ip = ip
        self._verdict = verdict
        self._inner: asyncio.Protocol | None = None
        self._transport: asyncio.Transport | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._tail = b""
        self._counted = True

    def connection_made(self, base: asyncio.BaseTransport) -> None:
        # a stream transport; uvloop's does not subclass asyncio.Transport (HUBBUB_LOOP=uvloop)
        transport = cast(asyncio.Transport, base)
        site = self._site
        self._transport = transport
        loop = asyncio.get_running_loop()
        if self._verdict is Verdict.SERVE:
            self._timer = loop.call_later(site.limits.header_timeout_s, self._head_timeout)
            self._inner = site.handler_factory()
            self._inner.connection_made(transport)
            return
        site.metrics.connections_refused[self._verdict.value] += 1
        _answer_and_linger(transport, site.refusals[self._verdict])

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
        self.release()
        if self._inner is not None:
            self._inner.connection_lost(exc)

    def release(self) -> None:
        """Give the connection's place at the gate back (once)."""
        if self._counted:
            self._counted = False
            self._site.gate.release(self._ip, self._verdict)

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
        _answer_and_linger(transport, self._site.timeout_answer)


def _answer_and_linger(transport: asyncio.Transport, answer: bytes) -> None:
    """Write ``answer`` and end our side; the client reads it, then closes (closing at once
    with its request unread would reset the connection and lose the answer)."""
    transport.write(answer)
    if transport.can_write_eof():
        transport.write_eof()
    asyncio.get_running_loop().call_later(REFUSAL_LINGER_S, transport.abort)


class GuardedSite(web.BaseSite):
    """A TCP site whose connections pass the gate and the request-head timeout (see above).

    It binds ``host:port``, or serves ``sock``, a socket bound and listening already (a
    cluster node's link port; closed when the site stops). ``gate`` shares one gate among
    several sites (a node's link ports); by default the site has its own, with the caps of
    ``limits``."""

    def __init__(
        self,
        runner: web.BaseRunner,
        host: str,
        port: int,
        limits: Limits,
        metrics: Metrics,
        *,
        backlog: int = 4096,
        reuse_port: bool = False,
        sock: socket.socket | None = None,
        gate: ConnectionGate | None = None,
    ) -> None:
        super().__init__(runner, backlog=backlog)
        self.reuse_port = reuse_port
        """Share the port with other processes (``--workers``: the kernel spreads clients)."""
        self.host = host
        self.requested_port = port
        self.limits = limits
        self.metrics = metrics
        self.nofile = open_file_limit()
        self._sock = sock
        self.gate = gate or ConnectionGate(connection_caps(limits, self.nofile))
        caps = self.gate.caps
        if gate is None:
            fixes = PUBLIC_FIXES
            app = runner.app if isinstance(runner, web.AppRunner) else None
            gates = app.get(CONNECTION_GATES) if app is not None else None
            if gates is not None:
                gates.append(self.gate)  # the app's /mcp sessions count against these caps
        else:
            fix = f"--max-connections (the link ports get 1/{LINK_SHARE} of the public port's)"
            fixes = (fix, fix)
        self.refusals = {
            v: _answer(
                "503 Service Unavailable", "too_many_connections", refusal_message(v, caps, fixes)
            )
            for v in (Verdict.REFUSE_IP, Verdict.REFUSE_TOTAL)
        }
        self.timeout_answer = _answer(
            "408 Request Timeout",
            "header_timeout",
            f"no complete HTTP request within {limits.header_timeout_s:g} s of connecting "
            "(limits.header_timeout_s); send the request line and headers at once",
        )
        self.handler_factory: Callable[[], asyncio.Protocol] = self._not_started
        self._listening: list[socket.socket] = []
        self._paused: dict[int, asyncio.TimerHandle] = {}
        self._handshakes: set[asyncio.Task[None]] = set()
        self._throttle: Throttle | None = None
        self._accept_error = ""
        self._report_timer: asyncio.TimerHandle | None = None

    @staticmethod
    def _not_started() -> asyncio.Protocol:
        raise RuntimeError("GuardedSite.start() was not called")

    @property
    def name(self) -> str:
        """The URL this site serves."""
        return f"http://{self.host}:{self.port}"

    @property
    def port(self) -> int:
        """The bound port (the requested one before start)."""
        if self._listening:
            return int(self._listening[0].getsockname()[1])
        return self.requested_port

    async def start(self) -> None:
        """Bind the port and start the accept loop."""
        await super().start()
        server = self._runner.server
        assert server is not None, "call runner.setup() first"
        self.handler_factory = server
        loop = asyncio.get_running_loop()
        self._throttle = Throttle(1.0, loop.time)
        caps = self.gate.caps
        if caps.total + caps.refusals > self.nofile - RESERVED_FDS:
            log.warning(
                "limits.max_connections=%d (+%d refusals in flight) does not fit the open-file "
                "limit of %d: accept() may fail with EMFILE; raise `ulimit -n` or lower the cap",
                caps.total,
                caps.refusals,
                self.nofile,
            )
        if self._sock is not None:
            self._sock.setblocking(False)
            self._listening.append(self._sock)
            loop.add_reader(self._sock.fileno(), self._accept, self._sock)
            return
        # asyncio binds (every address of the host, v6-only where needed); this site accepts
        bound = await loop.create_server(
            asyncio.Protocol,
            self.host,
            self.requested_port,
            backlog=self._backlog,
            start_serving=False,
            reuse_port=self.reuse_port or None,
        )
        self._server = bound
        for tsock in bound.sockets:
            sock = tsock.dup()
            sock.setblocking(False)
            sock.listen(self._backlog)
            self._listening.append(sock)
            loop.add_reader(sock.fileno(), self._accept, sock)

    async def stop(self) -> None:
        """Stop accepting (connections already made are closed by the runner)."""
        loop = asyncio.get_running_loop()
        for timer in [*self._paused.values(), self._report_timer]:
            if timer is not None:
                timer.cancel()
        self._paused.clear()
        for sock in self._listening:
            loop.remove_reader(sock.fileno())
            sock.close()
        self._listening.clear()
        await super().stop()

    def _accept(self, sock: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        for _ in range(ACCEPT_BATCH):
            try:
                conn, addr = sock.accept()
            except (BlockingIOError, InterruptedError, ConnectionAbortedError):
                return
            except OSError as exc:
                self._accept_failed(sock, exc)
                return
            ip = str(addr[0]) if isinstance(addr, tuple) else str(addr)
            verdict = self.gate.admit(ip)
            if verdict is Verdict.DROP:
                self.metrics.connections_refused[verdict.value] += 1
                conn.close()
                continue
            conn.setblocking(False)
            task = loop.create_task(self._connect(conn, ip, verdict))
            self._handshakes.add(task)
            task.add_done_callback(self._handshakes.discard)

    async def _connect(self, conn: socket.socket, ip: str, verdict: Verdict) -> None:
        protocol = _Guarded(self, ip, verdict)
        try:
            await asyncio.get_running_loop().connect_accepted_socket(lambda: protocol, conn)
        except (OSError, RuntimeError):
            protocol.release()
            conn.close()

    def _accept_failed(self, sock: socket.socket, exc: OSError) -> None:
        """Pause this socket's accept loop for a moment and report the error, throttled."""
        loop = asyncio.get_running_loop()
        fd = sock.fileno()
        loop.remove_reader(fd)
        self._paused[fd] = loop.call_later(ACCEPT_RETRY_S, self._resume, sock)
        self._accept_error = f"accept() failed: {exc}"
        assert self._throttle is not None
        self._report(self._throttle.hit())

    def _resume(self, sock: socket.socket) -> None:
        fd = sock.fileno()
        if self._paused.pop(fd, None) is not None and fd >= 0:
            asyncio.get_running_loop().add_reader(fd, self._accept, sock)

    def _report(self, n: int) -> None:
        if n:
            log.warning(
                "%s (%d times since the last report); new connections wait in the backlog. "
                "The open-file limit is %d and the gateway serves up to %d connections "
                "(limits.max_connections): raise the limit (ulimit -n) or lower the cap",
                self._accept_error,
                n,
                self.nofile,
                self.gate.caps.total,
            )
        assert self._throttle is not None
        due = self._throttle.due()
        if due is not None and self._report_timer is None:
            self._report_timer = asyncio.get_running_loop().call_at(due, self._report_due)

    def _report_due(self) -> None:
        self._report_timer = None
        assert self._throttle is not None
        self._report(self._throttle.flush())


LISTEN_FIX = "stop what runs there or choose another --port (or --host)"
"""What to do about a port that cannot be bound (the default of :func:`listen_error`)."""


def listen_error(exc: OSError, host: str, port: int, fix: str = LISTEN_FIX) -> OSError:
    """A failed bind of ``host:port`` as an error naming the address, the reason and ``fix``;
    any other ``OSError`` is returned as it is."""
    if exc.errno not in (errno.EADDRINUSE, errno.EADDRNOTAVAIL, errno.EACCES):
        return exc
    return OSError(f"cannot listen on {host}:{port}: {os.strerror(exc.errno)}; {fix}")
