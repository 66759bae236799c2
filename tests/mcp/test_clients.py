"""What the MCP clients people run see on their defaults: ``listen`` within their request
timeouts and nothing lost when one gives up; guidance in the structured result (some
clients hand the model nothing else); descriptions a model can use. The official ``mcp``
client against a real gateway's ``/mcp``."""

from __future__ import annotations

import json
from typing import Any

import pytest
from mcp import ClientSession, MCPError

from hubbub.mcp.desk import Desk
from hubbub.server.http.mcp_http import MCP_DOORS
from tests.conftest import RunningGateway
from tests.mcp.conftest import SHORT, call, http_session
from tests.timing import UNIT, until

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(autouse=True)
def short_listen(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in SHORT.items():
        monkeypatch.setenv(name, value)


def _open(gateway: RunningGateway, pid: str = "claude") -> Any:
    return http_session(gateway.http + "/mcp", {"X-Hubbub-Participant": pid})


def _desk(gateway: RunningGateway, pid: str = "claude") -> Desk:
    """The desk of ``pid``'s ``/mcp`` session (to wait for what the gateway did)."""
    [door] = gateway.runner.app[MCP_DOORS]
    return next(o.desk for o in door.sessions.values() if o.desk.me == pid)


CLIENT_S = 4 * UNIT
"""A client's request timeout in these tests: listen answers within 3/4 of it, so the last
quarter (1 s at the default unit) is the margin a loaded machine has for the answer to arrive."""


async def _abandoned_listen(s: ClientSession, timeout: float) -> None:
    """A ``listen`` the client gives up on after ``timeout`` seconds without telling the
    server, as mcp 1.x clients do (no ``notifications/cancelled``)."""
    params = {"name": "listen", "arguments": {}}
    opts = {"timeout": timeout, "cancel_on_abandon": False}
    with pytest.raises(MCPError):
        await s._dispatcher.send_raw_request("tools/call", params, opts)  # type: ignore[attr-defined]


async def test_listen_answers_within_the_client_timeout_it_is_told(
    gateway: RunningGateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A client that gives up after CLIENT_S without telling the server (mcp 1.x), and a
    gateway told so (HUBBUB_MCP_CLIENT_TIMEOUT_S): listen answers in time, a nudge, though
    the nudge timeout is 20 s; the message posted next comes with the next listen."""
    monkeypatch.setenv("HUBBUB_MCP_NUDGE_S", "20")
    monkeypatch.setenv("HUBBUB_MCP_CLIENT_TIMEOUT_S", str(CLIENT_S))
    async with _open(gateway) as s:
        params = {"name": "listen", "arguments": {}}
        opts = {"timeout": CLIENT_S, "cancel_on_abandon": False}
        got = await s._dispatcher.send_raw_request("tools/call", params, opts)  # type: ignore[attr-defined]
        assert got["structuredContent"]["nudge"] is True
        bob = await gateway.mew("bob", kind="human")
        await bob.send({"kind": "chat", "channel": "#general", "payload": {"text": "hi"}})
        got = await s._dispatcher.send_raw_request("tools/call", params, opts)  # type: ignore[attr-defined]
        assert [m["text"] for m in got["structuredContent"]["messages"]] == ["hi"]


async def test_a_client_that_asks_again_is_answered_within_its_timeout(
    gateway: RunningGateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A client that gives up on a listen (CLIENT_S) and calls it again: the old one steps aside,
    and from then on listen answers within that client's timeout (a nudge, not another
    timeout), and loses nothing."""
    monkeypatch.setenv("HUBBUB_MCP_NUDGE_S", "20")
    async with _open(gateway) as s:
        await _abandoned_listen(s, CLIENT_S)
        got = await s.call_tool("listen", {}, read_timeout_seconds=CLIENT_S)
        assert got.structured_content is not None and got.structured_content["nudge"] is True
        bob = await gateway.mew("bob", kind="human")
        await bob.send({"kind": "chat", "channel": "#general", "payload": {"text": "hi"}})
        got = await s.call_tool("listen", {}, read_timeout_seconds=CLIENT_S)
        assert got.structured_content is not None
        assert [m["text"] for m in got.structured_content["messages"]] == ["hi"]


async def test_the_official_client_timing_out_loses_nothing(
    gateway: RunningGateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The official client with a short read timeout (it sends ``notifications/cancelled``):
    the message that arrived during the abandoned listen comes with the next."""
    monkeypatch.setenv("HUBBUB_MCP_SETTLE_MS", "3000")
    async with _open(gateway) as s:
        bob = await gateway.mew("bob", kind="human")
        desk = _desk(gateway)

        async def give_up() -> None:
            with pytest.raises(MCPError):
                await s.call_tool("listen", {}, read_timeout_seconds=1.0)

        listening = gateway_task(give_up())
        await until(lambda: desk._listening_since is not None, what="listen started")
        await bob.send({"kind": "chat", "channel": "#general", "payload": {"text": "q?"}})
        await listening
        got = await call(s, "listen", timeout_s=5)
        assert [m["text"] for m in got["messages"]] == ["q?"]


def gateway_task(coro: Any) -> Any:
    import asyncio

    return asyncio.ensure_future(coro)


def _nulls(value: Any, path: str = "") -> list[str]:
    if value is None:
        return [path]
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in _nulls(v, f"{path}.{k}")]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _nulls(v, f"{path}[{i}]")]
    return []


async def test_guidance_is_in_the_structured_result(gateway: RunningGateway) -> None:
    """Claude Code and Codex show the model only ``structuredContent``: claims, yields,
    nudges and refusals carry their guidance there (``advice``), and no field is null."""
    async with _open(gateway) as s, _open(gateway, "gemini") as g:
        bob = await gateway.mew("bob", kind="human")
        await bob.send({"kind": "chat", "channel": "#general", "payload": {"text": "who knows?"}})
        got = await call(s, "listen", timeout_s=5)
        assert _nulls(got) == [], _nulls(got)
        assert "claim_floor" in got["advice"]
        mid = got["messages"][0]["id"]
        await call(g, "listen", timeout_s=5)
        granted = await call(s, "claim_floor", message_id=mid)
        assert granted["granted"] is True and f"reply_to={mid!r}" in granted["advice"]
        assert _nulls(granted) == []
        lost = await call(g, "claim_floor", message_id=mid)
        assert lost["granted"] is False and "do not answer" in lost["advice"]
        refused = await s.call_tool("send", {"to": "#general", "text": " "})
        assert refused.is_error and refused.structured_content is not None
        assert "empty" in refused.structured_content["advice"]
        nudge = await call(s, "listen", timeout_s=0.1)
        assert nudge["nudge"] is True and "sleep" in nudge["advice"]
        assert _nulls(nudge) == []


async def test_history_shows_records_as_notes(gateway: RunningGateway) -> None:
    """A floor outcome in the history is a one-line note, never a dict repr."""
    async with _open(gateway) as s:
        bob = await gateway.mew("bob", kind="human")
        await bob.send({"kind": "chat", "channel": "#general", "payload": {"text": "2+2?"}})
        mid = (await call(s, "listen", timeout_s=5))["messages"][0]["id"]
        await call(s, "claim_floor", message_id=mid)
        await call(s, "send", to="#general", text="4", reply_to=mid)
        await gateway.settle()
        hist = await s.call_tool("history", {"channel": "#general"})
        text = hist.content[0].text  # type: ignore[union-attr]
        assert f"floor/outcome: claude answered {mid}" in text, text
        assert "{'" not in text and "{'" not in json.dumps(hist.structured_content)
        read = await s.read_resource("hubbub://channel/general")
        assert "{'" not in read.contents[0].text  # type: ignore[union-attr]


async def test_descriptions_are_clean_and_complete(gateway: RunningGateway) -> None:
    """Dedented, no document numbers, no prompt a model cannot open, every parameter
    described (defaults and bounds in words)."""
    async with _open(gateway) as s:
        init = s.initialize_result  # type: ignore[attr-defined]
        tools = (await s.list_tools()).tools
    assert "prompt" not in (init.instructions or "")
    for t in tools:
        desc = t.description or ""
        assert desc, t.name
        assert all(line == line.lstrip() for line in desc.splitlines()), (t.name, desc)
        assert "document 0" not in desc.lower(), t.name
        for name, prop in t.input_schema.get("properties", {}).items():
            text = prop.get("description", "")
            assert text, f"{t.name}.{name} has no description"
            assert "document 0" not in text.lower()
            if name not in t.input_schema.get("required", []):
                assert "default" in text, f"{t.name}.{name} does not state its default"
    listen = next(t for t in tools if t.name == "listen")
    assert "at most" in listen.input_schema["properties"]["timeout_s"]["description"]
