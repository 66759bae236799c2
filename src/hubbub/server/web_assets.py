"""The browser pages' files: HTML, ES modules and stylesheets shipped in the package's ``web/``.

``web/common/`` holds the modules both pages share (the MEW WebSocket session, the proposal
wire, DOM and formatting helpers), ``web/dashboard/`` and ``web/chat/`` each page's own. There
is no build step: the files are served as they are, ``GET /web/{path}`` for the modules and
stylesheets, and each page's HTML by its own route (:func:`page_response`).

Only files that exist in the package when the gateway first serves one are served (read once,
kept in memory): a path outside that list, ``..`` included, is a 404. Pages carry a Content
Security Policy that runs scripts and styles from the gateway's own origin only, so even a
rendering bug cannot run script that a participant sent.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from aiohttp import web

WEB = Path(__file__).with_name("web")
URL_PREFIX = "/web/"
TYPES = {
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
}
PAGE_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
"""The pages' policy: code and styles from this origin only, connections to it only (the
WebSocket and the HTTP API), no plug-ins, no framing (as ``web_guard`` asks of everything)."""


@cache
def assets() -> dict[str, tuple[bytes, str]]:
    """Every servable file under ``web/`` by its path relative to it: (bytes, content type)."""
    out: dict[str, tuple[bytes, str]] = {}
    for path in sorted(WEB.rglob("*")):
        ctype = TYPES.get(path.suffix)
        if ctype is not None and path.is_file():
            out[path.relative_to(WEB).as_posix()] = (path.read_bytes(), ctype)
    return out


@cache
def page_html(name: str) -> str:
    """The HTML of page ``name`` (``web/<name>/index.html``)."""
    return (WEB / name / "index.html").read_text(encoding="utf-8")


def page_response(name: str, status: int = 200, **headers: str) -> web.Response:
    """Page ``name`` with the pages' headers (no caching, no referrer, :data:`PAGE_CSP`)."""
    return web.Response(
        text=page_html(name),
        status=status,
        content_type="text/html",
        headers={
            "Cache-Control": "no-store",
            "Referrer-Policy": "no-referrer",
            "Content-Security-Policy": PAGE_CSP,
            **headers,
        },
    )


async def _asset(request: web.Request) -> web.Response:
    found = assets().get(request.match_info["path"])
    if found is None:
        raise web.HTTPNotFound(text="no such file in the gateway's web pages\n")
    body, ctype = found
    return web.Response(body=body, headers={"Content-Type": ctype, "Cache-Control": "no-cache"})


def add_asset_routes(app: web.Application) -> None:
    """Register ``GET /web/{path}``."""
    app.router.add_get(URL_PREFIX + "{path:.+}", _asset)
