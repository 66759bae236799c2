"""hubbub as an MCP server: any MCP client joins a space as a participant (docs/mcp.md).

- :mod:`hubbub.mcp.tools` — the tools, resources and prompt, written once;
- :mod:`hubbub.mcp.desk` — one session's participant state (inbox, roster, floor);
- :mod:`hubbub.mcp.seat` — what a transport provides (send an envelope; feed the desk);
- :mod:`hubbub.mcp.stdio` — ``hubbub mcp``: stdio, over the SDK's ``Client``;
- :mod:`hubbub.server.http.mcp_http` — Streamable HTTP at ``/mcp`` on the gateway.

Needs the ``mcp`` extra (``pip install 'hubbub[mcp]'``).
"""
