"""The web chat over HTTP: the page at ``/chat`` and who a sign-in is.

``GET /chat`` serves the page (``web/chat/index.html``; it holds no data, so everyone gets it).
Everything the page shows then comes over the WebSocket (MEW dialect) as the signed-in
participant. ``GET /chat/session`` tells the page how to sign in: with a token
(``Authorization: Bearer``) it answers whose token it is; without one, whether the space is
open (sign in with a name) or signs people in with tokens (``open: false`` and a ``message``
saying how to get one). Refusals (an unknown token, a ban, another space) are JSON
``{error, message}`` naming the fix.

Where the answer lets the page sign in (a token, an open space) it carries ``dm_seq``, the
space's current DM sequence: the page resumes DMs from there, so that only newer ones arrive
by themselves, and pages back through the older ones with ``history/request`` on ``@dm``.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from hubbub.protocol.errors import ErrorCode, ProtocolError
from hubbub.server.gateway import Gateway
from hubbub.server.http.access import request_token
from hubbub.server.json_body import json_body
from hubbub.server.web_assets import page_response

MAKE_TOKEN = "hubbub token create --space-config space.yaml --id <your name> --kind human"


def _refuse(status: int, error: str, message: str) -> web.Response:
    return json_body({"error": error, "message": message}, status=status)


def chat_session(router: Gateway, token: str | None, wanted: str | None) -> web.Response:
    """Who signs in with ``token`` (or how to sign in to space ``wanted`` without one)."""
    try:
        caller = router.auth.resolve(token, wanted, "a chat page", open_ok=False)
    except ProtocolError as exc:
        sid = router.auth.addressed_space(wanted)
        if exc.code is ErrorCode.AUTH_FAILED and token:
            return _refuse(
                401,
                "auth_failed",
                "this gateway knows no such token: check it (it starts with hb_), or ask for "
                f"one (`{MAKE_TOKEN}`)"
                + (
                    "; this space is open, so you can also sign in with a name"
                    if _open(router, sid)
                    else ""
                ),
            )
        if exc.code is ErrorCode.WRONG_SPACE:
            owner = router.auth.lookup_token(token) if token else None
            home = owner[0] if owner else sid
            return _refuse(
                403,
                "wrong_space",
                f"this token belongs to space {home!r}, not {wanted!r}: open /chat?space={home}",
            )
        if exc.code is ErrorCode.UNKNOWN_SPACE:
            return _refuse(
                404,
                "unknown_space",
                f"space {sid!r} does not exist on this gateway; known spaces: "
                f"{', '.join(sorted(router.spaces))} (open /chat?space=<one of them>)",
            )
        # not a refusal: the answer to "how do I sign in here?" (the page asks before anyone has)
        body: dict[str, Any] = {"space": sid, "id": None, "kind": None, "open": False}
        body["message"] = (
            f"space {sid!r} signs people in with a token: paste yours (it starts with hb_), "
            f"or ask an admin for one (`{MAKE_TOKEN}`)"
        )
        return json_body(body)
    sid, pid = caller.space, caller.id
    space = router.spaces[sid]
    if pid is None:
        body = {"space": sid, "id": None, "kind": None, "open": True, "dm_seq": space.dm_seq}
        return json_body(body)
    try:
        router.bans.check(sid, pid)
    except ProtocolError as exc:
        return _refuse(403, exc.code.value, exc.message)
    p = space.config.participants[pid]
    body = {"space": sid, "id": pid, "kind": p.kind, "open": _open(router, sid)}
    body["dm_seq"] = space.dm_seq
    return json_body(body)


def _open(router: Gateway, sid: str) -> bool:
    space = router.spaces.get(sid)
    return space is not None and space.config.open


def add_chat_routes(app: web.Application, key: web.AppKey[Gateway]) -> None:
    """Register ``/chat`` and ``/chat/session``."""

    async def page(request: web.Request) -> web.Response:
        return page_response("chat")

    async def session(request: web.Request) -> web.Response:
        return chat_session(request.app[key], request_token(request), request.query.get("space"))

    app.router.add_get("/chat", page)
    app.router.add_get("/chat/", page)
    app.router.add_get("/chat/session", session)
