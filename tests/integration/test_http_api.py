"""The HTTP API on the gateway's port."""

from __future__ import annotations

from pathlib import Path

import aiohttp

from hubbub.server.config import EngineSettings, ParticipantConfig, SpaceConfig, hash_token
from tests.conftest import RunningGateway, start_gateway, stop_gateway


async def test_health_and_metrics(gateway: RunningGateway) -> None:
    alice = await gateway.mew("alice")
    await alice.send({"kind": "chat", "payload": {"text": "x"}})
    await alice.expect("chat")
    await alice.send("{not json")
    await alice.expect("system/error")
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{gateway.http}/health") as resp:
            assert resp.status == 200
            body = await resp.json()
            assert body["status"] == "healthy" and body["connections"] == 1
        async with http.get(f"{gateway.http}/metrics") as resp:
            text = await resp.text()
    assert 'hubbub_connections{dialect="mew"} 1.0' in text
    assert "hubbub_messages_in_total" in text
    assert 'hubbub_errors_total{code="invalid_json"} 1.0' in text


async def test_post_message_in_open_mode_reaches_the_channel(gateway: RunningGateway) -> None:
    bob = await gateway.mew("bob")
    async with (
        aiohttp.ClientSession() as http,
        http.post(
            f"{gateway.http}/participants/cron/messages",
            json={"kind": "chat", "channel": "#general", "payload": {"text": "nightly done"}},
        ) as resp,
    ):
        assert resp.status == 202
        body = await resp.json()
    assert body["status"] == "accepted" and body["timestamp"].endswith("Z")
    msg = await bob.expect("chat")
    assert msg["id"] == body["id"] and msg["from"] == "cron"


async def test_post_and_read_with_tokens(tmp_path: Path) -> None:
    cfg = SpaceConfig(
        space="team",
        participants={
            "ci": ParticipantConfig(
                kind="service",
                token_hash=hash_token("ci-token"),
                # posting into a channel over HTTP needs the right to join it, as on a WebSocket
                capabilities=[{"kind": ["chat", "channel/join"]}],
            ),
            "eve": ParticipantConfig(kind="human", token_hash=hash_token("eve-token")),
        },
    )
    cfg.validate()
    gw = await start_gateway(tmp_path, spaces=[cfg])
    url = f"{gw.http}/participants/ci/messages"
    chat = {"kind": "chat", "channel": "#general", "payload": {"text": "build green"}}
    try:
        async with aiohttp.ClientSession() as http:
            async with http.post(url, json=chat) as resp:
                assert resp.status == 401
                assert "Bearer" in (await resp.json())["message"]
            async with http.post(
                url, json=chat, headers={"Authorization": "Bearer eve-token"}
            ) as r:
                assert r.status == 401
                assert "belongs to 'eve'" in (await r.json())["message"]
            bad = {"kind": "mcp/request", "to": ["eve"], "payload": {"method": "tools/list"}}
            auth = {"Authorization": "Bearer ci-token"}
            async with http.post(url, json=bad, headers=auth) as resp:
                assert resp.status == 403
                assert (await resp.json())["error"] == "capability_violation"
            async with http.post(url, json=chat, headers=auth) as resp:
                assert resp.status == 202
            async with http.post(url, data=b"{oops", headers=auth) as resp:
                assert resp.status == 400
            async with http.get(f"{gw.http}/channels/general/messages") as resp:
                assert resp.status == 401
            async with http.get(
                f"{gw.http}/channels/%23general/messages?after_seq=0&limit=10", headers=auth
            ) as resp:
                body = await resp.json()
            assert [m["payload"]["text"] for m in body["messages"]] == ["build green"]
            assert body["next_after_seq"] == 1
            async with http.get(
                f"{gw.http}/channels/general/messages?after_seq=abc", headers=auth
            ) as resp:
                assert resp.status == 400
                assert "after_seq" in (await resp.json())["message"]
            async with http.get(f"{gw.http}/channels/nope/messages", headers=auth) as resp:
                assert resp.status == 404
            async with http.get(f"{gw.http}/participants", headers=auth) as resp:
                people = {p["id"]: p for p in (await resp.json())["participants"]}
            assert people["eve"]["presence"] == "offline" and people["eve"]["kind"] == "human"
    finally:
        await stop_gateway(gw)


async def test_participants_shows_presence_and_channels(gateway: RunningGateway) -> None:
    await gateway.mew("alice")
    await gateway.agentchat("bob")
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"{gateway.http}/participants") as resp,
    ):
        people = {p["id"]: p for p in (await resp.json())["participants"]}
    assert people["alice"]["presence"] == "online"
    assert people["bob"]["channels"] == ["#general"]


async def test_http_posts_are_rate_limited_too(gateway: RunningGateway) -> None:
    url = f"{gateway.http}/participants/cron/messages"
    chat = {"kind": "chat", "payload": {"text": "tick"}}
    statuses = []
    async with aiohttp.ClientSession() as http:
        for _ in range(60):
            async with http.post(url, json=chat) as resp:
                statuses.append(resp.status)
                if resp.status == 429:
                    assert (await resp.json())["error"] == "rate_limited"
    assert statuses.count(202) >= 40 and statuses.count(429) >= 1
    assert statuses.count(202) + statuses.count(429) == 60


async def test_post_reports_refused_callbacks_and_still_relays(tmp_path: Path) -> None:
    gw = await start_gateway(
        tmp_path, engines=EngineSettings(cb_max_payload=10, cb_max_per_agent=1)
    )
    url = f"{gw.http}/participants/cron/messages"
    try:
        bob = await gw.mew("bob")
        async with aiohttp.ClientSession() as http:
            text = "nightly done @@cb:300s@@ok @@cb:300s@@second @@cb:300s@@far too long"
            chat = {"kind": "chat", "channel": "#general", "payload": {"text": text}}
            async with http.post(url, json=chat) as resp:
                assert resp.status == 202
                body = await resp.json()
            plain = {"kind": "chat", "channel": "#general", "payload": {"text": "plain"}}
            async with http.post(url, json=plain) as resp:
                assert resp.status == 202
                assert "errors" not in await resp.json()
        assert body["status"] == "accepted" and isinstance(body["seq"], int)
        errors = body["errors"]
        assert [e["error"] for e in errors] == ["callback_rejected", "callback_rejected"]
        assert "AGENTCHAT_CB_MAX_PER_AGENT" in errors[0]["message"]
        assert "AGENTCHAT_CB_MAX_PAYLOAD" in errors[1]["message"]
        msg = await bob.expect("chat")
        assert msg["id"] == body["id"] and msg["payload"]["text"] == "nightly done"
        assert gw.router.coordination.spaces["default"].callbacks.count("cron") == 1
        assert gw.router.metrics.errors["callback_rejected"] == 2
    finally:
        await stop_gateway(gw)


async def test_post_with_sleep_and_callback_is_refused_before_scheduling(
    gateway: RunningGateway,
) -> None:
    chat = {"kind": "chat", "channel": "#general", "payload": {"text": "@@cb:300s@@x@@sleep:5s@@"}}
    async with (
        aiohttp.ClientSession() as http,
        http.post(f"{gateway.http}/participants/cron/messages", json=chat) as resp,
    ):
        assert resp.status == 400
        body = await resp.json()
    assert body["error"] == "invalid_envelope" and "WebSocket" in body["message"]
    assert gateway.router.coordination.spaces["default"].callbacks.count("cron") == 0
    assert await gateway.router.store.callbacks("default") == []
    assert not any(e["event"] == "callback-scheduled" for e in gateway.router.activity.recent)


async def test_participants_keep_their_kind_once_they_left(gateway: RunningGateway) -> None:
    dana = await gateway.mew("dana", kind="human")
    maths = await gateway.mew("maths", kind="agent")
    watcher = await gateway.mew("watcher")
    url = f"{gateway.http}/participants"
    async with aiohttp.ClientSession() as http:
        async with http.post(
            f"{url}/cron/messages", json={"kind": "chat", "payload": {"text": "tick"}}
        ) as resp:
            assert resp.status == 202
        for client in (dana, maths):
            await client.close()
        gone: set[str] = set()
        while gone != {"dana", "maths"}:  # the leaves may come coalesced in one frame
            f = await watcher.expect("system/presence")
            if f["payload"].get("event") == "leave":
                p = f["payload"]
                gone.update(e["id"] for e in p.get("participants") or [p["participant"]])
        async with http.get(url) as resp:
            people = {p["id"]: p for p in (await resp.json())["participants"]}
    assert {pid: (people[pid]["kind"], people[pid]["presence"]) for pid in people} == {
        "dana": ("human", "offline"),  # was: agent, the default kind
        "maths": ("agent", "offline"),
        "cron": (people["cron"]["kind"], "offline"),
        "watcher": ("agent", "online"),
    }
    await gateway.mew("dana", kind="agent")  # a participant is the kind it connects as now
    async with aiohttp.ClientSession() as http, http.get(url) as resp:
        people = {p["id"]: p for p in (await resp.json())["participants"]}
    assert people["dana"]["kind"] == "agent"
