"""The HTTP API on the gateway's port: post messages, list participants, read history, metrics."""

from __future__ import annotations

from typing import Any, Final

import msgspec
from aiohttp import web

from hubbub.protocol.capabilities import CapabilitySet
from hubbub.protocol.envelope import decode_envelope
from hubbub.protocol.errors import ErrorCode, ProtocolError
from hubbub.protocol.ids import normalize_channel
from hubbub.server.admission.auth import Identity, check_open_id
from hubbub.server.admission.authorization import channel_access
from hubbub.server.admission.sender import HttpSender
from hubbub.server.core import pages
from hubbub.server.gateway import Gateway
from hubbub.server.http.params import int_param, page_limit
from hubbub.server.json_body import json_body
from hubbub.server.state.space import SpaceState
from hubbub.server.state.visibility import sees_name, shown_channels
from hubbub.server.web_guard import FORWARDED_BY_NODE

_STATUS = {
    ErrorCode.AUTH_FAILED: 401,
    ErrorCode.WRONG_SPACE: 403,
    ErrorCode.CAPABILITY_VIOLATION: 403,
    ErrorCode.UNKNOWN_SPACE: 404,
    ErrorCode.UNKNOWN_CHANNEL: 404,
    ErrorCode.UNKNOWN_PARTICIPANT: 404,
    ErrorCode.NOT_IN_CHANNEL: 403,
    ErrorCode.NOT_INVITED: 403,
    ErrorCode.RATE_LIMITED: 429,
    ErrorCode.PAYLOAD_TOO_LARGE: 413,
    ErrorCode.FRAME_TOO_LARGE: 413,
    ErrorCode.BANNED: 403,
    ErrorCode.CHANNEL_LIMIT: 403,
    ErrorCode.UNAVAILABLE: 503,
    ErrorCode.UNAUTHORIZED: 403,  # MEW's stream errors, with MEW's statuses
    ErrorCode.STREAM_NOT_FOUND: 404,
    ErrorCode.PARTICIPANT_NOT_FOUND: 404,
    ErrorCode.STREAM_LIMIT: 403,
    ErrorCode.INVITE_LIMIT: 403,
    ErrorCode.INVALID_OPERATION: 409,  # e.g. a stream asked for without a connection
}


TOLD_TO_CONNECTION: Final = frozenset({ErrorCode.INVALID_REQUEST})
"""HTTP refusals that also go to the sender's WebSocket connection as ``system/error``, as
MEW's gateway sends them (a reserved kind such as ``system/register``)."""


def _error(exc: ProtocolError) -> web.Response:
    return json_body(exc.payload(), status=_STATUS.get(exc.code, 400))


def _bearer(request: web.Request) -> str | None:
    header = request.headers.get("Authorization", "")
    if header.lower().startswith("bearer "):
        return header[7:].strip() or None
    return None


def _resolve(router: Gateway, request: web.Request) -> tuple[SpaceState, Identity | None]:
    """The space a request addresses and who makes it (None in open mode without a token)."""
    token = _bearer(request)
    who = request.match_info.get("pid", "an HTTP client")
    try:
        caller = router.auth.resolve(token, request.query.get("space"), who)
    except ProtocolError as exc:
        if exc.code is ErrorCode.AUTH_FAILED:
            exc.message = (
                "unknown bearer token; create one with `hubbub token create`"
                if token
                else "this endpoint needs 'Authorization: Bearer <token>' "
                "(create a token with `hubbub token create`)"
            )
        raise
    return router.spaces[caller.space], router.auth.identity(caller)


def _source(request: web.Request) -> tuple[str, str]:
    """The request's source address and its connection (address and port) for rate limits;
    a request another cluster node forwarded counts for the client's address it names (the
    node's pooled connection is no client's)."""
    if request.get(FORWARDED_BY_NODE):
        return request.headers.get("X-Forwarded-For", ""), ""
    peer = request.transport.get_extra_info("peername") if request.transport else None
    address = str(request.remote or "")
    if isinstance(peer, tuple) and len(peer) >= 2:
        return address, f"{peer[0]}:{peer[1]}"
    return address, address


def add_http_routes(app: web.Application, key: web.AppKey[Gateway]) -> None:
    """Register the HTTP API handlers on ``app``."""

    async def post_message(request: web.Request) -> web.Response:
        router = request.app[key]
        pid = request.match_info["pid"]
        sender: HttpSender | None = None
        try:
            space, ident = _resolve(router, request)
            if ident is None:
                ident = Identity(
                    space.id,
                    check_open_id(pid),
                    space.config.defaults.kind,
                    "participant",
                    tuple(space.config.open_capabilities()),
                )
                router.keys.check_unowned(space.id, ident.id)  # the WebSocket's rule too
            elif ident.id != pid:
                raise ProtocolError(
                    ErrorCode.AUTH_FAILED,
                    f"the bearer token belongs to {ident.id!r}, not {pid!r}",
                )
            router.bans.check(space.id, ident.id)  # admin kill switch (hubbub.server.http.admin)
            body = await request.read()
            try:
                # the WebSocket decoder: also refuses invalid UTF-8 and too deep nesting
                env = decode_envelope(body)
            except ProtocolError as exc:
                raise ProtocolError(
                    exc.code,
                    f"body must be an envelope like "
                    f'{{"kind":"chat","channel":"#general","payload":{{"text":"hi"}}}}: '
                    f"{exc.message}",
                ) from None
            idem = request.headers.get("Idempotency-Key")
            if idem is not None:
                if env.id and env.id != idem:
                    raise ProtocolError(
                        ErrorCode.INVALID_ID,
                        f"the body's id {env.id!r} differs from the Idempotency-Key header "
                        f"{idem!r}; send one of them",
                    )
                env.id = idem
            caps = router.capabilities_for(ident)
            router.check_rate(space, ident.id, *_source(request))
            router.admission.check_name(space, ident.id)  # the WebSocket's rule too
            space.met(ident.id, ident.kind)
            sender = HttpSender(space, ident, caps, resends=idem is not None)
            sent = router.route(sender, env, frame_len=len(body))
        except ProtocolError as exc:
            router.metrics.errors[exc.code.value] += 1
            if sender is not None and exc.code in TOLD_TO_CONNECTION:
                connected = sender.space.online.get(sender.id)
                if connected is not None:
                    router.delivery.send(connected, router.delivery.error_env(sender.id, exc))
            return _error(exc)
        await router.durable()  # the 202 promises the message is stored
        router.metrics.messages_in += 1
        answer: dict[str, Any] = {
            "id": sent.id,
            "status": "accepted",
            "timestamp": sent.ts,
            "seq": sent.seq,
        }
        answer |= sender.answer  # a request kind's answer (MEW: a stream's id, an invite's token)
        if sender.refusals:  # e.g. a callback over a limit: the rest of the message went on
            answer["errors"] = [exc.payload() for exc in sender.refusals]
        return json_body(answer, status=202)

    async def participants(request: web.Request) -> web.Response:
        router = request.app[key]
        try:
            space, ident = _resolve(router, request)
            if ident is not None:
                router.bans.check(space.id, ident.id)  # a ban refuses reads too
        except ProtocolError as exc:
            return _error(exc)
        out: list[dict[str, Any]] = []
        viewer = ident.id if ident is not None else None
        for pid in sorted(space.known | set(space.online)):
            s = space.online.get(pid)
            state = router.coordination.participant_state(space, pid)
            if "floor" in state:  # claims in channels the reader may not see: left out
                claims = [c for c in state["floor"] if sees_name(space, c["channel"], viewer)]
                state = {k: v for k, v in state.items() if k != "floor"}
                if claims:
                    state["floor"] = claims
            if s is not None:
                channels = shown_channels(space, s.channels, viewer)
                out.append(s.summary() | {"channels": channels, "online": True} | state)
            else:
                kind = space.kind_of(pid)
                entry = {"id": pid, "kind": kind, "presence": "offline", "online": False}
                out.append(entry | {"channels": []} | state)
        return json_body({"space": space.id, "participants": out})

    async def channel_messages(request: web.Request) -> web.Response:
        router = request.app[key]
        name = normalize_channel(request.match_info["channel"])
        try:
            space, ident = _resolve(router, request)
            if ident is None:  # an open space read without a token
                channel_access(
                    router.bans, space, None, CapabilitySet(space.config.open_capabilities()), name
                )
            else:  # the WebSocket's rule (server/admission/authorization.py)
                channel_access(router.bans, space, ident.id, router.capabilities_for(ident), name)
            after = int_param(request, "after_seq")
            before = int_param(request, "before_seq")
            limit = page_limit(request, 50, router.limits.history_page_max)
        except ProtocolError as exc:
            return _error(exc)
        store, size = router.store, router.limits.history_page_bytes
        if after is not None:
            rows, has_more = await pages.forward(
                lambda a, k: store.history(space.id, name, after_seq=a, before_seq=before, limit=k),
                after,
                limit,
                size,
            )
        else:
            rows, has_more = await pages.backward(
                lambda b, k: store.history(space.id, name, before_seq=b, limit=k),
                before,
                limit,
                size,
            )
        messages = [msgspec.Raw(r.data) for r in rows]
        body = msgspec.json.encode(
            {
                "channel": name,
                "messages": messages,
                "next_after_seq": rows[-1].seq if rows else after,
                "has_more": has_more,
            }
        )
        return web.Response(body=body, content_type="application/json")

    async def metrics(request: web.Request) -> web.Response:
        router = request.app[key]
        return web.Response(
            body=router.metrics.render(),
            headers={"Content-Type": "text/plain; version=0.0.4; charset=utf-8"},
        )

    app.router.add_post("/participants/{pid}/messages", post_message)
    app.router.add_get("/participants", participants)
    app.router.add_get("/channels/{channel}/messages", channel_messages)
    app.router.add_get("/metrics", metrics)
