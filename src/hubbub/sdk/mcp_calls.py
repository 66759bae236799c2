"""The MCP calls a participant makes of another, over one request function: a tool call with
its error mapped to an exception, the paged ``tools/list`` and ``resources/list``, and
``resources/read`` (:class:`~hubbub.sdk.Participant` delegates to these)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

import mcp.types as mt

from hubbub.errors import InvalidArguments, ToolError
from hubbub.sdk.tools import ERROR_META_KEY, INVALID_ARGUMENTS, result_text

Request = Callable[[str, Mapping[str, Any], float | None], Awaitable[dict[str, Any]]]
"""Sends one MCP request to a target and returns its JSON-RPC ``result``
(:meth:`~hubbub.sdk.Participant.mcp_request`)."""

LIST_PAGES_MAX: Final = 100
"""At most this many pages of a list are read (a target that pages forever is cut off)."""


async def call_tool(
    request: Request,
    target: str,
    name: str,
    arguments: Mapping[str, Any] | None,
    timeout: float | None,  # noqa: ASYNC109
    raise_on_error: bool,
) -> mt.CallToolResult:
    """Call ``target``'s tool ``name``; raise ToolError / InvalidArguments on an MCP error
    result (unless ``raise_on_error`` is false)."""
    raw = await request(
        target,
        {"method": "tools/call", "params": {"name": name, "arguments": dict(arguments or {})}},
        timeout,
    )
    result = mt.CallToolResult.model_validate(raw)
    if result.is_error and raise_on_error:
        text = result_text(result) or f"tool {name!r} of {target} failed"
        if (result.meta or {}).get(ERROR_META_KEY) == INVALID_ARGUMENTS:
            raise InvalidArguments(text, result)
        raise ToolError(text, result)
    return result


async def list_tools(request: Request, target: str, timeout: float | None) -> list[mt.Tool]:  # noqa: ASYNC109
    """The tools ``target`` offers (all pages)."""
    tools: list[mt.Tool] = []
    cursor: str | None = None
    for _ in range(LIST_PAGES_MAX):
        params = {"cursor": cursor} if cursor else {}
        page = mt.ListToolsResult.model_validate(
            await request(target, {"method": "tools/list", "params": params}, timeout)
        )
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            break
    return tools


async def list_resources(
    request: Request,
    target: str,
    timeout: float | None,  # noqa: ASYNC109
) -> list[mt.Resource]:
    """The resources ``target`` offers (all pages)."""
    resources: list[mt.Resource] = []
    cursor: str | None = None
    for _ in range(LIST_PAGES_MAX):
        params = {"cursor": cursor} if cursor else {}
        page = mt.ListResourcesResult.model_validate(
            await request(target, {"method": "resources/list", "params": params}, timeout)
        )
        resources.extend(page.resources)
        cursor = page.next_cursor
        if not cursor:
            break
    return resources


async def read_resource(
    request: Request,
    target: str,
    uri: str,
    timeout: float | None,  # noqa: ASYNC109
) -> mt.ReadResourceResult:
    """Read resource ``uri`` of ``target``."""
    raw = await request(target, {"method": "resources/read", "params": {"uri": uri}}, timeout)
    return mt.ReadResourceResult.model_validate(raw)
