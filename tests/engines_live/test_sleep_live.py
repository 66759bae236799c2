"""Sleep/wake over real sockets: modes, buffering, wake DM, presence, early wake, disconnect."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiohttp

from tests.conftest import WsClient, stop_gateway
from tests.engines_live.conftest import EngineGateway, start_engine_gateway


def _chat(text: str, channel: str = "#general") -> dict[str, Any]:
    return {"kind": "chat", "channel": channel, "payload": {"text": text}}


def _dm(to: str, text: str) -> dict[str, Any]:
    return {"kind": "chat", "to": [to], "private": True, "payload": {"text": text}}


def _presence_of(pid: str, presence: str) -> Any:
    def match(f: dict[str, Any]) -> bool:
        p = f.get("payload", {})
        people = p.get("participants") or ([p["participant"]] if "participant" in p else [])
        return f.get("kind") == "system/presence" and any(
            x.get("id") == pid and x.get("presence") == presence for x in people
        )

    return match


async def _asleep(egw: EngineGateway, sleeper: WsClient, watcher: WsClient, marker: str) -> Any:
    await sleeper.send(_chat(marker))
    update = await watcher.next_where(_presence_of("sleeper", "sleeping"))
    return update


async def test_default_mode_drops_channel_buffers_dms_and_mentions(egw: EngineGateway) -> None:
    sleeper = await egw.mew("sleeper")
    other = await egw.mew("other")
    update = await _asleep(egw, sleeper, other, "@@sleep:60s@@")
    person = update["payload"]["participant"]
    assert person["presence"] == "sleeping" and person["wake_at"].endswith("Z")
    await other.send(_chat("chit chat"))
    await other.send(_dm("sleeper", "dm one"))
    await other.send(_chat("hey @sleeper look"))
    await other.send(_chat("@sleeperish is someone else"))
    await egw.synced(other)
    await sleeper.silent(lambda f: f.get("kind") == "chat")
    egw.tick(61)
    wake = await sleeper.next_where(lambda f: f.get("kind") == "chat")
    assert wake["from"] == "system:gateway" and wake["to"] == ["sleeper"]
    assert wake["payload"] == {"text": "@@wake@@", "buffered": 2}
    first = await sleeper.next_where(lambda f: f.get("kind") == "chat")
    second = await sleeper.next_where(lambda f: f.get("kind") == "chat")
    assert [first["payload"]["text"], second["payload"]["text"]] == ["dm one", "hey @sleeper look"]
    await other.next_where(_presence_of("sleeper", "online"))
    await other.send(_chat("back to normal"))
    got = await sleeper.next_where(lambda f: f.get("kind") == "chat")
    assert got["payload"]["text"] == "back to normal"


async def test_sleep_buffers_what_the_one_mention_rule_calls_a_mention(egw: EngineGateway) -> None:
    """The gateway asks protocol/mentions.py: any case, a sentence's final period; not an
    address inside a word, a longer id, a domain, or the @@ of a marker."""
    sleeper = await egw.mew("sleeper")
    other = await egw.mew("other")
    await _asleep(egw, sleeper, other, "@@sleep:60s@@")
    mentioned = ["hey @Sleeper look", "ask @SLEEPER.", "(@sleeper) ok"]
    not_mentioned = [
        "mail bob@sleeper.org",
        "see @sleeper.org",
        "@sleeper-bot is another",
        "x@@sleeper@@",
    ]
    for text in [*not_mentioned, *mentioned]:
        await other.send(_chat(text))
    await egw.synced(other)
    egw.tick(61)
    wake = await sleeper.next_where(lambda f: f.get("kind") == "chat")
    assert wake["payload"] == {"text": "@@wake@@", "buffered": len(mentioned)}
    got = [(await sleeper.next_where(lambda f: f.get("kind") == "chat")) for _ in mentioned]
    assert [f["payload"]["text"] for f in got] == mentioned


async def test_marker_only_sleep_is_not_relayed(egw: EngineGateway) -> None:
    sleeper = await egw.mew("sleeper")
    other = await egw.mew("other")
    await _asleep(egw, sleeper, other, "@@sleep:30s@@")
    await other.silent(lambda f: f.get("kind") == "chat")


async def test_text_with_sleep_marker_is_relayed_stripped_then_sleeps(egw: EngineGateway) -> None:
    sleeper = await egw.mew("sleeper")
    other = await egw.mew("other")
    await sleeper.send(_chat("going quiet for a bit @@sleep:30s:drop@@"))
    got = await other.expect("chat")
    assert got["payload"]["text"] == "going quiet for a bit"
    await other.next_where(_presence_of("sleeper", "sleeping"))


async def test_buffer_mode_buffers_everything_and_keeps_newest(tmp_path: Path) -> None:
    gw = await start_engine_gateway(tmp_path, sleep_max_buffer=3)
    try:
        sleeper = await gw.mew("sleeper")
        other = await gw.mew("other")
        await _asleep(gw, sleeper, other, "@@sleep:60s:buffer@@")
        for i in range(5):
            await other.send(_chat(f"m{i}"))
        await gw.synced(other)
        gw.tick(60)
        wake = await sleeper.next_where(lambda f: f.get("kind") == "chat")
        assert wake["payload"]["buffered"] == 3
        texts = [
            (await sleeper.next_where(lambda f: f.get("kind") == "chat"))["payload"]["text"]
            for _ in range(3)
        ]
        assert texts == ["m2", "m3", "m4"]
    finally:
        await stop_gateway(gw)


async def test_drop_mode_drops_everything(egw: EngineGateway) -> None:
    sleeper = await egw.mew("sleeper")
    other = await egw.mew("other")
    await _asleep(egw, sleeper, other, "@@sleep:60s:drop@@")
    await other.send(_dm("sleeper", "lost"))
    await other.send(_chat("@sleeper also lost"))
    await egw.synced(other)
    egw.tick(61)
    wake = await sleeper.next_where(lambda f: f.get("kind") == "chat")
    assert wake["payload"] == {"text": "@@wake@@", "buffered": 0}
    await sleeper.silent(lambda f: f.get("kind") == "chat")


async def test_sending_a_message_wakes_early_with_the_buffer(egw: EngineGateway) -> None:
    sleeper = await egw.mew("sleeper")
    other = await egw.mew("other")
    await _asleep(egw, sleeper, other, "@@sleep:600s@@")
    await other.send(_dm("sleeper", "while you slept"))
    await egw.synced(other)
    await sleeper.send(_chat("I'm up"))
    wake = await sleeper.next_where(lambda f: f.get("kind") == "chat")
    assert wake["payload"] == {"text": "@@wake@@", "buffered": 1}
    assert (await sleeper.next_where(lambda f: f.get("kind") == "chat"))["payload"]["text"] == (
        "while you slept"
    )
    assert (await other.expect("chat"))["payload"]["text"] == "I'm up"
    assert "sleeper" not in egw.router.coordination.spaces["default"].sleep


async def test_new_sleep_replaces_and_keeps_buffer(egw: EngineGateway) -> None:
    sleeper = await egw.mew("sleeper")
    other = await egw.mew("other")
    await _asleep(egw, sleeper, other, "@@sleep:60s@@")
    await other.send(_dm("sleeper", "kept"))
    await egw.synced(other)
    await sleeper.send(_chat("@@sleep:120s@@"))
    await egw.synced(sleeper)
    egw.tick(61)
    await sleeper.silent(lambda f: f.get("kind") == "chat")
    egw.tick(60)
    wake = await sleeper.next_where(lambda f: f.get("kind") == "chat")
    assert wake["payload"]["buffered"] == 1


async def test_disconnect_cancels_sleep_and_reconnect_is_online(egw: EngineGateway) -> None:
    sleeper = await egw.mew("sleeper")
    other = await egw.mew("other")
    await _asleep(egw, sleeper, other, "@@sleep:60s@@")
    await sleeper.close()
    await other.next_where(lambda f: f.get("payload", {}).get("event") == "leave")
    assert "sleeper" not in egw.router.coordination.spaces["default"].sleep
    again = await egw.mew("sleeper")
    me = [p for p in again.welcome["payload"]["participants"] if p["id"] == "sleeper"]
    assert me and me[0]["presence"] == "online"
    await other.send(_chat("hello again"))
    assert (await again.expect("chat"))["payload"]["text"] == "hello again"


async def test_sleepers_stay_members_and_state_is_on_http(egw: EngineGateway) -> None:
    sleeper = await egw.mew("sleeper")
    other = await egw.mew("other")
    await _asleep(egw, sleeper, other, "@@sleep:47s:buffer@@")
    await other.send(_dm("sleeper", "x"))
    await egw.synced(other)
    await other.send({"kind": "channel/members", "payload": {"channel": "#general"}})
    members = await other.expect("channel/members-response")
    assert "sleeper" in members["payload"]["members"]
    async with aiohttp.ClientSession() as http, http.get(egw.http + "/participants") as resp:
        body = await resp.json()
    me = next(p for p in body["participants"] if p["id"] == "sleeper")
    assert me["presence"] == "sleeping"
    assert me["sleeping"]["buffered"] == 1 and me["sleeping"]["mode"] == "buffer"
    assert me["sleeping"]["wake_at"] - egw.clock() > 45_000


async def test_agentchat_presence_and_wake_frames(egw: EngineGateway) -> None:
    watcher = await egw.agentchat("watcher")
    bot = await egw.agentchat("bot")
    await watcher.send({"type": "MSG", "to": "@bot", "content": "ignored until wake"})
    await bot.send({"type": "MSG", "to": "#general", "content": "@@sleep:2.5s@@"})
    pres = await watcher.next_where(lambda f: f.get("type") == "PRESENCE" and f["agent"] == "@bot")
    assert pres["presence"] == "sleeping" and isinstance(pres["wake_at"], int)
    await bot.expect_type("MSG")  # the DM sent before the sleep
    await watcher.send({"type": "MSG", "to": "@bot", "content": "buffered one"})
    await watcher.send({"type": "LIST_CHANNELS"})
    await watcher.expect_type("CHANNELS")
    egw.tick(3)
    wake = await bot.expect_type("MSG")
    assert wake["from"] == "@server" and wake["content"] == "@@wake@@" and wake["buffered"] == 1
    assert (await bot.expect_type("MSG"))["content"] == "buffered one"
    back = await watcher.next_where(lambda f: f.get("type") == "PRESENCE" and f["agent"] == "@bot")
    assert back["presence"] == "online"


def _feed(egw: EngineGateway, event: str) -> list[dict[str, Any]]:
    return [e for e in egw.router.activity.recent if e["event"] == event]


def _is_fire(f: dict[str, Any]) -> bool:
    return f.get("kind") == "chat" and "cb_id" in f.get("payload", {})


async def test_dm_callback_fired_while_asleep_is_buffered_until_wake(egw: EngineGateway) -> None:
    sleeper = await egw.mew("sleeper")
    other = await egw.mew("other")
    await sleeper.send(_chat("@@cb:10s@@check"))
    await _asleep(egw, sleeper, other, "@@sleep:60s@@")
    egw.tick(11)
    await sleeper.silent(lambda f: f.get("kind") == "chat")
    (fired,) = _feed(egw, "callback-fired")
    assert fired["asleep"] == "buffered" and not _feed(egw, "callback-dropped")
    egw.tick(50)
    wake = await sleeper.next_where(lambda f: f.get("kind") == "chat")
    assert wake["payload"] == {"text": "@@wake@@", "buffered": 1}
    fire = await sleeper.next_where(lambda f: f.get("kind") == "chat")
    assert _is_fire(fire) and fire["payload"]["text"] == "@@cb-fire@@check"
    assert fire["payload"]["cb_id"] == fired["cb_id"]


async def test_dm_callback_fired_in_drop_mode_is_reported_dropped(egw: EngineGateway) -> None:
    sleeper = await egw.mew("sleeper")
    other = await egw.mew("other")
    await sleeper.send(_chat("@@cb:10s@@check"))
    await _asleep(egw, sleeper, other, "@@sleep:60s:drop@@")
    egw.tick(11)
    assert not _feed(egw, "callback-fired")
    (dropped,) = _feed(egw, "callback-dropped")
    assert dropped["participant"] == "sleeper" and dropped["reason"] == "asleep (drop mode)"
    egw.tick(50)
    wake = await sleeper.next_where(lambda f: f.get("kind") == "chat")
    assert wake["payload"] == {"text": "@@wake@@", "buffered": 0}
    await sleeper.silent(_is_fire)
    assert egw.router.coordination.spaces["default"].callbacks.count("sleeper") == 0


async def test_channel_callback_while_asleep_reaches_the_channel_and_its_origin_at_wake(
    egw: EngineGateway,
) -> None:
    sleeper = await egw.mew("sleeper")
    other = await egw.mew("other")
    await sleeper.send(_chat("@@cb:10s#general@@standup"))
    await _asleep(egw, sleeper, other, "@@sleep:60s@@")  # default mode: drops channel chatter
    egw.tick(11)
    seen = await other.next_where(_is_fire)
    assert seen["channel"] == "#general" and seen["payload"]["cb_origin"] == "sleeper"
    assert _feed(egw, "callback-fired")[0]["asleep"] == "buffered"
    egw.tick(50)
    wake = await sleeper.next_where(lambda f: f.get("kind") == "chat")
    assert wake["payload"]["buffered"] == 1
    mine = await sleeper.next_where(lambda f: f.get("kind") == "chat")
    assert mine["id"] == seen["id"]


async def test_channel_callback_in_drop_mode_reaches_the_channel_only(egw: EngineGateway) -> None:
    sleeper = await egw.mew("sleeper")
    other = await egw.mew("other")
    await sleeper.send(_chat("@@cb:10s#general@@standup"))
    await _asleep(egw, sleeper, other, "@@sleep:60s:drop@@")
    egw.tick(11)
    assert (await other.next_where(_is_fire))["payload"]["text"] == "@@cb-fire@@standup"
    (fired,) = _feed(egw, "callback-fired")
    assert fired["asleep"] == "dropped (drop mode)" and fired["channel"] == "#general"
    egw.tick(50)
    wake = await sleeper.next_where(lambda f: f.get("kind") == "chat")
    assert wake["payload"]["buffered"] == 0
    await sleeper.silent(_is_fire)
