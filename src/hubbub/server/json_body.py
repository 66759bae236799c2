"""JSON response bodies of the gateway's HTTP surfaces, compact as MEW's gateway writes them."""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web


def compact_dumps(data: Any) -> str:
    """``data`` as JSON without spaces after separators (``{"status":"accepted"}``)."""
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False)


def json_body(
    data: Any, *, status: int = 200, headers: dict[str, str] | None = None
) -> web.Response:
    """A JSON response with a compact body."""
    return web.json_response(data, status=status, headers=headers, dumps=compact_dumps)
