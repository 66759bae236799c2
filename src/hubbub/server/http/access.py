"""Who may watch the dashboard, use the operator console and pull the kill switch.

Roles come from ``space.yaml`` (``role: participant | observer | admin``). A token is read
from ``Authorization: Bearer`` or, for browsers' EventSource which cannot set headers, from
``?token=``. An open space (local use) needs no token and grants everything.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeVar

from aiohttp import web

from hubbub.protocol.errors import ErrorCode, ProtocolError
from hubbub.server.admission.auth import Authenticator
from hubbub.server.admission.bans import BanList
from hubbub.server.json_body import json_body
from hubbub.server.state.space import SpaceState

Need = Literal["page", "observe", "admin"]

MAKE_OBSERVER = (
    "hubbub token create --space-config space.yaml --id ops --kind human --role observer"
)


class Directory(Protocol):
    """Who exists on the gateway: its spaces, their tokens and bans (the gateway implements it)."""

    @property
    def auth(self) -> Authenticator:
        """Checks tokens."""
        ...

    @property
    def spaces(self) -> Mapping[str, SpaceState]:
        """The spaces, by id."""
        ...

    @property
    def bans(self) -> BanList:
        """Who is banned where."""
        ...


class AccessDenied(Exception):
    """A refused dashboard or admin request; carries the HTTP status and a fix-it message."""

    def __init__(self, status: int, error: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.error = error
        self.message = message

    def response(self) -> web.Response:
        """The JSON error answer."""
        headers = {"WWW-Authenticate": 'Bearer realm="hubbub"'} if self.status == 401 else None
        return json_body(
            {"error": self.error, "message": self.message}, status=self.status, headers=headers
        )


@dataclass(frozen=True)
class Viewer:
    """Who is asking, in which space, and what they may do."""

    space: SpaceState
    id: str | None
    kind: str | None
    role: str
    open: bool

    @property
    def can_observe(self) -> bool:
        """Watch the dashboard (observer or admin, or open mode)."""
        return self.open or self.role in ("observer", "admin")

    @property
    def can_admin(self) -> bool:
        """Use the kill switch (admin, or open mode)."""
        return self.open or self.role == "admin"

    @property
    def can_console(self) -> bool:
        """Use the operator console (a human's token, or open mode with a chosen id)."""
        return self.open or self.kind == "human"

    def describe(self) -> dict[str, Any]:
        """The viewer as the dashboard page sees it."""
        return {
            "space": self.space.id,
            "id": self.id,
            "kind": self.kind,
            "role": self.role,
            "open": self.open,
            "can_observe": self.can_observe,
            "can_admin": self.can_admin,
            "can_console": self.can_console,
        }


def request_token(request: web.Request) -> str | None:
    """The token of a request: ``Authorization: Bearer`` first, then ``?token=``."""
    header = request.headers.get("Authorization", "")
    if header.lower().startswith("bearer ") and header[7:].strip():
        return header[7:].strip()
    return request.query.get("token") or None


def resolve_viewer(router: Directory, request: web.Request, need: Need) -> Viewer:
    """Authenticate a dashboard/admin request and check it may do ``need``."""
    token = request_token(request)
    try:
        caller = router.auth.resolve(token, request.query.get("space"), "a dashboard viewer")
    except ProtocolError as exc:
        if exc.code is ErrorCode.WRONG_SPACE:
            raise AccessDenied(403, "wrong_space", exc.message) from None
        if exc.code is ErrorCode.UNKNOWN_SPACE:
            raise AccessDenied(404, "unknown_space", exc.message) from None
        raise AccessDenied(
            401,
            "auth_failed",
            "unknown token: use an observer or admin token of this server's space "
            f"(create one with `{MAKE_OBSERVER}`)"
            if token
            else "the dashboard needs an observer or admin token: open /dashboard?token=hb_… "
            "(or send 'Authorization: Bearer hb_…'); "
            f"create one with `{MAKE_OBSERVER}`",
        ) from None
    sid, pid = caller.space, caller.id
    if pid is not None:
        try:
            router.bans.check(sid, pid)
        except ProtocolError as exc:
            raise AccessDenied(403, exc.code.value, exc.message) from None
        p = router.spaces[sid].config.participants[pid]
        viewer = Viewer(router.spaces[sid], pid, p.kind, p.role, False)
    else:
        viewer = Viewer(router.spaces[sid], None, None, "admin", True)
    _check(viewer, need)
    return viewer


def _check(viewer: Viewer, need: Need) -> None:
    who = f"participant {viewer.id!r} has role {viewer.role!r}"
    fix = f"set `role: {{}}` for {viewer.id} in space.yaml, or use another token"
    if need == "admin" and not viewer.can_admin:
        raise AccessDenied(
            403, "forbidden", f"{who}: the kill switch needs role admin ({fix.format('admin')})"
        )
    if need == "observe" and not viewer.can_observe:
        raise AccessDenied(
            403,
            "forbidden",
            f"{who}: watching the dashboard needs role observer or admin "
            f"({fix.format('observer')})",
        )
    if need == "page" and not (viewer.can_observe or viewer.can_console):
        raise AccessDenied(
            403,
            "forbidden",
            f"{who} and kind {viewer.kind!r}: the dashboard needs role observer or admin, "
            f"and the operator console a human participant ({fix.format('observer')})",
        )


DirectoryT = TypeVar("DirectoryT", bound=Directory)
ViewerHandler = Callable[[web.Request, DirectoryT, Viewer], Awaitable[web.StreamResponse]]


def as_viewer(
    key: web.AppKey[DirectoryT], need: Need, handler: ViewerHandler[DirectoryT]
) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    """A route handler that runs ``handler`` for a caller :func:`resolve_viewer` lets do
    ``need``, and answers anyone else with the refusal."""

    async def run(request: web.Request) -> web.StreamResponse:
        router = request.app[key]
        try:
            viewer = resolve_viewer(router, request, need)
        except AccessDenied as exc:
            return exc.response()
        return await handler(request, router, viewer)

    return run
