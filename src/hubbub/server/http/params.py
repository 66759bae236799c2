"""Query parameters of the HTTP API, read one way on every endpoint (a bad one: 400 with the
parameter named)."""

from __future__ import annotations

from aiohttp import web

from hubbub.protocol.errors import ErrorCode, ProtocolError


def int_param(request: web.Request, name: str) -> int | None:
    """The query parameter ``name`` as an integer >= 0 (None when absent or empty); raise
    ``invalid_envelope`` naming it otherwise."""
    raw = request.query.get(name)
    if raw is None or raw == "":
        return None
    try:
        value = int(raw)
    except ValueError:
        raise ProtocolError(
            ErrorCode.INVALID_ENVELOPE, f"query parameter {name}={raw!r} must be an integer"
        ) from None
    if value < 0:
        raise ProtocolError(ErrorCode.INVALID_ENVELOPE, f"query parameter {name} must be >= 0")
    return value


def page_limit(request: web.Request, default: int, most: int) -> int:
    """A page's ``limit`` parameter: ``default`` when absent (or 0), at most ``most``."""
    return min(int_param(request, "limit") or default, most)
