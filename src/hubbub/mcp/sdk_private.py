"""The one place hubbub uses a private part of the ``mcp`` SDK.

``MCPServer`` (mcp 2.3) has no public way to serve ``resources/subscribe`` and
``resources/unsubscribe``: only its low-level ``Server`` takes handlers for them
(``add_request_handler``), and ``MCPServer`` keeps that server in ``_lowlevel_server``.
:func:`add_request_handler` reaches it, and says so loudly when a release has moved it.
``tests/mcp/test_sdk_private.py`` checks this against the installed SDK, and pyproject.toml
pins ``mcp`` to the series it was checked with (``>=2.3,<2.4``). Everything else hubbub does
with the SDK is public API (the HTTP session manager comes from ``streamable_http_app()`` and
``session_manager``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from mcp.server.mcpserver import MCPServer


class SdkChanged(RuntimeError):
    """The installed ``mcp`` SDK no longer has the private part hubbub relies on."""


def add_request_handler(
    srv: MCPServer,
    method: str,
    params_type: type[Any],
    handler: Callable[[Any, Any], Awaitable[Any]],
) -> None:
    """Serve ``method`` on ``srv`` with ``handler(ctx, params)`` (the low-level server's
    handler registration, which ``MCPServer`` does not expose)."""
    lowlevel = getattr(srv, "_lowlevel_server", None)
    register = getattr(lowlevel, "add_request_handler", None)
    if register is None:
        raise SdkChanged(
            "this release of the mcp SDK moved MCPServer._lowlevel_server.add_request_handler, "
            f"which hubbub needs to serve {method}: install mcp>=2.3,<2.4 (pyproject.toml) or "
            "port hubbub.mcp.sdk_private to the new SDK"
        )
    register(method, params_type, handler)
