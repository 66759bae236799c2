"""The aiohttp application: the WebSocket endpoint and the HTTP API on one port."""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import NamedTuple

import msgspec
from aiohttp import WSMsgType, web

from hubbub.protocol.agentchat import is_agentchat_frame, is_agentchat_hello
from hubbub.protocol.dialect import Dialect
from hubbub.protocol.dialects import AGENTCHAT, MEW, dialect_of_hello
from hubbub.protocol.envelope import PROTOCOL, Envelope, not_json_error
from hubbub.protocol.errors import ErrorCode, ProtocolError
from hubbub.protocol.hello import KEY_PROVEN
from hubbub.protocol.ids import SERVER_ID, Clock
from hubbub.protocol.keys import CHALLENGE_TTL_MS, Challenge, load_pubkey
from hubbub.server.config import EngineSettings, Limits, SpaceConfig, open_space
from hubbub.server.gateway import Gateway
from hubbub.server.http.admin import add_admin_routes
from hubbub.server.http.chat_http import add_chat_routes
from hubbub.server.http.dashboard_http import add_dashboard_routes
from hubbub.server.http.health import health_handler
from hubbub.server.http.http_api import add_http_routes
from hubbub.server.http.mcp_http import add_mcp_routes
from hubbub.server.http.observe import ActivityWatcher
from hubbub.server.listener import CONNECTION_GATES, GuardedSite
from hubbub.server.state.connection import (
    CLOSE_POLICY,
    CLOSE_TOO_BIG,
    Connection,
    SocketConnection,
    ws_text_frame,
)
from hubbub.server.state.metrics import Metrics
from hubbub.server.state.space import Session
from hubbub.server.state.visibility import sees_channel
from hubbub.server.web_assets import add_asset_routes
from hubbub.server.web_guard import browser_guard
from hubbub.store.base import Durability, Store
from hubbub.store.memory import MemoryStore
from hubbub.store.sqlite import SqliteStore

log = logging.getLogger("hubbub.server")

ROUTER_KEY = web.AppKey("router", Gateway)
_health = health_handler(ROUTER_KEY)
_MEW = MEW  # the registry's codecs (protocol/dialects.py)
_AGENTCHAT = AGENTCHAT


def error_frames(dialect: Dialect, exc: ProtocolError) -> bytes:
    """The frames telling a client why it is refused, in its dialect."""
    env = Envelope(
        kind="system/error",
        protocol=PROTOCOL,
        from_=SERVER_ID,
        payload=exc.payload(),
        correlation_id=[exc.correlation_id] if exc.correlation_id else None,
    )
    return b"".join(ws_text_frame(p) for p in dialect.encode(env))


async def _refuse(
    ws: web.WebSocketResponse, transport: asyncio.Transport, dialect: Dialect, exc: ProtocolError
) -> None:
    """Tell the client why it is refused, then close with 1008."""
    if not transport.is_closing():
        transport.write(error_frames(dialect, exc))
    await ws.close(code=CLOSE_POLICY, message=exc.message[:120].encode())


PENDING = "Challenge already pending"
"""The answer to a second IDENTIFY before the CHALLENGE is answered (agentchat's, exactly:
its clients and tests compare the text)."""
MAX_FRAMES_BEFORE_IDENTIFY = 10
"""agentchat frames answered ``AUTH_REQUIRED`` before the connection is refused (as agentchat's
own server, which allows 10 frames before IDENTIFY)."""


def _read_first(data: str | bytes) -> tuple[object, str]:
    """A handshake frame as JSON, or None and why it is not JSON."""
    try:
        # msgspec, like the codecs after the handshake: it refuses lone surrogates in strings
        # (json.loads accepts them, and they crash token hashing).
        return msgspec.json.decode(data), ""
    except RecursionError:
        return None, " (it nests too deeply)"
    except (msgspec.DecodeError, ValueError) as exc:  # and UnicodeDecodeError before 0.23
        not_json = not_json_error(data, exc)
        return None, f" ({not_json.message if not_json else exc})"


def _before_identify(frame: object) -> str | None:
    """The type of a handshake frame that is an agentchat frame other than IDENTIFY."""
    if isinstance(frame, dict) and is_agentchat_frame(frame) and not is_agentchat_hello(frame):
        return str(frame["type"])
    return None


def prepare_websocket(request: web.Request, limits: Limits) -> web.WebSocketResponse:
    """The WebSocket response of ``/ws``, with the gateway's frame cap and heartbeat."""
    return web.WebSocketResponse(
        max_msg_size=hard_frame_cap(limits),
        compress=False,
        autoping=True,
        heartbeat=limits.ping_interval_s or None,
    )


def hard_frame_cap(limits: Limits) -> int:
    """The largest WebSocket frame read at all (larger ones close the connection with 1009)."""
    return max(limits.max_frame_bytes * 4, 1024 * 1024)


PublicChannels = Callable[[], list[dict[str, object]]]
"""The channels an unidentified agentchat client may list (``LIST_CHANNELS`` before IDENTIFY)."""
KeyScreen = Callable[[dict[str, object]], ProtocolError | None]
"""Why an IDENTIFY's public key is refused before its challenge, or None."""


def _answer_before_identify(
    frame_type: str, channels: PublicChannels | None
) -> dict[str, object] | None:
    """agentchat's answers before IDENTIFY: ``PONG`` to ``PING``, ``CHANNELS`` to
    ``LIST_CHANNELS`` (public channels; where the node knows them); None for the others."""
    if frame_type == "PING":
        return {"type": "PONG", "ts": Clock.now_ms()}
    if frame_type == "LIST_CHANNELS" and channels is not None:
        return {"type": "CHANNELS", "list": channels(), "ts": Clock.now_ms()}
    return None


async def handshake(
    ws: web.WebSocketResponse,
    transport: asyncio.Transport,
    limits: Limits,
    channels: PublicChannels | None = None,
) -> tuple[Dialect, dict[str, object]] | None:
    """Read the first frame: the dialect and the hello frame, or None once refused."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limits.handshake_timeout_s
    early = 0  # agentchat frames before IDENTIFY, each answered AUTH_REQUIRED
    while True:
        try:
            first = await ws.receive(timeout=max(deadline - loop.time(), 0.001))
        except TimeoutError:
            await _refuse(
                ws,
                transport,
                _AGENTCHAT if early else _MEW,
                ProtocolError(
                    ErrorCode.AUTH_REQUIRED if early else ErrorCode.HANDSHAKE_REQUIRED,
                    "no join frame within the handshake timeout; send join or IDENTIFY first",
                ),
            )
            return None
        if first.type not in (WSMsgType.TEXT, WSMsgType.BINARY):
            return None
        frame, why = _read_first(first.data)
        early_type = _before_identify(frame)
        if early_type is None:
            break
        early += 1
        answer = _answer_before_identify(early_type, channels)
        if answer is not None and early <= MAX_FRAMES_BEFORE_IDENTIFY:
            if not transport.is_closing():
                transport.write(ws_text_frame(msgspec.json.encode(answer)))
            continue
        refusal = ProtocolError(
            ErrorCode.AUTH_REQUIRED,
            f"{early_type} before IDENTIFY: send IDENTIFY {{name, token?}} first",
        )
        if early > MAX_FRAMES_BEFORE_IDENTIFY:
            await _refuse(ws, transport, _AGENTCHAT, refusal)
            return None
        if not transport.is_closing():
            transport.write(error_frames(_AGENTCHAT, refusal))
    if isinstance(frame, dict):
        dialect = dialect_of_hello(frame)
        if dialect is not None:
            return dialect, frame
        what = (
            'first frame must be {"type":"join",...} (MEW) or {"type":"IDENTIFY",...} (agentchat)'
        )
    else:
        what = (
            'first frame must be a JSON object: {"type":"join",...} (MEW) or '
            '{"type":"IDENTIFY",...} (agentchat)' + why
        )
    await _refuse(ws, transport, _MEW, ProtocolError(ErrorCode.HANDSHAKE_REQUIRED, what))
    return None


async def open_session(
    router: Gateway, dialect: Dialect, frame: dict[str, object], conn: Connection
) -> tuple[Session | None, ProtocolError | None]:
    """Authenticate a hello and attach its connection: the session, or why it is refused."""
    try:
        hello = dialect.parse_hello(frame)
        ident = router.authenticate(hello, conn.peer)
    except ProtocolError as exc:
        router.metrics.errors[exc.code.value] += 1
        return None, exc
    except Exception:
        log.exception("handshake failed")
        router.metrics.errors[ErrorCode.INTERNAL.value] += 1
        return None, ProtocolError(ErrorCode.INTERNAL, "internal error while joining; try again")
    return await router.attach(ident, conn, hello), None


async def pump(
    ws: web.WebSocketResponse,
    conn: Connection,
    on_frame: Callable[[bytes | str], None],
    limits: Limits,
) -> None:
    """Hand every frame of ``ws`` to ``on_frame`` until it closes (an oversized frame: 1009)."""
    async for msg in ws:
        if msg.type == WSMsgType.TEXT or msg.type == WSMsgType.BINARY:
            on_frame(msg.data)
        elif msg.type == WSMsgType.ERROR:
            problem = ws.exception()
            if problem is not None and "too big" in str(problem).lower():
                cap = hard_frame_cap(limits)
                conn.close(CLOSE_TOO_BIG, f"frame over the hard cap of {cap} bytes")
            break


async def websocket_endpoint(request: web.Request) -> web.StreamResponse:
    """``/ws`` (and ``/``): the first frame selects the dialect, then frames are routed."""
    router = request.app[ROUTER_KEY]
    return await serve_websocket(request, router.limits, router, _health)


async def serve_websocket(
    request: web.Request,
    limits: Limits,
    router: Gateway,
    not_websocket: Callable[[web.Request], Awaitable[web.StreamResponse]],
) -> web.StreamResponse:
    """Serve one client WebSocket on ``router`` (a plain GET of ``/``: ``not_websocket``)."""
    accepted = await accept_websocket(
        request, limits, not_websocket, lambda: public_channels(router), router.screen_key
    )
    if not isinstance(accepted, Accepted):
        return accepted
    ws, serving = accepted.ws, run_session(accepted, router)
    del accepted  # run_session drops the hello once the client is attached
    await serving
    return ws


class Accepted(NamedTuple):
    """A client WebSocket whose hello was read: the socket, its dialect and hello frame."""

    ws: web.WebSocketResponse
    transport: asyncio.Transport
    dialect: Dialect
    hello: dict[str, object]
    peer: str

    async def refuse(self, exc: ProtocolError) -> None:
        """Tell the client why it is refused, then close with 1008."""
        await _refuse(self.ws, self.transport, self.dialect, exc)


async def accept_websocket(
    request: web.Request,
    limits: Limits,
    not_websocket: Callable[[web.Request], Awaitable[web.StreamResponse]],
    channels: PublicChannels | None = None,
    screen_key: KeyScreen | None = None,
) -> Accepted | web.StreamResponse:
    """Upgrade ``request`` and read its hello; the response to return when that fails
    (``screen_key``: refuses a public key before its challenge, where it knows the policy)."""
    ws = prepare_websocket(request, limits)
    if not ws.can_prepare(request).ok:
        return (
            await not_websocket(request)
            if request.path == "/"
            else web.Response(
                status=426, text="this endpoint speaks WebSocket; connect with a WebSocket client\n"
            )
        )
    await ws.prepare(request)
    transport = request.transport
    assert transport is not None
    hello = await handshake(ws, transport, limits, channels)
    if hello is None:
        return ws
    dialect, frame = hello
    frame.pop(KEY_PROVEN, None)  # only the handshake says a key is proven
    if dialect is _AGENTCHAT and frame.get("pubkey") is not None:
        refusal = screen_key(frame) if screen_key is not None else None
        if refusal is not None:  # as agentchat's server: NOT_ALLOWED instead of a CHALLENGE
            await _refuse(ws, transport, _AGENTCHAT, refusal)
            return ws
        if not await prove_key(ws, transport, frame):
            return ws
        frame[KEY_PROVEN] = True
    return Accepted(ws, transport, dialect, frame, str(request.remote))


async def prove_key(
    ws: web.WebSocketResponse, transport: asyncio.Transport, frame: dict[str, object]
) -> bool:
    """agentchat's challenge: send ``CHALLENGE`` for the IDENTIFY's public key and check the
    ``VERIFY_IDENTITY`` answer; False once refused (an invalid key, a bad or late signature)."""
    try:
        load_pubkey(frame["pubkey"])
    except ProtocolError as exc:
        await _refuse(ws, transport, _AGENTCHAT, exc)
        return False
    challenge = Challenge.issue(str(frame["pubkey"]), Clock.now_ms(), secrets.token_hex(20))
    sent = {
        "type": "CHALLENGE",
        "challenge_id": challenge.challenge_id,
        "nonce": challenge.nonce,
        "expires_at": challenge.expires_at,
    }
    transport.write(ws_text_frame(msgspec.json.encode(sent)))
    loop = asyncio.get_running_loop()
    deadline = loop.time() + CHALLENGE_TTL_MS / 1000
    others = 0
    while True:
        try:
            msg = await ws.receive(timeout=max(deadline - loop.time(), 0.001))
        except TimeoutError:
            expired = ProtocolError(
                ErrorCode.VERIFICATION_EXPIRED,
                f"Challenge expired: answer it within {CHALLENGE_TTL_MS // 1000} s",
            )
            await _refuse(ws, transport, _AGENTCHAT, expired)
            return False
        if msg.type not in (WSMsgType.TEXT, WSMsgType.BINARY):
            return False
        answer, _ = _read_first(msg.data)
        if isinstance(answer, dict) and answer.get("type") == "VERIFY_IDENTITY":
            try:
                challenge.check(
                    answer.get("challenge_id"),
                    answer.get("signature"),
                    answer.get("timestamp"),
                    Clock.now_ms(),
                )
            except ProtocolError as exc:
                await _refuse(ws, transport, _AGENTCHAT, exc)
                return False
            return True
        others += 1
        early = (
            ProtocolError(ErrorCode.INVALID_ENVELOPE, PENDING)  # agentchat's words, exactly
            if isinstance(answer, dict) and answer.get("type") == "IDENTIFY"
            else ProtocolError(
                ErrorCode.AUTH_REQUIRED, "answer the CHALLENGE with VERIFY_IDENTITY first"
            )
        )
        if others > MAX_FRAMES_BEFORE_IDENTIFY:
            await _refuse(ws, transport, _AGENTCHAT, early)
            return False
        if not transport.is_closing():
            transport.write(error_frames(_AGENTCHAT, early))


async def run_session(accepted: Accepted, router: Gateway) -> None:
    """Attach an accepted client to ``router`` and route its frames until it goes."""
    limits = router.limits
    ws = accepted.ws
    conn = SocketConnection(
        accepted.transport,
        accepted.dialect,
        limits.send_buffer_bytes,
        router.on_overflow,
        accepted.peer,
    )
    session, refusal = await open_session(router, accepted.dialect, accepted.hello, conn)
    if session is None:
        assert refusal is not None
        await accepted.refuse(refusal)
        return
    del accepted  # the hello is not kept for the connection's life (only its socket)
    try:
        await pump(ws, conn, partial(router.receive, session), limits)
    finally:
        router.detach(session)


def public_channels(router: Gateway) -> list[dict[str, object]]:
    """The public channels of the space an IDENTIFY without ``space`` joins, as agentchat's
    ``CHANNELS`` lists them."""
    space = router.spaces.get(router.auth.addressed_space(None))
    if space is None:
        return []
    return [
        {"name": c.name, "agents": len(c.members)}
        for c in space.channels.values()
        if sees_channel(c, None)
    ]


def build_app(router: Gateway) -> web.Application:
    """The aiohttp application serving the gateway on one port."""
    app = web.Application(
        client_max_size=router.limits.max_frame_bytes + 4096,
        middlewares=[browser_guard(router.limits.allowed_origins, router.limits.allowed_hosts)],
    )
    app[ROUTER_KEY] = router
    app[CONNECTION_GATES] = []  # the public port's gate, once its site is made
    router.events.subscribe(ActivityWatcher(router))  # the dashboard's feed
    app.router.add_get("/ws", websocket_endpoint)
    app.router.add_get("/", websocket_endpoint)
    app.router.add_get("/health", _health)
    add_http_routes(app, ROUTER_KEY)
    add_dashboard_routes(app, ROUTER_KEY)
    add_admin_routes(app, ROUTER_KEY)
    add_chat_routes(app, ROUTER_KEY)
    add_mcp_routes(app, ROUTER_KEY, open_session)  # MCP clients as participants (docs/mcp.md)
    add_asset_routes(app)

    async def lifecycle(app: web.Application) -> AsyncIterator[None]:
        await router.start()
        yield
        await router.stop()

    app.cleanup_ctx.append(lifecycle)

    async def on_shutdown(app: web.Application) -> None:
        router.close_all()

    app.on_shutdown.append(on_shutdown)
    return app


def make_router(
    spaces: list[SpaceConfig] | None = None,
    data_dir: str | Path | None = ".hubbub",
    limits: Limits | None = None,
    store: Store | None = None,
    engines: EngineSettings | None = None,
    clock: Callable[[], float] | None = None,
    durability: Durability = "process",
    wall_clock: Callable[[], float] | None = None,
) -> Gateway:
    """A gateway over the given spaces (open mode when none) and store (SQLite in data_dir)."""
    if store is None:
        store = (
            MemoryStore()
            if data_dir is None
            else SqliteStore(Path(data_dir) / "hubbub.db", durability)
        )
    return Gateway(
        spaces or [open_space()],
        store,
        limits or Limits(),
        Metrics(),
        engine_settings=engines,
        engine_clock=clock,
        wall_clock=wall_clock,
    )


async def serve_forever(
    router: Gateway,
    host: str,
    port: int,
    stop: asyncio.Event | None = None,
    listening: Callable[[int], None] | None = None,
) -> None:
    """Run the gateway until ``stop`` is set or the task is cancelled, then shut down cleanly;
    ``listening`` is called with the bound port once the port is bound."""
    runner = web.AppRunner(
        build_app(router),
        shutdown_timeout=5.0,
        handle_signals=False,
        access_log=None,
        keepalive_timeout=75.0,
    )
    await runner.setup()
    site = GuardedSite(runner, host, port, router.limits, router.metrics)
    try:
        await site.start()
    except BaseException:
        await runner.cleanup()  # the store opened in setup() is closed again
        raise
    if listening is not None:
        listening(site.port)
    try:
        await (stop or asyncio.Event()).wait()
    finally:
        await runner.cleanup()
