"""MCP sessions for the tests: the official ``mcp`` client over stdio and Streamable HTTP."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

HUBBUB = str(Path(sys.executable).with_name("hubbub"))
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}
"""A raw MCP ``initialize`` request, for the tests that speak HTTP to /mcp themselves."""
ACCEPT = {"Accept": "application/json, text/event-stream"}
"""The Accept header Streamable HTTP requires of a POST."""

SHORT = {
    "HUBBUB_MCP_SETTLE_MS": "50",
    "HUBBUB_MCP_NUDGE_S": "1",
    "HUBBUB_MCP_JITTER": "0",
    "HUBBUB_MCP_PROGRESS_S": "0.05",
}
"""Short listen settings: a 50 ms settle window, a 1 s nudge without jitter, progress every
50 ms."""


@contextlib.asynccontextmanager
async def stdio_session(
    url: str, pid: str, *args: str, env: dict[str, str] | None = None, on_message: Any = None
) -> AsyncIterator[ClientSession]:
    """``hubbub mcp --gateway url --id pid`` as a subprocess, with an initialized session."""
    params = StdioServerParameters(
        command=HUBBUB,
        args=["mcp", "--gateway", url, "--id", pid, *args],
        # PYTHONPATH passes on: a checkout run with PYTHONPATH=src tests its own code
        env={
            **SHORT,
            "PATH": os.environ.get("PATH", ""),
            "PYTHONPATH": os.environ.get("PYTHONPATH", ""),
            **(env or {}),
        },
    )
    async with (
        stdio_client(params) as (read, write),
        ClientSession(read, write, message_handler=on_message) as session,
    ):
        await session.initialize()
        yield session


@contextlib.asynccontextmanager
async def http_session(
    url: str, headers: dict[str, str], on_message: Any = None
) -> AsyncIterator[ClientSession]:
    """An initialized Streamable HTTP session at ``url`` (``/mcp``) with these headers."""
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=60)) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write, message_handler=on_message) as session,
    ):
        await session.initialize()
        yield session


async def call(session: ClientSession, tool: str, /, **arguments: Any) -> dict[str, Any]:
    """Call a tool that must succeed; its ``structuredContent``."""
    result = await session.call_tool(tool, arguments)
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return result.structured_content


async def fails(session: ClientSession, tool: str, /, **arguments: Any) -> str:
    """Call a tool that must fail with a tool error; its text."""
    result = await session.call_tool(tool, arguments)
    assert result.is_error, result
    text = result.content[0]
    assert text.type == "text"
    return text.text


TRANSPORTS = ("stdio", "http")
TRANSPORT_PARAMS = (pytest.param("stdio", marks=pytest.mark.slow), "http")
"""The transports as parameters: the stdio one starts a ``hubbub mcp`` process (``slow``)."""


def opener(transport: str, http: str, ws: str) -> Any:
    """``open(pid, token=None)``: an MCP session of participant ``pid`` over ``transport``."""

    def open_session(pid: str, token: str | None = None, on_message: Any = None) -> Any:
        if transport == "stdio":
            extra = ["--token", token] if token else []
            return stdio_session(ws, pid, *extra, on_message=on_message)
        headers = {"Authorization": f"Bearer {token}"} if token else {"X-Hubbub-Participant": pid}
        return http_session(http + "/mcp", headers, on_message)

    return open_session
