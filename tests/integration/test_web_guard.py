"""Browsers on other origins: WebSocket upgrades and state-changing requests, framing headers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiohttp
import pytest
import websockets
from websockets.exceptions import InvalidStatus

from hubbub.server.config import ConfigError, Limits
from tests.conftest import RunningGateway, start_gateway, stop_gateway

EVIL = "http://evil.example"
CHAT = {"kind": "chat", "channel": "#general", "payload": {"text": "from a web page"}}


async def _post(
    gw: RunningGateway, path: str, headers: dict[str, str], body: Any = None
) -> tuple[int, dict[str, Any]]:
    async with (
        aiohttp.ClientSession() as http,
        http.post(f"{gw.http}{path}", json=body, headers=headers) as resp,
    ):
        return resp.status, await resp.json(content_type=None)


async def _history(gw: RunningGateway) -> list[dict[str, Any]]:
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"{gw.http}/channels/general/messages?after_seq=0") as resp,
    ):
        body = await resp.json()
    messages: list[dict[str, Any]] = body["messages"]
    return messages


async def test_a_websocket_from_another_origin_is_refused_with_a_reason(
    gateway: RunningGateway,
) -> None:
    with pytest.raises(InvalidStatus) as info:
        await websockets.connect(gateway.url, origin=EVIL)  # type: ignore[arg-type]
    response = info.value.response
    assert response.status_code == 403
    body = response.body.decode()
    assert EVIL in body and "--allow-origin" in body and "forbidden_origin" in body
    assert not gateway.router.spaces["default"].online


async def test_a_websocket_from_the_gateways_own_origin_joins(gateway: RunningGateway) -> None:
    for own in (f"http://127.0.0.1:{gateway.port}", f"http://localhost:{gateway.port}"):
        url = own.replace("http://", "ws://") + "/ws"  # the Host header matches the Origin
        ws = await websockets.connect(url, origin=own)  # type: ignore[arg-type]
        await ws.send('{"type":"join","participantId":"page"}')
        assert '"system/welcome"' in str(await ws.recv())
        await ws.close()


async def test_a_websocket_from_the_same_host_on_another_port_is_refused(
    gateway: RunningGateway,
) -> None:
    with pytest.raises(InvalidStatus) as info:
        await websockets.connect(gateway.url, origin=f"http://127.0.0.1:{gateway.port + 1}")  # type: ignore[arg-type]
    assert info.value.response.status_code == 403


async def test_posts_from_another_origin_are_refused(gateway: RunningGateway) -> None:
    alice = await gateway.mew("alice")
    status, body = await _post(gateway, "/participants/mallory/messages", {"Origin": EVIL}, CHAT)
    assert status == 403 and body["error"] == "forbidden_origin" and EVIL in body["message"]
    status, body = await _post(
        gateway,
        "/admin/participants/alice/ban",
        {"Origin": EVIL, "X-Hubbub-Request": "1", "Content-Type": "application/json"},
        {},
    )
    assert status == 403 and body["error"] == "forbidden_origin"
    assert not gateway.router.bans.is_banned("default", "alice")
    assert "alice" in gateway.router.spaces["default"].online
    await alice.silent(lambda f: f.get("kind") == "chat")
    assert await _history(gateway) == []


async def test_requests_without_an_origin_keep_working(gateway: RunningGateway) -> None:
    bob = await gateway.mew("bob")  # the test client sends no Origin, as scripts and the SDK
    status, body = await _post(gateway, "/participants/cron/messages", {}, CHAT)
    assert status == 202, body
    assert (await bob.expect("chat"))["from"] == "cron"


async def test_own_origin_posts_are_accepted(gateway: RunningGateway) -> None:
    own = f"http://127.0.0.1:{gateway.port}"
    status, body = await _post(gateway, "/participants/page/messages", {"Origin": own}, CHAT)
    assert status == 202, body


async def test_the_admin_kill_switch_needs_a_non_simple_request_in_open_mode(
    gateway: RunningGateway,
) -> None:
    await gateway.mew("alice")
    status, body = await _post(gateway, "/admin/participants/alice/ban", {})
    assert status == 403 and body["error"] == "not_a_script_request"
    assert "X-Hubbub-Request: 1" in body["message"]
    assert not gateway.router.bans.is_banned("default", "alice")
    status, body = await _post(
        gateway, "/admin/participants/alice/ban", {"X-Hubbub-Request": "1"}, {}
    )
    assert status == 200 and body["banned"] is True


async def test_an_allowed_origin_may_connect_and_gets_cors_answers(tmp_path: Path) -> None:
    app = "http://app.example:3000"
    gw = await start_gateway(tmp_path, limits=Limits(allowed_origins=["HTTP://App.Example:3000/"]))
    try:
        ws = await websockets.connect(gw.url, origin=app)  # type: ignore[arg-type]
        await ws.send('{"type":"join","participantId":"webapp"}')
        assert '"system/welcome"' in str(await ws.recv())
        await ws.close()
        with pytest.raises(InvalidStatus):
            await websockets.connect(gw.url, origin=EVIL)  # type: ignore[arg-type]
        async with aiohttp.ClientSession() as http:
            preflight = {
                "Origin": app,
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "content-type,x-hubbub-request",
            }
            async with http.options(
                f"{gw.http}/participants/webapp/messages", headers=preflight
            ) as resp:
                assert resp.status == 204
                assert resp.headers["Access-Control-Allow-Origin"] == app
                assert "x-hubbub-request" in resp.headers["Access-Control-Allow-Headers"].lower()
            async with http.options(
                f"{gw.http}/participants/webapp/messages", headers=preflight | {"Origin": EVIL}
            ) as resp:
                assert "Access-Control-Allow-Origin" not in resp.headers
        status, body = await _post(gw, "/participants/webapp/messages", {"Origin": app}, CHAT)
        assert status == 202, body
    finally:
        await stop_gateway(gw)


def test_a_malformed_allowed_origin_is_refused_with_the_fix() -> None:
    for bad in ("evil.example", "http://x.example/path", "null", "ftp://x.example", "*"):
        with pytest.raises(ConfigError, match="allowed_origins") as info:
            Limits(allowed_origins=[bad]).validate()
        assert "scheme://host[:port]" in str(info.value)


async def test_every_html_response_refuses_framing_and_sniffing(gateway: RunningGateway) -> None:
    async with aiohttp.ClientSession() as http:
        for path, accept in (("/dashboard", "text/html"), ("/no-such-page", "text/html")):
            async with http.get(f"{gateway.http}{path}", headers={"Accept": accept}) as resp:
                assert resp.headers["X-Frame-Options"] == "DENY", path
                assert "frame-ancestors 'none'" in resp.headers["Content-Security-Policy"], path
                assert resp.headers["X-Content-Type-Options"] == "nosniff", path
