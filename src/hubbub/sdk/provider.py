"""What a participant answers to the MCP requests addressed to it: ``tools/list``,
``tools/call``, ``resources/list``, ``resources/read`` and ``ping`` (JSON-RPC results, or
:class:`~hubbub.errors.RequestFailed` for the error response)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Final

import mcp.types as mt
from mcp import MCPError

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
    raise RequestFailed(
        mt.METHOD_NOT_FOUND,
        f"method {method!r} is not supported by {who} (it answers tools/list, "
        "tools/call, resources/list, resources/read, ping)",
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


__all__ = ["JSONRPC", "answer", "error_body"]
