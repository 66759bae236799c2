"""The MCP bridge: any stdio MCP server, exposed in a space as one participant.

The server is started with the official ``mcp`` SDK's stdio client and ``ClientSession``; its
tools and resources are registered on a :class:`~hubbub.sdk.Participant`, so they are listed,
validated, called (directly or through an approved proposal) like any participant's own.
Tool results are passed through unchanged (``isError`` included); an MCP protocol error
becomes a JSON-RPC error of the same code.

```
hubbub bridge --id files -- npx -y @modelcontextprotocol/server-filesystem /srv/share
```
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from hubbub.extras import extra_needed
from hubbub.sdk import Participant, Resource, Tool
from hubbub.sdk.options import ParticipantOptions

with extra_needed("agents"):
    import mcp.types as mt
    from mcp import ClientSession, MCPError, StdioServerParameters, stdio_client

log = logging.getLogger("hubbub.sdk.bridge")

_PAGES_MAX = 100


def _forward_tool(session: ClientSession, name: str) -> Callable[[dict[str, Any]], Any]:
    async def execute(arguments: dict[str, Any]) -> mt.CallToolResult:
        return await session.call_tool(name, arguments)

    return execute


def _forward_read(session: ClientSession, uri: str) -> Callable[[], Awaitable[Any]]:
    async def read() -> mt.ReadResourceResult:
        return await session.read_resource(uri)

    return read


async def mirror(session: ClientSession, participant: Participant) -> tuple[int, int]:
    """Register the session's tools and resources on ``participant``; return their counts."""
    tools: list[mt.Tool] = []
    cursor: str | None = None
    for _ in range(_PAGES_MAX):
        page = await session.list_tools(
            params=mt.PaginatedRequestParams(cursor=cursor) if cursor else None
        )
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            break
    for tool in tools:
        try:
            participant.register_tool(
                Tool(
                    name=tool.name,
                    title=tool.title,
                    description=tool.description,
                    input_schema=dict(tool.input_schema),
                    annotations=tool.annotations,
                    execute=_forward_tool(session, tool.name),
                )
            )
        except ValueError as exc:
            log.warning("bridge: skipped tool %r: %s", tool.name, exc)
    resources: list[mt.Resource] = []
    caps = session.server_capabilities
    if caps is None or caps.resources is not None:
        try:
            cursor = None
            for _ in range(_PAGES_MAX):
                rpage = await session.list_resources(
                    params=mt.PaginatedRequestParams(cursor=cursor) if cursor else None
                )
                resources.extend(rpage.resources)
                cursor = rpage.next_cursor
                if not cursor:
                    break
        except MCPError as exc:
            log.info("bridge: the server lists no resources (%s)", exc)
    for resource in resources:
        participant.register_resource(
            Resource(
                uri=str(resource.uri),
                name=resource.name,
                title=resource.title,
                description=resource.description,
                mime_type=resource.mime_type,
                read=_forward_read(session, str(resource.uri)),
            )
        )
    return len(participant.tools), len(participant.resources)


async def run_bridge(
    command: Sequence[str],
    options: ParticipantOptions,
    *,
    env: dict[str, str] | None = None,
    cwd: str | None = None,
    on_ready: Callable[[Participant], Awaitable[None] | None] | None = None,
) -> None:
    """Start ``command`` as a stdio MCP server and serve it as a participant until cancelled."""
    if not command:
        raise ValueError("the bridge needs the MCP server's command, e.g. -- python server.py")
    params = StdioServerParameters(command=command[0], args=list(command[1:]), env=env, cwd=cwd)
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        participant = Participant(options)
        n_tools, n_resources = await mirror(session, participant)
        log.info(
            "bridge: %s offers %d tools and %d resources of `%s` at %s",
            participant.id,
            n_tools,
            n_resources,
            " ".join(command),
            options.gateway,
        )
        async with participant:
            if on_ready is not None:
                result = on_ready(participant)
                if result is not None:
                    await result
            await participant.serve_forever()


__all__ = ["mirror", "run_bridge"]
