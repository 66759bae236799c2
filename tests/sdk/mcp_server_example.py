"""A small, real stdio MCP server written with the ``mcp`` SDK, for the bridge tests.

Run it as ``python tests/sdk/mcp_server_example.py``; it speaks MCP on stdin/stdout.
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("files-example")

NOTES = {"readme": "hubbub bridges stdio MCP servers into a space."}


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def divide(a: float, b: float) -> float:
    """Divide a by b."""
    if b == 0:
        raise ToolError("cannot divide by zero")
    return a / b


@server.tool()
async def write_note(name: str, text: str) -> str:
    """Store a note under a name."""
    NOTES[name] = text
    return f"saved {name} ({len(text)} characters)"


@server.resource("notes://readme", mime_type="text/plain", description="What this server is")
def readme() -> str:
    """The readme note."""
    return NOTES["readme"]


if __name__ == "__main__":
    server.run()
