"""``/mcp``: hubbub's MCP server over Streamable HTTP, on the gateway's own port.

Each MCP session is one participant connection, attached inside the gateway exactly as a
WebSocket client's (``open_session``: the same hello, authentication, capabilities, welcome,
presence and floor rules); its frames go to a :class:`QueueTransport` instead of a socket,
which hands each envelope to the session's :class:`~hubbub.mcp.desk.Desk`. The MCP side is
the official SDK's ``StreamableHTTPSessionManager`` (sessions, ``Mcp-Session-Id``, SSE,
``DELETE``), reached through a small ASGI bridge from aiohttp.

Who the participant is:

- a token (``Authorization: Bearer``, or ``?token=``) names it, as for every HTTP route
  (:func:`hubbub.server.access.request_token`);
- in open mode, ``X-Hubbub-Participant: <id>`` (or ``?as=<id>``) names it, with
  ``X-Hubbub-Kind`` (default ``agent``); ``X-Hubbub-Space`` / ``?space=`` picks the space.

Where each participant's ``listen`` stopped is kept in the gateway's store
(:class:`ListenCursors`), so the participant's next session — after a gateway restart, or
any later one — resumes there: nothing missed, nothing returned twice.

Every request of a session must carry the credentials that opened it (otherwise 404, as the
SDK answers for a session it does not know). The browser rules of
:mod:`hubbub.server.web_guard` apply (a foreign ``Origin`` is refused with 403). The ``mcp``
package comes with the ``mcp`` extra; without it ``/mcp`` answers 501 naming the extra.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import os
import time
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from aiohttp import web

from hubbub.extras import install_command
from hubbub.protocol.envelope import Envelope, encode, materialized
from hubbub.protocol.errors import ErrorCode, ProtocolError
from hubbub.protocol.mew import MewDialect
from hubbub.server.core.mcp_cursors import ListenCursors
from hubbub.server.http.access import request_token
from hubbub.server.http.asgi_bridge import serve_asgi
from hubbub.server.listener import CONNECTION_GATES, ConnectionGate, Verdict, refusal_message
from hubbub.server.state.connection import Connection
from hubbub.server.state.port import Overflow, Port
from hubbub.server.web_guard import MCP_PATH

if TYPE_CHECKING:
    from hubbub.mcp.cursor import ListenCursor
    from hubbub.mcp.desk import Desk
    from hubbub.protocol.dialect import Dialect
    from hubbub.server.gateway import Gateway
    from hubbub.server.state.space import Session

OpenSession = Callable[
    ["Gateway", "Dialect", dict[str, object], "Connection"],
    Awaitable[tuple["Session | None", ProtocolError | None]],
]
"""How the gateway attaches a connection (``hubbub.server.app.open_session``)."""

log = logging.getLogger("hubbub.mcp")

PARTICIPANT_HEADER = "X-Hubbub-Participant"
KIND_HEADER = "X-Hubbub-Kind"
SPACE_HEADER = "X-Hubbub-Space"
SESSION_HEADER = "mcp-session-id"
_MEW = MewDialect()
SWEEP_EVERY_S = 30.0
GONE_KEPT = 4096
"""How many ended sessions' reasons are kept for their next request."""
IDLE_TIMEOUT_S = 30 * 60.0
"""A session with no request in flight (an open event stream counts) for this long ends, as
the SDK's own ``session_idle_timeout`` would (its default, 30 minutes)."""
GONE_GRACE_S = 180.0
"""A session whose event stream (its ``GET``) closed and which has no request in flight ends
after this long (``HUBBUB_MCP_GONE_GRACE_S``): its client most likely exited without the
``DELETE`` (Claude Code, Gemini CLI, the Inspector, the TypeScript SDK's ``close()``)."""


def gone_grace_s(env: Mapping[str, str] | None = None) -> float:
    """:data:`GONE_GRACE_S`, or ``HUBBUB_MCP_GONE_GRACE_S`` when set."""
    raw = (os.environ if env is None else env).get("HUBBUB_MCP_GONE_GRACE_S")
    if not raw:
        return GONE_GRACE_S
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise ValueError(
            f"HUBBUB_MCP_GONE_GRACE_S={raw!r}: write a number of seconds more than 0, e.g. 180"
        )
    return value


_STATUS = {
    ErrorCode.AUTH_FAILED: 401,
    ErrorCode.WRONG_SPACE: 403,
    ErrorCode.UNKNOWN_SPACE: 404,
    ErrorCode.INVALID_ID: 400,
    ErrorCode.UNAVAILABLE: 503,
    ErrorCode.DUPLICATE_ID: 409,
    ErrorCode.SESSION_DISPLACED: 409,
}


# ---------------------------------------------------------------------- the in-process seat


class SeatConnection(Connection):
    """The receiver of an in-process session: the driver of its port hands each envelope to
    the session's :class:`~hubbub.mcp.desk.Desk`, in order, at the end of the loop turn —
    the envelopes themselves, as delivery made them (no encode, frame or decode between).

    The port's bound (``limits.send_buffer_bytes``) covers what the desk keeps for
    ``listen``: the bytes of each message it keeps are held until ``listen`` returns it. An
    idle session past the bound is a slow consumer: the port closes (policy ``CLOSE``), the
    participant is detached and the door ends the session at once (``on_end``), so that its
    next request is told why; the next session's ``listen`` resumes where this one stopped.
    A session another connection of its participant displaced ends at once too."""

    __slots__ = ("_held", "_ledger", "desk", "on_end")

    def __init__(
        self,
        desk: Desk,
        bound: int,
        on_overflow: Callable[[Connection], None],
        on_end: Callable[[str], None],
    ) -> None:
        super().__init__(_MEW, Port(bound, Overflow.CLOSE, envelopes=True), on_overflow, "mcp")
        self.desk = desk
        self.on_end = on_end
        self._ledger: deque[tuple[Envelope, int]] = deque()
        """The messages handed to the desk that it kept for ``listen``, with their bytes."""
        self._held = 0

    def flush(self) -> None:
        """Hand the turn's envelopes to the desk; end the session when it fell too far
        behind, or when another connection of its participant displaced it."""
        port = self.port
        if not port.frames:
            return
        items = port.drain()
        if self.closed:
            return
        desk = self.desk
        displaced: str | None = None
        for data, sent in items:
            envs = (sent,) if isinstance(sent, Envelope) else (sent or ())
            share = len(data) // len(envs) if envs else 0
            for sent_env in envs:
                env = materialized(sent_env)  # shared with every receiver: never changed
                try:
                    desk.receive(env)
                except Exception:
                    log.exception("an MCP session could not take an envelope")
                    continue
                inbox = desk.inbox
                if inbox and inbox[-1] is env:  # kept for listen: held till it is returned
                    self._ledger.append((env, share))
                    self._held += share
                elif env.kind == "system/session-displaced" and self.desk.me in (env.to or ()):
                    displaced = str(env.payload.get("reason") or "replaced by a new session")
        if displaced is not None:
            self._end(displaced)
            return
        if self._held > port.bound:
            self._recount()
        if not port.settle(self._held):
            self.overflow()

    def _recount(self) -> None:
        """Forget the held messages ``listen`` has returned since (they left the inbox)."""
        kept = {id(e) for e in self.desk.inbox}
        self._ledger = deque(x for x in self._ledger if id(x[0]) in kept)
        self._held = sum(n for _, n in self._ledger)

    def end_slow(self) -> None:
        """The desk is told, the door ends the session."""
        reason = self.port.closed or "slow consumer"
        self._end(f"{reason}: messages this session did not listen for (limits.send_buffer_bytes)")

    def close(self, code: int, reason: str) -> None:
        """The gateway ends the session (kicked, shutting down, replaced)."""
        if self.closed:
            return
        self.flush()  # what was sent before the close reaches the desk first
        self._end(reason or "closed by the gateway")

    def _end(self, reason: str) -> None:
        """Close the port, tell the desk and the door."""
        self.closed = True
        self.port.close(reason)
        self._ledger.clear()
        self._held = 0
        self.desk.closed_by(reason)
        self.on_end(reason)


class SessionSeat:
    """A :class:`~hubbub.mcp.seat.Seat` on a gateway session attached in this process."""

    _ids = itertools.count(1)

    def __init__(self, router: Gateway) -> None:
        self.router = router
        self.session: Session | None = None
        self.on_closed: Callable[[], None] | None = None
        self.release: Callable[[], None] | None = None
        """Gives back the session's slot of its address's connection caps (once)."""
        self._prefix = os.urandom(4).hex()

    def new_id(self) -> str:
        """A fresh client id, unique in this process."""
        return f"mcp-{self._prefix}-{next(self._ids)}"

    async def send(self, env: Envelope) -> None:
        """Hand ``env`` to the gateway as this session's next frame."""
        from hubbub.mcp.seat import SeatClosed

        s = self.session
        if s is None or s.space.online.get(s.id) is not s:
            raise SeatClosed("this MCP session's participant is no longer connected")
        self.router.receive(s, encode(env))

    def participants(self) -> Mapping[str, Mapping[str, Any]]:
        """Who is online: the space's sessions, read in place."""
        s = self.session
        return _Online(s.space.online if s is not None else {})

    async def close(self) -> None:
        """Detach the session: the participant goes offline."""
        self.detach()

    def detach(self) -> None:
        """:meth:`close`, now (the door ends a session from a connection's callback)."""
        s, self.session = self.session, None
        if s is not None:
            self.router.detach(s)
        release, self.release = self.release, None
        if release is not None:
            release()
        if self.on_closed is not None:
            self.on_closed()


class _Online(Mapping[str, Mapping[str, Any]]):
    """A space's online sessions as id → summary, without a copy."""

    def __init__(self, online: Mapping[str, Session]) -> None:
        self._online = online

    def __getitem__(self, pid: str) -> Mapping[str, Any]:
        return self._online[pid].summary()

    def __iter__(self) -> Iterator[str]:
        return iter(self._online)

    def __len__(self) -> int:
        return len(self._online)


# ---------------------------------------------------------------------- who is asking


@dataclass(frozen=True, slots=True)
class Caller:
    """The credentials of a request to ``/mcp`` (the same on every request of a session)."""

    token: str | None
    participant: str | None
    kind: str
    space: str | None

    @classmethod
    def of(cls, request: web.Request) -> Caller:
        """Read them from the headers (or the query)."""
        h, q = request.headers, request.query
        return cls(
            token=request_token(request),
            participant=h.get(PARTICIPANT_HEADER) or q.get("as") or None,
            kind=h.get(KIND_HEADER) or q.get("kind") or "agent",
            space=h.get(SPACE_HEADER) or q.get("space") or None,
        )

    def hello(self, router: Gateway) -> dict[str, object]:
        """The MEW join frame this caller's connection opens with (no channel is asked for:
        the space's defaults apply, as for a plain MEW join)."""
        pid, space = self.participant, router.auth.addressed_space(self.space)
        if self.token:
            owner = router.auth.lookup_token(self.token)
            if owner is not None:
                space = self.space or owner[0]
                pid = pid or owner[1]
            elif not router.auth.ignores_unknown_token(space, "an MCP client"):
                raise ProtocolError(
                    ErrorCode.AUTH_FAILED,
                    "unknown token: send 'Authorization: Bearer <token>' with a token of this "
                    "space (create one with "
                    "`hubbub token create --space-config space.yaml --id <id>`)",
                )
        if not pid and not router.auth.ignores_unknown_token(space, "an MCP client"):
            raise ProtocolError(
                ErrorCode.AUTH_FAILED,
                f"space {space!r} requires a token: send 'Authorization: Bearer <token>' "
                "(create one with `hubbub token create --space-config space.yaml --id <id>`)",
            )
        if not pid:
            raise ProtocolError(
                ErrorCode.INVALID_ID,
                f"no participant: this gateway is in open mode, so name yourself with the "
                f"header '{PARTICIPANT_HEADER}: <id>' (or ?as=<id>), or send "
                "'Authorization: Bearer <token>'",
            )
        frame: dict[str, object] = {
            "type": "join",
            "participantId": pid,
            "space": space,
            "kind": self.kind,
        }
        if self.token:
            frame["token"] = self.token
        return frame


def _refusal(exc: ProtocolError) -> web.Response:
    status = _STATUS.get(exc.code, 403)
    headers = {"WWW-Authenticate": 'Bearer realm="hubbub"'} if status == 401 else None
    return web.json_response(
        {"error": exc.code.value, "message": exc.message}, status=status, headers=headers
    )


# ---------------------------------------------------------------------- the door


class CapReached(Exception):
    """A new session would pass its address's (or the gateway's) connection cap."""


@dataclass
class _Open:
    caller: Caller
    desk: Desk
    seat: SessionSeat
    in_flight: int = 0
    """Requests of this session being served (its open event stream is one)."""
    last_active: float = 0.0
    """When its last request ended (the door's clock)."""
    opening: tuple[str, str] | None = None
    """(space, participant) while its ``initialize`` is being answered."""
    streamed: bool = False
    """Whether its client opened an event stream (a ``GET``): once that closes and nothing
    is in flight, the session ends after :attr:`McpDoor.gone_grace_s`."""
    sid: str | None = None
    """Its ``Mcp-Session-Id``, once its ``initialize`` is answered."""
    posts: int = 0
    """Requests other than its event stream (``GET``) being served."""
    ended: str | None = None
    """Why the gateway ended it (:meth:`McpDoor.end`); None while it is open."""
    deleted: bool = False
    """Whether the SDK's session was ended too."""


@dataclass
class McpDoor:
    """The MCP server of one gateway: the SDK's session manager and the open sessions."""

    router: Gateway
    open_session: OpenSession
    manager: Any = None
    sessions: dict[str, _Open] = field(default_factory=dict)
    cursors: ListenCursors | None = None
    clock: Callable[[], float] = time.monotonic
    opening: set[tuple[str, str]] = field(default_factory=set)
    """The participants whose ``initialize`` is being answered: one at a time each."""
    gone_grace_s: float = field(default_factory=gone_grace_s)
    """How long a session whose event stream closed stays (see :data:`GONE_GRACE_S`)."""
    gate: ConnectionGate | None = None
    """The public port's connection caps, which every session counts against (None: no
    caps, a gateway served by a site of its own)."""
    gone: OrderedDict[str, tuple[Caller, str]] = field(default_factory=OrderedDict)
    """The sessions the gateway ended lately: id → (its caller, why), told to their next
    request."""
    _runner: asyncio.Task[None] | None = None
    _stop: asyncio.Event = field(default_factory=asyncio.Event)

    async def start(self) -> None:
        """Build the MCP server and run the session manager (on the first request)."""
        if self.manager is not None:
            return
        from mcp.server.transport_security import TransportSecuritySettings

        from hubbub.mcp.tools import build_server

        server = build_server()
        # the SDK's session manager, made by its public app builder (the Starlette app it
        # returns is not used: aiohttp serves /mcp). Origin and Host rules are the
        # gateway's (web_guard), idle sessions are ended by sweep()
        server.streamable_http_app(
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
            session_idle_timeout=None,
        )
        self.manager = server.session_manager
        started = asyncio.Event()

        async def run() -> None:
            async with self.manager.run():
                started.set()
                while not self._stop.is_set():
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(SWEEP_EVERY_S):
                            await self._stop.wait()
                    await self.sweep()

        self._runner = asyncio.create_task(run())
        await started.wait()

    async def sweep(self) -> None:
        """End the sessions idle for :data:`IDLE_TIMEOUT_S` (no request in flight, no open
        event stream), or for :attr:`gone_grace_s` once their event stream closed: the SDK's
        session with a ``DELETE`` of its own, then the participant's connection."""
        now = self.clock()
        for sid, opened in list(self.sessions.items()):
            limit = self.gone_grace_s if opened.streamed else IDLE_TIMEOUT_S
            if opened.in_flight == 0 and now - opened.last_active >= limit:
                self.sessions.pop(sid, None)
                await self._delete(sid)
                await opened.seat.close()

    async def _delete(self, sid: str) -> None:
        """``DELETE /mcp`` for session ``sid``, as its client would send it."""
        scope = {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.3"},
            "http_version": "1.1",
            "method": "DELETE",
            "scheme": "http",
            "path": MCP_PATH,
            "raw_path": MCP_PATH.encode(),
            "root_path": "",
            "query_string": b"",
            "headers": [(SESSION_HEADER.encode(), sid.encode())],
            "client": None,
            "server": None,
        }

        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message: dict[str, Any]) -> None:
            pass

        with contextlib.suppress(Exception):
            await self.manager.handle_request(scope, receive, send)

    async def stop(self) -> None:
        """End every session and the manager."""
        for opened in list(self.sessions.values()):
            await opened.seat.close()
        self.sessions.clear()
        self._stop.set()
        if self._runner is not None:
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await self._runner

    async def open(self, caller: Caller, address: str = "") -> _Open:
        """Attach a new participant connection for ``caller`` from ``address`` (raises
        ProtocolError: 409 while another ``initialize`` of the same participant is being
        answered; :class:`CapReached` over the connection caps); call :meth:`opened` once its
        ``initialize`` is answered."""
        hello = caller.hello(self.router)
        key = (str(hello["space"]), str(hello["participantId"]))
        if key in self.opening:
            raise ProtocolError(
                ErrorCode.DUPLICATE_ID,
                f"another initialize of participant {key[1]!r} is being answered; use the "
                "session it opens, or initialize again once it is answered (a new session "
                "replaces the old one)",
            )
        gate = self.gate
        if gate is not None:
            verdict = gate.hold(address)
            if verdict is not Verdict.SERVE:
                raise CapReached(refusal_message(verdict, gate.caps))
        self.opening.add(key)
        try:
            opened = await self._open(caller, hello)
        except BaseException:
            self.opening.discard(key)
            if gate is not None:
                gate.release(address, Verdict.SERVE)
            raise
        if gate is not None:
            opened.seat.release = lambda: gate.release(address, Verdict.SERVE)
        opened.opening = key
        return opened

    def opened(self, opened: _Open) -> None:
        """``opened``'s ``initialize`` is answered: another may open the participant again."""
        if opened.opening is not None:
            self.opening.discard(opened.opening)
            opened.opening = None

    async def _open(self, caller: Caller, hello: dict[str, object]) -> _Open:
        from hubbub.mcp.desk import Desk
        from hubbub.mcp.seat import SeatClosed
        from hubbub.mcp.settings import ListenSettings

        if self.cursors is None:
            self.cursors = self.router.listen_cursors
        cursors = self.cursors
        cursor = await cursors.get(str(hello["space"]), str(hello["participantId"]))
        if cursor is not None:
            hello |= cursor.hello_fields()
        seat = SessionSeat(self.router)

        async def save_cursor(at: ListenCursor) -> None:
            s = seat.session
            if s is not None and s.space.online.get(s.id) is s:  # not a replaced session
                await cursors.save(s.space.id, s.id, at)

        desk = Desk(
            seat,
            str(hello["participantId"]),
            ListenSettings.from_env(),
            resume=cursor,
            on_cursor=save_cursor,
        )
        ending: list[_Open] = []  # the session, once it is made (the connection may end first)

        def on_end(reason: str) -> None:
            if ending:
                self.end(ending[0], reason)

        conn = SeatConnection(
            desk, self.router.limits.send_buffer_bytes, self.router.on_overflow, on_end
        )
        session, refusal = await self.open_session(self.router, _MEW, hello, conn)
        if session is None:
            assert refusal is not None
            raise refusal
        seat.session = session
        from hubbub.mcp.desk import DeskError

        try:
            await desk.catch_up()  # what the last listen left is in the inbox before any tool
            if cursor is None:  # a first session starts the cursor where it joined
                await desk.checkpoint()
        except DeskError as exc:
            await seat.close()
            raise ProtocolError(
                ErrorCode.UNAVAILABLE,
                f"could not resume where this participant's listen stopped ({exc}); "
                "open the session again in a moment",
            ) from None
        except SeatClosed as exc:  # another connection took the id meanwhile (a WebSocket)
            await seat.close()
            raise ProtocolError(
                ErrorCode.SESSION_DISPLACED,
                f"participant {hello['participantId']!r} was taken by another connection "
                f"while this session opened ({exc}); initialize again to take it back",
            ) from None
        except BaseException:
            await seat.close()
            raise
        opened = _Open(caller, desk, seat)
        ending.append(opened)
        if conn.closed:  # displaced or cut while it opened
            opened.ended = conn.port.closed or "closed by the gateway"
        return opened

    def end(self, opened: _Open, reason: str) -> None:
        """End ``opened`` at once (the gateway closed its connection: displaced by a newer
        session of its participant, a slow consumer, kicked): its participant is detached,
        the SDK's session ended, and its next request told ``reason``."""
        if opened.ended is not None:
            return
        opened.ended = reason
        if opened.sid is not None:
            self.sessions.pop(opened.sid, None)
            self.gone[opened.sid] = (opened.caller, reason)
            while len(self.gone) > GONE_KEPT:
                self.gone.popitem(last=False)
        # after the gateway's own detach of a displaced session (which keeps its streams for
        # the newer connection): this one only catches what nothing else detached
        asyncio.get_running_loop().call_soon(opened.seat.detach)
        # the SDK's session ends once no request of it but its event stream is being served
        # (the request that is ends it as it finishes: the route); at shutdown, the manager
        # ends them all
        if opened.sid is not None and opened.posts == 0 and not self.router.shutting_down:
            opened.deleted = True
            self.router.spawn(self._delete(opened.sid))


# ---------------------------------------------------------------------- the route


MCP_DOORS = web.AppKey("mcp_doors", list[McpDoor])
"""The app's MCP door (a list: empty until the first request to ``/mcp``)."""


def add_mcp_routes(
    app: web.Application, key: web.AppKey[Gateway], open_session: OpenSession
) -> None:
    """Serve ``/mcp`` on ``app`` (the MCP server starts with the first request); sessions
    attach with ``open_session``, as WebSocket connections do."""
    doors: list[McpDoor] = []  # the one door, made by the first request
    app[MCP_DOORS] = doors

    async def endpoint(request: web.Request) -> web.StreamResponse:
        router = request.app[key]
        try:
            from hubbub.mcp.tools import CURRENT_DESK
        except ModuleNotFoundError as exc:
            return web.json_response(
                {
                    "error": "unavailable",
                    "message": f"/mcp needs the mcp package ({exc.name} is missing): "
                    f"{install_command('mcp')}",
                },
                status=501,
            )
        if not doors:
            gates = request.app.get(CONNECTION_GATES) or []
            doors.append(McpDoor(router, open_session, gate=gates[0] if gates else None))
        door = doors[0]
        await door.start()
        version = request.headers.get("mcp-protocol-version")
        if version is not None and not _handshake_version(version):
            return web.json_response(
                {
                    "jsonrpc": "2.0",
                    "id": None,
                    "error": {
                        "code": -32600,
                        "message": f"MCP protocol {version} is not served here: /mcp speaks "
                        "the session protocol (2025-06-18 and later handshake versions); "
                        "initialize to open a session",
                    },
                },
                status=400,
            )
        caller = Caller.of(request)
        sid = request.headers.get(SESSION_HEADER)
        if sid is not None:
            opened = door.sessions.get(sid)
            gone = door.gone.get(sid) if opened is None else None
            if gone is not None and gone[0] == caller:
                return web.json_response(
                    {"jsonrpc": "2.0", "id": None,
                     "error": {"code": -32600, "message": f"Session not found: the gateway "
                               f"ended this session ({gone[1]}); initialize a new session: "
                               "its listen resumes where this one stopped"}},
                    status=404,
                )  # fmt: skip
            if opened is not None and opened.caller != caller:
                return web.json_response(
                    {"jsonrpc": "2.0", "id": None,
                     "error": {"code": -32600, "message": "Session not found"}},
                    status=404,
                )  # fmt: skip
            # the SDK runs each message's handler in the context of the request that
            # carried it: that is where the tools find their desk
            token = CURRENT_DESK.set(opened.desk) if opened is not None else None
            cancelled = await _cancelled_requests(request) if opened is not None else []
            post = request.method != "GET"
            if opened is not None:
                opened.in_flight += 1
                opened.posts += post
                opened.streamed |= not post
            try:
                response = await serve_asgi(request, door.manager.handle_request)
            finally:
                if token is not None:
                    CURRENT_DESK.reset(token)
                if opened is not None:
                    opened.in_flight -= 1
                    opened.posts -= post
                    opened.last_active = door.clock()
                    if opened.ended is not None and not opened.posts and not opened.deleted:
                        opened.deleted = True  # ended meanwhile: its answer is out now
                        await door._delete(sid)
            for rid in cancelled:  # cancelled after its answer was written: offered again
                assert opened is not None
                await opened.desk.reoffer(rid)
            ended = request.method == "DELETE" and response.status < 300
            if opened is not None and (ended or response.status == 404):
                # ended by its client, or by the SDK on its own (a crashed session): the
                # participant's connection ends with it
                door.sessions.pop(sid, None)
                await opened.seat.close()
            return response
        if request.method != "POST":
            return web.json_response(
                {
                    "error": "no_session",
                    "message": "open an MCP session first: POST an initialize request to /mcp",
                },
                status=400,
            )
        try:
            opened = await door.open(caller, request.remote or "")
        except ProtocolError as exc:
            return _refusal(exc)
        except CapReached as exc:
            return web.json_response(
                {"error": "too_many_connections", "message": str(exc)}, status=503
            )
        started: list[str] = []

        def register(sid: str) -> None:
            opened.sid = sid
            opened.last_active = door.clock()
            door.sessions[sid] = opened

            def forget() -> None:
                if door.sessions.get(sid) is opened:
                    door.sessions.pop(sid, None)

            opened.seat.on_closed = forget

        def on_start(status: int, headers: list[tuple[bytes, bytes]]) -> None:
            # answered from here on: the client may use the session, or initialize again, as
            # soon as it reads the answer, before this handler's last steps run; so the door
            # knows the session before its id leaves (a newer one replaces it)
            door.opened(opened)
            for k, v in headers:
                if k.lower() == SESSION_HEADER.encode() and status < 400:
                    started.append(v.decode("latin-1"))
            if started and opened.ended is None:
                register(started[0])

        desk_token = CURRENT_DESK.set(opened.desk)
        try:
            response = await serve_asgi(request, door.manager.handle_request, on_start)
        finally:
            CURRENT_DESK.reset(desk_token)
            door.opened(opened)
        if not started:
            await opened.seat.close()
        elif opened.sid is None:  # displaced before its initialize was answered
            opened.sid = started[0]
            reason, opened.ended = opened.ended or "closed by the gateway", None
            door.end(opened, reason)
        return response

    async def cleanup(app: web.Application) -> None:
        for door in doors:
            await door.stop()
        doors.clear()

    app.router.add_route("*", MCP_PATH, endpoint)
    app.on_shutdown.append(cleanup)


CANCEL_SNIFF_BYTES = 4096
"""A POST this small is read for ``notifications/cancelled`` (they are a few hundred bytes)."""


async def _cancelled_requests(request: web.Request) -> list[str]:
    """The request ids a POST's ``notifications/cancelled`` name (as the tools see them:
    strings), so a ``listen`` whose answer was written already offers its batch again."""
    if request.method != "POST" or (request.content_length or 0) > CANCEL_SNIFF_BYTES:
        return []
    body = await request.read()  # kept: the bridge reads the same bytes
    if b"notifications/cancelled" not in body:
        return []
    try:
        parsed = json.loads(body)
    except ValueError:
        return []
    out = []
    for msg in parsed if isinstance(parsed, list) else [parsed]:
        if isinstance(msg, dict) and msg.get("method") == "notifications/cancelled":
            params = msg.get("params")
            rid = params.get("requestId") if isinstance(params, dict) else None
            if isinstance(rid, str | int) and not isinstance(rid, bool):
                out.append(str(rid))
    return out


def _handshake_version(version: str) -> bool:
    try:
        from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
    except ModuleNotFoundError:  # pragma: no cover - mcp is installed when this runs
        return True
    return version in HANDSHAKE_PROTOCOL_VERSIONS
