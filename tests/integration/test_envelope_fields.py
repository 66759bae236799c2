"""Envelope fields a client may get wrong: an empty channel, a foreign protocol; invalid UTF-8."""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest
import websockets

from tests.conftest import RunningGateway


async def post(gw: RunningGateway, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    async with (
        aiohttp.ClientSession() as http,
        http.post(f"{gw.http}/participants/cron/messages", json=body) as resp,
    ):
        return resp.status, await resp.json()


async def test_an_empty_channel_is_refused_not_sent_to_general(gateway: RunningGateway) -> None:
    alice = await gateway.mew("alice")
    bob = await gateway.agentchat("bob")
    await alice.send({"id": "e1", "kind": "chat", "channel": "", "payload": {"text": "where?"}})
    err = await alice.expect("system/error")
    assert err["payload"]["error"] == "invalid_channel" and err["correlation_id"] == ["e1"]
    assert "''" in err["payload"]["message"] and "#" in err["payload"]["message"]
    status, body = await post(
        gateway, {"kind": "chat", "channel": "", "payload": {"text": "where?"}}
    )
    assert status == 400 and body["error"] == "invalid_channel"
    await bob.silent(lambda f: f.get("type") == "MSG")
    assert await gateway.router.store.history("default", "#general") == []


@pytest.mark.parametrize("value", ["<img src=x onerror=alert(1)>", "mew/v1.0", "", "MEW/v0.4"])
async def test_a_protocol_other_than_mew_v0_is_refused(gateway: RunningGateway, value: str) -> None:
    alice = await gateway.mew("alice")
    bob = await gateway.mew("bob")
    bad = {"protocol": value, "kind": "chat", "payload": {"text": "hi"}}
    await alice.send(bad)
    err = await alice.expect("system/error")
    assert err["payload"]["error"] == "invalid_envelope"
    assert "protocol" in err["payload"]["message"] and "mew/v0.4" in err["payload"]["message"]
    status, body = await post(gateway, bad)
    assert status == 400 and body["error"] == "invalid_envelope"
    await bob.silent(lambda f: f.get("kind") == "chat")


async def test_the_protocol_is_mew_v0_on_the_way_out(gateway: RunningGateway) -> None:
    alice = await gateway.mew("alice")
    await alice.send({"kind": "chat", "payload": {"text": "no protocol"}})
    assert (await alice.expect("chat"))["protocol"] == "mew/v0.4"
    await alice.send({"protocol": "mew/v0.3", "kind": "chat", "payload": {"text": "older"}})
    assert (await alice.expect("chat"))[
        "protocol"
    ] == "mew/v0.4"  # accepted; the gateway writes its own version


async def test_a_text_frame_of_invalid_utf8_closes_with_1007(gateway: RunningGateway) -> None:
    alice = await gateway.mew("alice")
    await alice.ws.send(b'{"kind":"chat","payload":{"text":"\xff"}}', text=True)
    with pytest.raises(websockets.ConnectionClosed) as info:
        while True:
            await alice.recv()
    assert info.value.rcvd is not None and info.value.rcvd.code == 1007
