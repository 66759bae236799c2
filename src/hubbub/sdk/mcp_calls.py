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


async def _all_pages(
    request: Request,
    target: str,
    method: str,
    timeout: float | None,  # noqa: ASYNC109
    page_of: Callable[[dict[str, Any]], tuple[list[Any], str | None]],
) -> list[Any]:
    """Every item of a paged MCP list (at most :data:`LIST_PAGES_MAX` pages)."""
    items: list[Any] = []
    cursor: str | None = None
    for _ in range(LIST_PAGES_MAX):
        params = {"cursor": cursor} if cursor else {}
        page, cursor = page_of(await request(target, {"method": method, "params": params}, timeout))
        items.extend(page)
        if not cursor:
            break
    return items


def _tools_page(raw: dict[str, Any]) -> tuple[list[Any], str | None]:
    page = mt.ListToolsResult.model_validate(raw)
    return list(page.tools), page.next_cursor


def _resources_page(raw: dict[str, Any]) -> tuple[list[Any], str | None]:
    page = mt.ListResourcesResult.model_validate(raw)
    return list(page.resources), page.next_cursor


async def list_tools(request: Request, target: str, timeout: float | None) -> list[mt.Tool]:  # noqa: ASYNC109
    """The tools ``target`` offers (all pages)."""
    return await _all_pages(request, target, "tools/list", timeout, _tools_page)


async def list_resources(
    request: Request,
    target: str,
    timeout: float | None,  # noqa: ASYNC109
) -> list[mt.Resource]:
    """The resources ``target`` offers (all pages)."""
    return await _all_pages(request, target, "resources/list", timeout, _resources_page)


async def read_resource(
    request: Request,
    target: str,
    uri: str,
    timeout: float | None,  # noqa: ASYNC109
) -> mt.ReadResourceResult:
    """Read resource ``uri`` of ``target``."""
    raw = await request(target, {"method": "resources/read", "params": {"uri": uri}}, timeout)
    return mt.ReadResourceResult.model_validate(raw)
