"""The private part of the ``mcp`` SDK that hubbub relies on is still there (see
``hubbub.mcp.sdk_private``): this fails loudly when an SDK release moves it."""

from __future__ import annotations

from typing import Any

import pytest
from mcp.server.lowlevel import Server
from mcp.server.mcpserver import MCPServer
from mcp.types import SubscribeRequestParams

from hubbub.mcp import sdk_private
from hubbub.mcp.tools import build_server


def test_mcpserver_keeps_its_lowlevel_server_and_its_handler_registration() -> None:
    srv = build_server()
    lowlevel = srv._lowlevel_server  # what sdk_private reaches
    assert isinstance(lowlevel, Server)
    for method in ("resources/subscribe", "resources/unsubscribe"):
        assert lowlevel.get_request_handler(method) is not None, method
    resources = lowlevel.create_initialization_options().capabilities.resources
    assert resources is not None and resources.subscribe  # advertised to clients


def test_a_moved_lowlevel_server_is_named_with_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    srv = MCPServer("x")
    monkeypatch.delattr(srv, "_lowlevel_server")

    async def handler(ctx: Any, params: Any) -> None:
        return None

    with pytest.raises(sdk_private.SdkChanged, match=r"install mcp>=2.3,<2.4"):
        sdk_private.add_request_handler(srv, "resources/subscribe", SubscribeRequestParams, handler)
