"""Rate limits that a new id per message does not reset (issue 21 item 12), over real
sockets: an HTTP keep-alive connection is limited whatever ids it posts as, and one source
address is limited over all its HTTP connections and WebSocket sessions together."""

from __future__ import annotations

from typing import Any

import aiohttp

from hubbub.server.config import Limits
from tests.conftest import MakeGateway, WsClient

CHAT = {"kind": "chat", "channel": "#general", "payload": {"text": "hi"}}


async def _post(http: aiohttp.ClientSession, base: str, pid: str) -> tuple[int, dict[str, Any]]:
    async with http.post(f"{base}/participants/{pid}/messages", json=CHAT) as resp:
        return resp.status, await resp.json()


async def test_one_http_connection_posting_as_new_ids_is_limited(gateways: MakeGateway) -> None:
    gw = await gateways(limits=Limits(rate_per_s=1, rate_burst=5, rate_per_address_s=0))
    conn = aiohttp.TCPConnector(limit=1)  # one keep-alive connection for every post
    async with aiohttp.ClientSession(connector=conn) as http:
        answers = [await _post(http, gw.http, f"throwaway-{n}") for n in range(8)]
    assert [status for status, _ in answers[:5]] == [202] * 5
    status, body = answers[5]
    assert status == 429 and body["error"] == "rate_limited"
    assert "per connection" in body["message"] and "limits.rate_per_s" in body["message"]


async def test_one_address_opening_new_connections_is_limited(gateways: MakeGateway) -> None:
    gw = await gateways(
        limits=Limits(rate_per_s=100, rate_per_address_s=1, rate_per_address_burst=6)
    )
    statuses = []
    for n in range(8):  # a new connection and a new id for each post
        async with aiohttp.ClientSession() as http:
            status, body = await _post(http, gw.http, f"throwaway-{n}")
            statuses.append(status)
    assert statuses[:6] == [202] * 6 and statuses[6] == 429
    assert "127.0.0.1" in body["message"] and "limits.rate_per_address_s" in body["message"]


async def test_websocket_sessions_of_one_address_share_its_limit(gateways: MakeGateway) -> None:
    gw = await gateways(
        limits=Limits(rate_per_s=100, rate_per_address_s=1, rate_per_address_burst=6)
    )
    clients: list[WsClient] = [await gw.mew(f"ws-{n}") for n in range(4)]
    for c in clients:
        await c.send(CHAT)
        await c.send(CHAT)
    # the seventh frame from 127.0.0.1 is over the address's burst, whichever session sent it
    last = clients[-1]
    await last.send(CHAT)
    err = await last.next_where(lambda f: f.get("kind") == "system/error")
    assert err["payload"]["error"] == "rate_limited"
    assert "your address" in err["payload"]["message"]


async def test_rate_limit_off_turns_every_rate_limit_off(gateways: MakeGateway) -> None:
    gw = await gateways(limits=Limits(rate_per_s=0, rate_burst=0))
    conn = aiohttp.TCPConnector(limit=1)
    async with aiohttp.ClientSession(connector=conn) as http:
        statuses = [(await _post(http, gw.http, f"t{n}"))[0] for n in range(300)]
    assert set(statuses) == {202}
