"""The public side of a cluster node: clients' WebSockets, health, metrics, the rest forwarded."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

import msgspec
from aiohttp import web

from hubbub import __version__
from hubbub.cluster.node import Node
from hubbub.cluster.proxy import forward, unavailable
from hubbub.protocol.dialect import Dialect
from hubbub.protocol.errors import ErrorCode, ProtocolError
from hubbub.server.app import Accepted, accept_websocket, error_frames, pump, run_session
from hubbub.server.config import Limits
from hubbub.server.http.health import HEALTHY
from hubbub.server.listener import GuardedSite
from hubbub.server.state.connection import SocketConnection
from hubbub.server.web_guard import browser_guard

NODE_KEY = web.AppKey("node", Node)
_NO_LEADER = (
    "no leader for this space right now (a node died or Redis is away); reconnect in a few "
    "seconds, or check `GET /health` of the nodes"
)


async def _health(request: web.Request) -> web.Response:
    """``GET /health``: this node, its connections, the cluster's nodes and Redis."""
    node = request.app[NODE_KEY]
    cluster = await node.health()
    settled = all(cluster["leaders"].values())
    return web.json_response(
        {
            "status": HEALTHY if cluster["redis"]["reachable"] and settled else "degraded",
            "version": __version__,
            "spaces": sorted(node.seats),
            "connections": node.local_connections,
            "cluster": cluster,
        }
    )


async def _metrics(request: web.Request) -> web.Response:
    node = request.app[NODE_KEY]
    return web.Response(
        body=node.metrics.render(),
        headers={"Content-Type": "text/plain; version=0.0.4; charset=utf-8"},
    )


async def _websocket(request: web.Request) -> web.StreamResponse:
    node = request.app[NODE_KEY]
    limits: Limits = request.app[LIMITS_KEY]
    accepted = await accept_websocket(request, limits, _health)
    if not isinstance(accepted, Accepted):
        return accepted
    node.local_connections += 1
    try:
        try:
            seat = node.seat_of_hello(accepted.dialect.parse_hello(accepted.hello))
        except ProtocolError as exc:
            await accepted.refuse(exc)
            return accepted.ws
        uplink = await seat.uplink_ready(node.settings.join_wait_s)
        router = seat.router
        if router is not None:
            await run_session(accepted, router)
        elif uplink is None:
            await accepted.refuse(ProtocolError(ErrorCode.UNAVAILABLE, _NO_LEADER))
        else:
            conn = SocketConnection(
                accepted.transport,
                accepted.dialect,
                limits.send_buffer_bytes,
                lambda c: None,  # the transport is aborted: the pump ends, the leader is told
                accepted.peer,
            )
            hello = msgspec.json.encode(accepted.hello)
            sid = uplink.open(conn, accepted.dialect.name, hello, accepted.peer)

            def up(data: bytes | str) -> None:
                if not uplink.forward(sid, data):
                    conn.send(error_frames(conn.dialect, _stalled(conn.dialect, data)))

            try:
                await pump(accepted.ws, conn, up, limits)
            finally:
                uplink.gone(sid)
    finally:
        node.local_connections -= 1
    return accepted.ws


async def _forwarded(request: web.Request) -> web.StreamResponse:
    node = request.app[NODE_KEY]
    leader = node.seat_of_request(request).leader
    if leader is None:
        return unavailable(_NO_LEADER)
    return await forward(request, node.http, leader.link, node.secret)


def _stalled(dialect: Dialect, data: bytes | str) -> ProtocolError:
    """The refusal of a frame the space's leader cannot take now (naming the frame's id)."""
    try:
        env = dialect.decode(data)
        ref = getattr(env, "id", None)
    except (ProtocolError, ValueError, msgspec.DecodeError):
        ref = None
    return ProtocolError(
        ErrorCode.UNAVAILABLE,
        "the space's leader is not keeping up with this gateway; nothing was accepted: "
        "send it again in a few seconds",
        correlation_id=ref if isinstance(ref, str) else None,
    )


LIMITS_KEY = web.AppKey("limits", Limits)


def build_node_app(node: Node, limits: Limits) -> web.Application:
    """The application every node serves on the public port."""
    app = web.Application(
        client_max_size=limits.max_frame_bytes + 4096,
        middlewares=[browser_guard(limits.allowed_origins, limits.allowed_hosts)],
    )
    app[NODE_KEY] = node
    app[LIMITS_KEY] = limits
    app.router.add_get("/ws", _websocket)
    app.router.add_get("/", _websocket)
    app.router.add_get("/health", _health)
    app.router.add_get("/metrics", _metrics)
    app.router.add_route("*", "/{tail:.*}", _forwarded)

    async def lifecycle(app: web.Application) -> AsyncIterator[None]:
        await node.start()
        yield
        await node.stop()

    app.cleanup_ctx.append(lifecycle)

    async def on_shutdown(app: web.Application) -> None:
        node.close_clients()  # else each open WebSocket holds the shutdown for its timeout

    app.on_shutdown.append(on_shutdown)
    return app


async def serve_node(
    node: Node,
    limits: Limits,
    host: str,
    port: int,
    reuse_port: bool,
    listening: Callable[[int], None] | None = None,
) -> None:
    """Serve a cluster node on ``host:port`` until cancelled; ``listening`` is called with
    the bound port once the node has joined and the port is bound."""
    runner = web.AppRunner(
        build_node_app(node, limits),
        shutdown_timeout=5.0,
        handle_signals=False,
        access_log=None,
        keepalive_timeout=75.0,
    )
    await runner.setup()
    site = GuardedSite(runner, host, port, limits, node.metrics, reuse_port=reuse_port)
    try:
        await site.start()
    except BaseException:
        await runner.cleanup()  # the node leaves the cluster it joined in setup()
        raise
    if listening is not None:
        listening(site.port)
    try:
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()
