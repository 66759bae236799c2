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


REBIND = "rebind.attacker.example"
"""A name the attacker points at 127.0.0.1 after the victim's browser loaded its page."""


async def _as_host(
    gw: RunningGateway, method: str, path: str, host: str, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, Any]]:
    """A request addressed (``Host``) to ``host`` on the gateway's port, as a page served
    under that name would send it; the body, when JSON."""
    sent = {"Host": f"{host}:{gw.port}", "Origin": f"http://{host}:{gw.port}"}
    async with (
        aiohttp.ClientSession() as http,
        http.request(method, f"{gw.http}{path}", headers=sent | (headers or {})) as resp,
    ):
        return resp.status, await resp.json(content_type=None) if resp.status != 200 else {}


async def test_dns_rebinding_is_refused_on_websocket_and_http(gateway: RunningGateway) -> None:
    """A page on a name that resolves to 127.0.0.1 sends ``Host`` and ``Origin`` both on
    that name: it is the gateway's own origin as far as the Origin check can tell."""
    alice = await gateway.mew("alice")
    await alice.send(CHAT)
    await alice.expect("chat")
    rebind = f"http://{REBIND}:{gateway.port}"
    async with aiohttp.ClientSession() as http:
        with pytest.raises(aiohttp.WSServerHandshakeError) as info:
            await http.ws_connect(
                gateway.url, headers={"Host": f"{REBIND}:{gateway.port}"}, origin=rebind
            )
        assert info.value.status == 421
    for method, path, extra in (
        ("GET", "/channels/general/messages?after_seq=0", {}),
        ("GET", "/participants", {}),
        ("GET", "/dashboard", {"Accept": "text/html"}),
        ("POST", "/admin/participants/alice/ban", {"X-Hubbub-Request": "1"}),
        ("POST", "/participants/mallory/messages", {"Content-Type": "application/json"}),
    ):
        status, body = await _as_host(gateway, method, path, REBIND, extra)
        assert status == 421, (method, path, status)
        assert body["error"] == "forbidden_host" and REBIND in body["message"]
        assert "--allowed-hosts" in body["message"]
    assert not gateway.router.bans.is_banned("default", "alice")
    assert "mallory" not in gateway.router.spaces["default"].known


async def test_loopback_names_and_addresses_are_answered(gateway: RunningGateway) -> None:
    for host in ("localhost", "127.0.0.1", "LocalHost", "app.localhost", "[::1]", "10.1.2.3"):
        status, _ = await _as_host(gateway, "GET", "/participants", host)
        assert status == 200, host


async def test_configured_hosts_are_answered(tmp_path: Path) -> None:
    limits = Limits(allowed_hosts=["Chat.Example.com", ".corp.example"])
    gw = await start_gateway(tmp_path, limits=limits)
    try:
        for host in ("chat.example.com", "corp.example", "team.corp.example", "localhost"):
            status, _ = await _as_host(gw, "GET", "/participants", host)
            assert status == 200, host
        for host in ("example.com", "evilcorp.example", REBIND):
            status, _ = await _as_host(gw, "GET", "/participants", host)
            assert status == 421, host
    finally:
        await stop_gateway(gw)


async def test_any_host_when_the_list_holds_a_star(tmp_path: Path) -> None:
    gw = await start_gateway(tmp_path, limits=Limits(allowed_hosts=["*"]))
    try:
        status, _ = await _as_host(gw, "GET", "/participants", REBIND)
        assert status == 200
    finally:
        await stop_gateway(gw)


def test_a_malformed_allowed_host_is_refused_with_the_fix() -> None:
    for bad in ("http://chat.example.com", "chat.example.com:8080", "a/b", "", "*.example.com"):
        with pytest.raises(ConfigError, match="allowed_hosts") as info:
            Limits(allowed_hosts=[bad]).validate()
        assert ".example.com" in str(info.value)
