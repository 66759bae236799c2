"""The MCP bridge with a real stdio MCP server (tests/sdk/mcp_server_example.py)."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import mcp.types as mt
import pytest

from hubbub.errors import InvalidArguments, RequestFailed, ToolError
from hubbub.sdk import Participant, ParticipantOptions
from hubbub.sdk.bridge import run_bridge
from tests.conftest import RunningGateway
from tests.sdk.conftest import FAST, PROPOSER_CAPS, MakeParticipant

pytestmark = pytest.mark.slow  # an MCP server process (and `hubbub bridge`)

EXAMPLE = [sys.executable, str(Path(__file__).with_name("mcp_server_example.py"))]
HUBBUB = Path(sys.executable).with_name("hubbub")


@pytest.fixture
async def files(gw: RunningGateway) -> AsyncIterator[Participant]:
    """The example MCP server bridged in-process as participant ``files``."""
    ready: asyncio.Future[Participant] = asyncio.get_running_loop().create_future()
    options = ParticipantOptions(gateway=gw.url, participant_id="files", kind="service", **FAST)
    task = asyncio.create_task(run_bridge(EXAMPLE, options, on_ready=ready.set_result))
    done, _ = await asyncio.wait({ready, task}, timeout=30, return_when=asyncio.FIRST_COMPLETED)
    if task in done:
        task.result()  # raises what went wrong
    yield await ready
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_an_agent_lists_and_calls_the_bridged_tools(
    files: Participant, participant: MakeParticipant
) -> None:
    agent = await participant("agent")
    tools = {t.name: t for t in await agent.list_tools("files")}
    assert set(tools) == {"add", "divide", "write_note"}
    assert tools["add"].description == "Add two integers."
    assert tools["add"].input_schema["required"] == ["a", "b"]
    result = await agent.call_tool("files", "add", {"a": 20, "b": 22})
    assert result.content == [mt.TextContent(text="42")]
    assert result.structured_content == {"result": 42}  # passed through from the server
    with pytest.raises(ToolError, match="cannot divide by zero"):
        await agent.call_tool("files", "divide", {"a": 1, "b": 0})
    with pytest.raises(InvalidArguments, match="'b' is a required property"):
        await agent.call_tool("files", "add", {"a": 1})
    with pytest.raises(RequestFailed, match="Unknown tool: 'nope'"):
        await agent.call_tool("files", "nope")
    (resource,) = await agent.list_resources("files")
    assert resource.uri == "notes://readme" and resource.mime_type == "text/plain"
    read = await agent.read_resource("files", "notes://readme")
    first = read.contents[0]
    assert isinstance(first, mt.TextResourceContents)
    assert first.text == "hubbub bridges stdio MCP servers into a space."


async def test_a_proposal_to_the_bridge_is_approved_by_a_human(
    files: Participant, participant: MakeParticipant
) -> None:
    agent = await participant("agent", capabilities=PROPOSER_CAPS)
    human = await participant("human", kind="human")
    call = asyncio.create_task(
        agent.call_tool("files", "write_note", {"name": "todo", "text": "ship it"}, timeout=10)
    )
    proposal = await human.proposals.next(timeout=5)
    assert proposal.describe().startswith("agent proposes tools/call write_note")
    approved = await human.approve(proposal, timeout=10)
    assert approved["content"][0]["text"] == "saved todo (7 characters)"
    result = await asyncio.wait_for(call, 10)
    assert result.content == [mt.TextContent(text="saved todo (7 characters)")]


async def test_the_hubbub_bridge_command(gw: RunningGateway, participant: MakeParticipant) -> None:
    agent = await participant("agent")
    proc = await asyncio.create_subprocess_exec(
        str(HUBBUB),
        "bridge",
        "--gateway",
        gw.url,
        "--id",
        "files",
        "--log-level",
        "warning",
        "--",
        *EXAMPLE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        await agent.client.wait_for_participant("files", timeout=30)
        result = await agent.call_tool("files", "add", {"a": 1, "b": 2}, timeout=10)
        assert result.content == [mt.TextContent(text="3")]
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
        _, stderr = await asyncio.wait_for(proc.communicate(), 15)
    assert proc.returncode == 0, stderr.decode()
    assert "bridge stopped" in stderr.decode()
