"""What a participant answers to the MCP requests addressed to it: ``initialize``,
``ping``, ``tools/list``, ``tools/call``, ``resources/list`` and ``resources/read`` (JSON-RPC
results, or :class:`~hubbub.errors.RequestFailed` for the error response)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Final

import mcp.types as mt
from mcp import MCPError
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, LATEST_HANDSHAKE_VERSION

from hubbub import __version__
from hubbub.errors import InvalidArguments, RequestFailed, ToolError
from hubbub.sdk.tools import INVALID_ARGUMENTS, Resource, Tool, dump, error_result

log = logging.getLogger("hubbub.sdk.participant")

JSONRPC: Final = "2.0"


async def answer(
    method: object,
    params: object,
    tools: Mapping[str, Tool],
    resources: Mapping[str, Resource],
    who: str,
) -> dict[str, Any]:
    """The JSON-RPC ``result`` of one request to participant ``who``."""
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise RequestFailed(mt.INVALID_PARAMS, "params must be an object")
    if method == "tools/call":
        return await _call_tool(params, tools, who)
    if method == "tools/list":
        return dump(mt.ListToolsResult(tools=[t.to_mcp() for t in tools.values()]))
    if method == "resources/list":
        return dump(mt.ListResourcesResult(resources=[r.to_mcp() for r in resources.values()]))
    if method == "resources/read":
        return await _read_resource(params, resources, who)
    if method == "ping":
        return {}
    if method == "initialize":
        return _initialize(params, who)
    raise RequestFailed(
        mt.METHOD_NOT_FOUND,
        f"method {method!r} is not supported by {who} (it answers initialize, ping, "
        "tools/list, tools/call, resources/list, resources/read)",
    )


def is_notification(payload: Mapping[str, Any]) -> bool:
    """Whether an ``mcp/request`` payload expects no response.

    A JSON-RPC message without ``id`` is a notification, and so is every
    ``notifications/*`` method; a bare MEW payload (``{"method": "tools/list"}``, no
    ``jsonrpc`` and no ``id``, as MEW's ``MEWParticipant`` sends) is a request, answered by
    envelope correlation.
    """
    if str(payload.get("method", "")).startswith("notifications/"):
        return True
    return "id" not in payload and "jsonrpc" in payload


def _initialize(params: dict[str, Any], who: str) -> dict[str, Any]:
    """MCP's handshake: the client's protocol version if this SDK speaks it, else the latest."""
    asked = params.get("protocolVersion")
    version = asked if asked in HANDSHAKE_PROTOCOL_VERSIONS else LATEST_HANDSHAKE_VERSION
    return dump(
        mt.InitializeResult(
            protocol_version=version,
            capabilities=mt.ServerCapabilities(
                tools=mt.ToolsCapability(), resources=mt.ResourcesCapability()
            ),
            server_info=mt.Implementation(name=who, version=__version__),
        )
    )


async def _call_tool(params: dict[str, Any], tools: Mapping[str, Tool], who: str) -> dict[str, Any]:
    name = params.get("name")
    tool = tools.get(name) if isinstance(name, str) else None
    if tool is None:
        offered = ", ".join(sorted(tools)) or "none"
        raise RequestFailed(
            mt.INVALID_PARAMS,
            f"Unknown tool: {name!r}; {who} offers: {offered} (see tools/list)",
        )
    try:
        result = await tool.call(params.get("arguments"))
    except InvalidArguments as exc:
        result = error_result(exc.message, INVALID_ARGUMENTS)
    except ToolError as exc:
        result = error_result(exc.message)
    except (RequestFailed, MCPError):
        raise
    except Exception as exc:
        log.info("tool %r of %s raised %r", name, who, exc)
        result = error_result(str(exc) or type(exc).__name__)
    return dump(result)


async def _read_resource(
    params: dict[str, Any], resources: Mapping[str, Resource], who: str
) -> dict[str, Any]:
    uri = params.get("uri")
    resource = resources.get(uri) if isinstance(uri, str) else None
    if resource is None:
        raise RequestFailed(mt.INVALID_PARAMS, f"Resource not found: {uri}", {"uri": uri})
    try:
        return dump(await resource.contents())
    except (RequestFailed, MCPError):
        raise
    except Exception as exc:
        log.info("resource %r of %s raised %r", uri, who, exc)
        raise RequestFailed(
            mt.INTERNAL_ERROR, f"reading {uri} failed: {exc}", {"uri": uri}
        ) from exc


def error_body(request_id: Any, code: int, message: str, data: Any = None) -> dict[str, Any]:
    """A JSON-RPC error response body."""
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": JSONRPC, "id": request_id, "error": error}


__all__ = ["JSONRPC", "answer", "error_body", "is_notification"]
