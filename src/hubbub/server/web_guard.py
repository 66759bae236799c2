"""Browser safety on every route: which web pages may talk to the gateway, and no framing.

A web page the user opens can make the browser connect to the gateway (it is often on
loopback, in open mode, with nothing to guess). So, as one middleware in front of every route:

- a request is answered only when it is addressed (its ``Host`` header) to a name the
  gateway answers to: ``localhost`` and ``*.localhost``, any IP address, and the names in
  ``limits.allowed_hosts`` (``--host`` adds its name; ``.example.com`` is that name and its
  subdomains; ``*`` is any name). Others get 421 ``forbidden_host``. This stops DNS
  rebinding: a page on ``rebind.attacker.example``, whose name the attacker then points at
  127.0.0.1, sends ``Host`` and ``Origin`` both on that name, so the Origin check alone
  sees the gateway's own origin. Requests that a cluster node forwarded (they carry the
  cluster's secret, checked before this) were screened by that node and pass;
- a WebSocket upgrade, a request to ``/mcp`` (any method: its GET opens a session's event
  stream) or a state-changing request (POST, PUT, PATCH, DELETE) that carries an
  ``Origin`` header is served only when that origin is the gateway's own (the scheme, host
  and port the request was addressed to) or is listed in ``limits.allowed_origins``; others
  get 403 ``forbidden_origin``. Requests without ``Origin`` (curl, scripts, the SDK) are not
  browsers' cross-site requests and pass;
- a state-changing request to the dashboard's actions (``/admin/…``) must also be one a page
  on another site cannot send without the gateway's consent (a CORS preflight it does not
  grant): it carries ``X-Hubbub-Request`` or ``Authorization``;
- listed origins get CORS answers, so their pages may also call the HTTP API;
- every response gets ``X-Frame-Options: DENY``, CSP ``frame-ancestors 'none'`` and
  ``X-Content-Type-Options: nosniff``.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from urllib.parse import urlsplit

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

from hubbub.server.json_body import json_body

STATE_CHANGING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
SCRIPT_HEADER = "X-Hubbub-Request"
"""The header the dashboard sends on its actions (any value; ``1`` by convention)."""
DASHBOARD_ACTIONS = "/admin/"
"""Path prefix of the state-changing endpoints a browser page of the dashboard calls."""
PROTECT = {
    "X-Frame-Options": "DENY",
    "Content-Security-Policy": "frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
}
MCP_PATH = "/mcp"
"""MCP over Streamable HTTP (``server/http/mcp_http.py``): every method is screened, GET too."""
CORS_METHODS = "GET, POST"
CORS_HEADERS = f"Authorization, Content-Type, {SCRIPT_HEADER}"


def canonical_origin(text: str) -> str | None:
    """``scheme://host:port`` (lower case, port spelled out) of an origin; None if it is none."""
    try:
        parts = urlsplit(text.strip())
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    host = parts.hostname
    if (
        scheme not in ("http", "https")
        or not host
        or parts.username is not None
        or parts.query
        or parts.fragment
        or parts.path not in ("", "/")
    ):
        return None
    if ":" in host:
        host = f"[{host}]"
    return f"{scheme}://{host}:{port or (443 if scheme == 'https' else 80)}"


FORWARDED_BY_NODE = web.RequestKey("forwarded_by_node", bool)
"""Set on a request that a cluster node forwarded (its secret checked): it passed that node's
``Host`` check already, against the name the browser used."""
ANY_HOST = "*"
_LABEL = re.compile(r"[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?")
"""One label of a host name (letters, digits, ``-``; ``_`` as some internal names have)."""


def host_setting(text: str) -> str | None:
    """One ``limits.allowed_hosts`` entry in canonical form (lower case, no trailing dot):
    a name, ``.name`` for it and its subdomains, or ``*``; None if it is none of them."""
    entry = text.strip().lower().rstrip(".")
    if entry == ANY_HOST:
        return entry
    name = entry[1:] if entry.startswith(".") else entry
    if not name or not all(_LABEL.fullmatch(label) for label in name.split(".")):
        return None
    return entry


def _host_name(header: str) -> str:
    """The name or address a ``Host`` header gives (no port, lower case, no trailing dot)."""
    host = header.strip().lower()
    if host.startswith("["):  # an IPv6 literal, [::1]:8080
        return host[1:].partition("]")[0]
    return host.rpartition(":")[0].rstrip(".") if ":" in host else host.rstrip(".")


def host_allowed(header: str, allowed: frozenset[str]) -> bool:
    """Whether the gateway answers a request whose ``Host`` header is ``header``."""
    name = _host_name(header)
    if ANY_HOST in allowed or name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        ipaddress.ip_address(name)
        return True  # no name, no rebinding: the page's origin is this address itself
    except ValueError:
        pass
    return name in allowed or any(
        e.startswith(".") and (name == e[1:] or name.endswith(e)) for e in allowed
    )


def _refuse_host(host: str) -> web.Response:
    shown = _host_name(host)[:200]
    return json_body(
        {
            "error": "forbidden_host",
            "message": f"refused a request addressed to {shown!r}: the gateway answers only "
            "localhost, IP addresses, the name given to --host and limits.allowed_hosts "
            "(which stops DNS rebinding: a web page whose name points at this machine); if "
            f"you reach the gateway by that name, start it with --allowed-hosts {shown} (or "
            f"set HUBBUB_ALLOWED_HOSTS={shown})",
            "host": shown,
        },
        status=421,
    )


def own_origin(request: web.Request) -> str | None:
    """The origin a request was addressed to: its scheme and its ``Host`` header."""
    return canonical_origin(f"{request.scheme}://{request.host}")


def _forbidden(error: str, message: str, **extra: str) -> web.Response:
    return json_body({"error": error, "message": message, **extra}, status=403)


def _refuse_origin(request: web.Request, origin: str) -> web.Response:
    shown = origin[:200]
    own = own_origin(request) or "its own origin"
    return _forbidden(
        "forbidden_origin",
        f"refused a request from the web page at {shown}: the gateway accepts browsers only "
        f"from its own origin ({own}) and from limits.allowed_origins; if you trust that "
        f"page, start the gateway with --allow-origin {shown} "
        f"(or set HUBBUB_ALLOWED_ORIGINS={shown})",
        origin=shown,
    )


def _preflight(origin: str) -> web.Response:
    return web.Response(
        status=204,
        headers={
            "Access-Control-Allow-Origin": origin,
            "Access-Control-Allow-Methods": CORS_METHODS,
            "Access-Control-Allow-Headers": CORS_HEADERS,
            "Access-Control-Max-Age": "600",
            "Vary": "Origin",
        },
    )


def _protect(resp: web.StreamResponse) -> None:
    if not resp.prepared:
        for name, value in PROTECT.items():
            resp.headers.setdefault(name, value)


def _screen(
    request: web.Request, allowed: frozenset[str], hosts: frozenset[str]
) -> web.StreamResponse | bool:
    """The answer refusing what a foreign page may not do (or a preflight's); else whether
    the request comes from a listed foreign origin, whose response then names it. (Not a
    coroutine: a WebSocket's handler runs for the connection's life, and every coroutine
    around it keeps a frame per connection.)"""
    host = request.headers.get("Host")
    if host is not None and not request.get(FORWARDED_BY_NODE) and not host_allowed(host, hosts):
        return _refuse_host(host)
    changes = request.method in STATE_CHANGING
    sent = request.headers.get("Origin")
    listed_foreign = False
    if sent is not None:
        origin = canonical_origin(sent)
        own = origin is not None and origin == own_origin(request)
        listed = origin is not None and origin in allowed
        if request.method == "OPTIONS" and listed and not own:
            return _preflight(sent)
        upgrade = request.headers.get("Upgrade", "").lower() == "websocket"
        stream = request.path == MCP_PATH  # /mcp's GET opens a session's event stream
        if (changes or upgrade or stream) and not (own or listed):
            return _refuse_origin(request, sent)
        listed_foreign = listed and not own
    if (
        changes
        and request.path.startswith(DASHBOARD_ACTIONS)
        and SCRIPT_HEADER not in request.headers
        and "Authorization" not in request.headers
    ):
        return _forbidden(
            "not_a_script_request",
            f"{request.path} changes state, so it answers only requests a page on another "
            f"site cannot forge: send the header '{SCRIPT_HEADER}: 1' (the dashboard does) "
            "or 'Authorization: Bearer <admin token>'",
        )
    return listed_foreign


def browser_guard(allowed_origins: Iterable[str], allowed_hosts: Iterable[str]) -> Middleware:
    """The middleware applying this module's rules (``Limits.validate`` refuses bad origins
    and hosts)."""
    allowed = frozenset(o for o in map(canonical_origin, allowed_origins) if o is not None)
    hosts = frozenset(h for h in map(host_setting, allowed_hosts) if h is not None)

    @web.middleware
    async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            verdict = _screen(request, allowed, hosts)
            if isinstance(verdict, web.StreamResponse):
                resp = verdict
            else:
                resp = await handler(request)
                if verdict and not resp.prepared:  # a listed foreign origin
                    resp.headers["Access-Control-Allow-Origin"] = request.headers["Origin"]
                    resp.headers["Vary"] = "Origin"
        except web.HTTPException as exc:
            _protect(exc)
            raise
        _protect(resp)
        return resp

    return guard
