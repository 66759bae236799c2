"""Limits that hold per participant and per space: the rate across reconnects, the channel cap."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiohttp
import pytest

from hubbub.server.config import Limits, ParticipantConfig, SpaceConfig, hash_token
from hubbub.store.sqlite import SqliteStore
from tests.conftest import RunningGateway, WsClient, start_gateway, stop_gateway


def team_space() -> SpaceConfig:
    cfg = SpaceConfig(
        space="team",
        participants={"bot": ParticipantConfig(kind="agent", token_hash=hash_token("bot-token"))},
    )
    cfg.validate()
    return cfg


async def error_of(c: WsClient) -> dict[str, Any]:
    """The next error frame on either dialect, as {error, message}."""
    frame = await c.next_where(
        lambda f: f.get("kind") == "system/error" or f.get("type") == "ERROR"
    )
    if frame.get("type") == "ERROR":
        return {"error": frame["code"].lower(), "message": frame["message"]}
    payload: dict[str, Any] = frame["payload"]
    return payload


async def connect_bot(gw: RunningGateway, dialect: str) -> WsClient:
    if dialect == "mew":
        return await gw.mew("bot", space="team", token="bot-token")
    # joined by IDENTIFY, so that no JOIN frame spends the rate
    return await gw.agentchat(
        "bot", space="team", token="bot-token", join=False, channels=["#general"]
    )


async def send_chat(c: WsClient, dialect: str, text: str) -> None:
    if dialect == "mew":
        await c.send({"kind": "chat", "channel": "#general", "payload": {"text": text}})
    else:
        await c.send({"type": "MSG", "to": "#general", "content": text})


# ---------------------------------------------------------------------------------------------
# the rate limit belongs to the participant, not to its connection
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dialect", ["mew", "agentchat"])
async def test_a_reconnect_does_not_refill_the_rate_limit(tmp_path: Path, dialect: str) -> None:
    # 3 messages of burst and practically no refill: the bucket stays empty for the whole test
    limits = Limits(rate_per_s=0.001, rate_burst=3)
    gw = await start_gateway(tmp_path, spaces=[team_space()], limits=limits)
    try:
        bot = await connect_bot(gw, dialect)
        accepted = 0
        for n in range(10):
            await send_chat(bot, dialect, f"m{n}")
            frame = await bot.next_where(
                lambda f: (
                    f.get("kind") in ("chat", "system/error") or f.get("type") in ("MSG", "ERROR")
                )
            )
            if frame.get("kind") == "system/error" or frame.get("type") == "ERROR":
                break
            accepted += 1
        assert accepted == 3
        await bot.close()
        again = await connect_bot(gw, dialect)
        await send_chat(again, dialect, "fresh burst?")
        refusal = await error_of(again)
        assert refusal["error"] == "rate_limited" and "20" not in refusal["message"]
        async with (
            aiohttp.ClientSession() as http,
            http.post(
                f"{gw.http}/participants/bot/messages",
                json={"kind": "chat", "channel": "#general", "payload": {"text": "via http"}},
                headers={"Authorization": "Bearer bot-token"},
            ) as resp,
        ):
            assert resp.status == 429
    finally:
        await stop_gateway(gw)


# ---------------------------------------------------------------------------------------------
# a space has at most limits.max_channels channels
# ---------------------------------------------------------------------------------------------


async def test_channel_create_stops_at_the_cap_on_both_dialects(tmp_path: Path) -> None:
    gw = await start_gateway(tmp_path, limits=Limits(max_channels=3))
    try:
        alice = await gw.mew("alice")
        for name in ("#a", "#b"):
            await alice.send({"kind": "channel/create", "payload": {"channel": name}})
            assert (await alice.expect("channel/joined"))["payload"]["channel"] == name
        await alice.send({"kind": "channel/create", "payload": {"channel": "#c"}})
        refusal = await error_of(alice)
        assert refusal["error"] == "channel_limit"
        assert "3" in refusal["message"] and "limits.max_channels" in refusal["message"]
        bob = await gw.agentchat("bob")
        await bob.send({"type": "CREATE_CHANNEL", "channel": "#d"})
        assert (await error_of(bob))["error"] == "channel_limit"
        assert sorted(gw.router.spaces["default"].channels) == ["#a", "#b", "#general"]
    finally:
        await stop_gateway(gw)


async def test_the_welcome_lists_a_bounded_number_of_channels_own_first(tmp_path: Path) -> None:
    gw = await start_gateway(tmp_path, limits=Limits(welcome_channels=3))
    try:
        maker = await gw.mew("maker")
        for n in range(1, 6):
            await maker.send({"kind": "channel/create", "payload": {"channel": f"#c{n}"}})
            await maker.expect("channel/joined")
        newcomer = await gw.mew("newcomer", channels=["#c5"])
        welcome = newcomer.welcome["payload"]
        assert welcome["channels"][0]["name"] == "#c5"
        assert len(welcome["channels"]) == 3 and welcome["channels_total"] == 6
        await newcomer.send({"kind": "channel/list"})
        listed = await newcomer.expect("channel/list-response")
        assert len(listed["payload"]["channels"]) == 6
    finally:
        await stop_gateway(gw)


async def test_many_stored_channels_load_and_stay_out_of_the_welcome(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "hubbub.db")
    await store.open()
    for n in range(3000):
        store.put_channel("default", f"#stored-{n}")
    await store.close()
    gw = await start_gateway(tmp_path)  # more than the default cap of 1,000
    try:
        assert len(gw.router.spaces["default"].channels) == 3001
        alice = await gw.mew("alice")
        welcome = alice.welcome["payload"]
        assert welcome["channels"][0]["name"] == "#general"
        assert len(welcome["channels"]) == 100 and welcome["channels_total"] == 3001
        await alice.send({"kind": "channel/create", "payload": {"channel": "#one-more"}})
        assert (await error_of(alice))["error"] == "channel_limit"
        await alice.send({"kind": "channel/join", "payload": {"channel": "#stored-2999"}})
        assert (await alice.expect("channel/joined"))["payload"]["channel"] == "#stored-2999"
    finally:
        await stop_gateway(gw)
