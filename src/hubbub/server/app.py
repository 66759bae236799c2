"""The aiohttp application: the WebSocket endpoint and the HTTP API on one port."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import msgspec
from aiohttp import WSMsgType, web

from hubbub import __version__
from hubbub.protocol.agentchat import AgentchatDialect, is_agentchat_frame, is_agentchat_hello
from hubbub.protocol.dialect import Dialect
from hubbub.protocol.envelope import PROTOCOL, Envelope
from hubbub.protocol.errors import ErrorCode, ProtocolError
from hubbub.protocol.mew import MewDialect, is_mew_hello
from hubbub.server.admin import add_admin_routes
from hubbub.server.chat_http import add_chat_routes
from hubbub.server.config import EngineSettings, Limits, SpaceConfig, open_space
from hubbub.server.connection import CLOSE_POLICY, CLOSE_TOO_BIG, Connection, ws_text_frame
from hubbub.server.dashboard_http import add_dashboard_routes
from hubbub.server.http_api import add_http_routes
from hubbub.server.listener import GuardedSite
from hubbub.server.metrics import Metrics
from hubbub.server.router import Router
from hubbub.server.web_assets import add_asset_routes
from hubbub.server.web_guard import browser_guard
from hubbub.store.base import Durability, Store
from hubbub.store.memory import MemoryStore
from hubbub.store.sqlite import SqliteStore

log = logging.getLogger("hubbub.server")

ROUTER_KEY = web.AppKey("router", Router)
_MEW = MewDialect()
_AGENTCHAT = AgentchatDialect()


def _error_frame(dialect: Dialect, exc: ProtocolError) -> bytes:
    env = Envelope(
        kind="system/error",
        protocol=PROTOCOL,
        from_="system:gateway",
        payload={"error": exc.code.value, "message": exc.message, **exc.extra},
    )
    return b"".join(ws_text_frame(p) for p in dialect.encode(env))


async def _refuse(
    ws: web.WebSocketResponse, transport: asyncio.Transport, dialect: Dialect, exc: ProtocolError
) -> None:
    """Tell the client why it is refused, then close with 1008."""
    if not transport.is_closing():
        transport.write(_error_frame(dialect, exc))
    await ws.close(code=CLOSE_POLICY, message=exc.message[:120].encode())


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
    except ValueError as exc:  # msgspec.DecodeError and UnicodeDecodeError are ValueErrors
        return None, f" (it is not valid JSON: {exc})"


def _before_identify(frame: object) -> str | None:
    """The type of a handshake frame that is an agentchat frame other than IDENTIFY."""
    if isinstance(frame, dict) and is_agentchat_frame(frame) and not is_agentchat_hello(frame):
        return str(frame["type"])
    return None


async def websocket_endpoint(request: web.Request) -> web.StreamResponse:
    """``/ws`` (and ``/``): the first frame selects the dialect, then frames are routed."""
    router = request.app[ROUTER_KEY]
    limits = router.limits
    hard_cap = max(limits.max_frame_bytes * 4, 1024 * 1024)
    ws = web.WebSocketResponse(
        max_msg_size=hard_cap,
        compress=False,
        autoping=True,
        heartbeat=limits.ping_interval_s or None,
    )
    if not ws.can_prepare(request).ok:
        return (
            await health(request)
            if request.path == "/"
            else web.Response(
                status=426, text="this endpoint speaks WebSocket; connect with a WebSocket client\n"
            )
        )
    await ws.prepare(request)
    transport = request.transport
    assert transport is not None
    peer = str(request.remote)
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
            return ws
        if first.type not in (WSMsgType.TEXT, WSMsgType.BINARY):
            return ws
        frame, why = _read_first(first.data)
        early_type = _before_identify(frame)
        if early_type is None:
            break
        early += 1
        refusal = ProtocolError(
            ErrorCode.AUTH_REQUIRED,
            f"{early_type} before IDENTIFY: send IDENTIFY {{name, token?}} first",
        )
        if early > MAX_FRAMES_BEFORE_IDENTIFY:
            await _refuse(ws, transport, _AGENTCHAT, refusal)
            return ws
        if not transport.is_closing():
            transport.write(_error_frame(_AGENTCHAT, refusal))
    if not isinstance(frame, dict):
        await _refuse(
            ws,
            transport,
            _MEW,
            ProtocolError(
                ErrorCode.HANDSHAKE_REQUIRED,
                'first frame must be a JSON object: {"type":"join",...} (MEW) or '
                '{"type":"IDENTIFY",...} (agentchat)' + why,
            ),
        )
        return ws
    dialect: Dialect
    if is_mew_hello(frame):
        dialect = _MEW
    elif is_agentchat_hello(frame):
        dialect = _AGENTCHAT
    else:
        await _refuse(
            ws,
            transport,
            _MEW,
            ProtocolError(
                ErrorCode.HANDSHAKE_REQUIRED,
                'first frame must be {"type":"join",...} (MEW) or {"type":"IDENTIFY",...} '
                "(agentchat)",
            ),
        )
        return ws
    try:
        hello = dialect.parse_hello(frame)
        ident = router.authenticate(hello)
    except ProtocolError as exc:
        router.metrics.errors[exc.code.value] += 1
        await _refuse(ws, transport, dialect, exc)
        return ws
    except Exception:
        log.exception("handshake failed")
        router.metrics.errors[ErrorCode.INTERNAL.value] += 1
        failure = ProtocolError(ErrorCode.INTERNAL, "internal error while joining; try again")
        await _refuse(ws, transport, dialect, failure)
        return ws
    conn = Connection(transport, dialect, limits.send_buffer_bytes, router.on_overflow, peer)
    session = await router.attach(ident, conn, hello)
    try:
        async for msg in ws:
            if msg.type == WSMsgType.TEXT or msg.type == WSMsgType.BINARY:
                router.receive(session, msg.data)
            elif msg.type == WSMsgType.ERROR:
                problem = ws.exception()
                if problem is not None and "too big" in str(problem).lower():
                    conn.close(CLOSE_TOO_BIG, f"frame over the hard cap of {hard_cap} bytes")
                break
    finally:
        router.detach(session)
    return ws


async def health(request: web.Request) -> web.Response:
    """``GET /health``: liveness and a few counts."""
    router = request.app[ROUTER_KEY]
    return web.json_response(
        {
            "status": "ok",
            "version": __version__,
            "spaces": sorted(router.spaces),
            "connections": sum(len(s.online) for s in router.spaces.values()),
        }
    )


def build_app(router: Router) -> web.Application:
    """The aiohttp application serving the gateway on one port."""
    app = web.Application(
        client_max_size=router.limits.max_frame_bytes + 4096,
        middlewares=[browser_guard(router.limits.allowed_origins)],
    )
    app[ROUTER_KEY] = router
    app.router.add_get("/ws", websocket_endpoint)
    app.router.add_get("/", websocket_endpoint)
    app.router.add_get("/health", health)
    add_http_routes(app, ROUTER_KEY)
    add_dashboard_routes(app, ROUTER_KEY)
    add_admin_routes(app, ROUTER_KEY)
    add_chat_routes(app, ROUTER_KEY)
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
) -> Router:
    """A router over the given spaces (open mode when none) and store (SQLite in data_dir)."""
    if store is None:
        store = (
            MemoryStore()
            if data_dir is None
            else SqliteStore(Path(data_dir) / "hubbub.db", durability)
        )
    return Router(
        spaces or [open_space()],
        store,
        limits or Limits(),
        Metrics(),
        engine_settings=engines,
        engine_clock=clock,
    )


async def serve_forever(
    router: Router, host: str, port: int, stop: asyncio.Event | None = None
) -> None:
    """Run the gateway until ``stop`` is set or the task is cancelled, then shut down cleanly."""
    runner = web.AppRunner(
        build_app(router),
        shutdown_timeout=5.0,
        handle_signals=False,
        access_log=None,
        keepalive_timeout=75.0,
    )
    await runner.setup()
    site = GuardedSite(runner, host, port, router.limits, router.metrics)
    await site.start()
    try:
        await (stop or asyncio.Event()).wait()
    finally:
        await runner.cleanup()
