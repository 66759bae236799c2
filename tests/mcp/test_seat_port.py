"""``/mcp`` sessions are receivers like any other: their port's bound ends an idle one that
fell too far behind (told why on its next request; the next session resumes), a session
replaced by a newer one of its participant ends at once, and every session counts against
its address's connection cap."""

from __future__ import annotations

import sys
from typing import Any

import httpx2
import pytest
from mcp.shared.exceptions import MCPError

from hubbub.extras import install_command
from hubbub.server.config import Limits
from hubbub.server.http.mcp_http import MCP_DOORS, McpDoor
from tests.conftest import MakeGateway, RunningGateway
from tests.mcp.conftest import ACCEPT, INIT, SHORT, call, opener

pytestmark = pytest.mark.timeout(90)


@pytest.fixture(autouse=True)
def short_listen(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in SHORT.items():
        monkeypatch.setenv(name, value)


def _door(gw: RunningGateway) -> McpDoor:
    return gw.runner.app[MCP_DOORS][0]


async def _failure(session: Any, tool: str, **arguments: Any) -> str:
    """The text a request of an ended session fails with."""
    with pytest.raises(MCPError) as exc:
        await session.call_tool(tool, arguments)
    return str(exc.value)


async def test_an_idle_session_past_its_bound_ends_is_told_why_and_the_next_resumes(
    gateways: MakeGateway,
) -> None:
    """An /mcp session that never listens while 12 chats of 8 KiB arrive (over a 64 KiB
    bound) is ended: its participant goes offline, its next request says it was a slow
    consumer and what to do, and the next session's listen returns every message."""
    gw = await gateways(limits=Limits(rate_per_s=0, send_buffer_bytes=64 * 1024))
    open_mcp = opener("http", gw.http, gw.url)
    sender = await gw.connect()
    await sender.send({"type": "join", "participantId": "sender", "space": "default"})
    await sender.expect("system/welcome")
    texts = [f"{i} " + "x" * 8192 for i in range(12)]
    async with open_mcp("idle") as idle:
        await call(idle, "who")
        for text in texts:
            await sender.send({"kind": "chat", "channel": "#general", "payload": {"text": text}})
        await gw.settle()
        await sender.fence()
        assert "idle" not in gw.router.spaces["default"].online
        assert _door(gw).sessions == {}
        told = await _failure(idle, "listen", timeout_s=1)
        assert "slow consumer" in told and "send_buffer_bytes" in told, told
        assert "initialize a new session" in told, told
    async with open_mcp("idle") as again:  # resumes where the ended one stopped
        got: list[str] = []
        while len(got) < len(texts):
            result = await call(again, "listen", timeout_s=1)
            got += [m["text"] for m in result["messages"]]
        assert got == texts


async def test_a_session_stays_while_it_listens(gateways: MakeGateway) -> None:
    """The bound counts what the session did not listen for: one that listens between
    bursts takes far more than its bound in all."""
    gw = await gateways(limits=Limits(rate_per_s=0, send_buffer_bytes=64 * 1024))
    sender = await gw.connect()
    await sender.send({"type": "join", "participantId": "sender", "space": "default"})
    await sender.expect("system/welcome")
    async with opener("http", gw.http, gw.url)("busy") as busy:
        await call(busy, "who")
        for burst in range(6):
            for i in range(4):
                text = f"{burst}.{i} " + "y" * 8192
                await sender.send({"kind": "chat", "channel": "#general",
                                   "payload": {"text": text}})  # fmt: skip
            await gw.settle()
            got = 0
            while got < 4:
                got += len((await call(busy, "listen", timeout_s=1))["messages"])
        assert "busy" in gw.router.spaces["default"].online


async def test_a_replaced_session_is_ended_at_once(gateway: RunningGateway) -> None:
    """A second initialize of a participant replaces the first session: the first is gone
    from the door at once and its next request says it was replaced."""
    open_mcp = opener("http", gateway.http, gateway.url)
    async with open_mcp("twice") as first:
        await call(first, "who")
        async with open_mcp("twice") as second:
            await call(second, "who")
            await gateway.settle()
            door = _door(gateway)
            assert len(door.sessions) == 1
            (kept,) = door.sessions.values()
            assert kept.seat.session is gateway.router.spaces["default"].online["twice"]
            told = await _failure(first, "who")
            assert "ended this session" in told and "replaced" in told, told
            assert (await call(second, "who"))["participants"]


async def test_reinitializing_one_id_again_and_again_keeps_one_session(
    gw: RunningGateway,
) -> None:
    """Re-initializing one id again and again (the same client, one after the other) keeps
    one open session, not one per initialize (rate limit off: each initialize sends)."""
    gateway = gw
    headers = {**ACCEPT, "X-Hubbub-Participant": "again"}
    async with httpx2.AsyncClient(timeout=30) as http:
        for _ in range(60):
            opened = await http.post(gateway.http + "/mcp", json=INIT, headers=headers)
            assert opened.status_code == 200, opened.text
    await gateway.settle()
    assert len(_door(gateway).sessions) == 1


async def test_mcp_sessions_count_against_the_per_address_cap(gateways: MakeGateway) -> None:
    """With --max-connections-per-ip 4, one HTTP connection holds one slot and each open
    session one more: the fourth initialize is refused with 503 naming the cap, a WebSocket
    then too; ending a session frees its slot."""
    gw = await gateways(limits=Limits(max_connections_per_ip=4))
    url = gw.http + "/mcp"
    limits = httpx2.Limits(max_connections=1, max_keepalive_connections=1)
    async with httpx2.AsyncClient(timeout=30, limits=limits) as http:
        sids = []
        for i in range(3):
            headers = {**ACCEPT, "X-Hubbub-Participant": f"p{i}"}
            opened = await http.post(url, json=INIT, headers=headers)
            assert opened.status_code == 200, opened.text
            sids.append(opened.headers["mcp-session-id"])
        refused = await http.post(url, json=INIT, headers={**ACCEPT, "X-Hubbub-Participant": "p3"})
        assert refused.status_code == 503
        body = refused.json()
        assert body["error"] == "too_many_connections"
        assert "4" in body["message"] and "max_connections_per_ip" in body["message"]
        assert "/mcp sessions" in body["message"] and "--max-connections-per-ip" in body["message"]
        assert "p3" not in gw.router.spaces["default"].online
        ws = await httpx2.AsyncClient().__aenter__()  # a second connection of the address
        try:
            over = await ws.get(gw.http + "/health")
            assert over.status_code == 503 and "max_connections_per_ip" in over.text
        finally:
            await ws.aclose()
        headers = {**ACCEPT, "X-Hubbub-Participant": "p0", "mcp-session-id": sids[0],
                   "mcp-protocol-version": "2025-06-18"}  # fmt: skip
        ended = await http.delete(url, headers=headers)
        assert ended.status_code < 300
        again = await http.post(url, json=INIT, headers={**ACCEPT, "X-Hubbub-Participant": "p3"})
        assert again.status_code == 200, again.text


async def test_mcp_without_the_mcp_package_says_which_extra(
    gateway: RunningGateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "hubbub.mcp.tools", None)  # as if `mcp` were missing
    async with httpx2.AsyncClient() as http:
        resp = await http.post(
            gateway.http + "/mcp", json={}, headers={"X-Hubbub-Participant": "a"}
        )
    assert resp.status_code == 501 and install_command("mcp") in resp.json()["message"]
