"""Acknowledged means durable; a resend is answered, not delivered twice; frames of one
connection take effect in order; resume across another history is reset, not skipped.

The crash cases run a real ``hubbub serve`` process and ``kill -9`` it (see also
``benchmarks/crash.py``, whose short run is ``test_crash_harness.py``).
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import websockets
from benchmarks.crash import Gateway

from hubbub.sdk import Client
from hubbub.server.config import Limits
from tests.conftest import RunningGateway, WsClient, start_gateway, stop_gateway
from tests.ports import reserve_port
from tests.timing import until


def _chat(text: str, **extra: Any) -> dict[str, Any]:
    return {"kind": "chat", "channel": "#general", "payload": {"text": text}, **extra}


async def _serve(tmp_path: Path) -> Gateway:
    config = tmp_path / "space.yaml"
    config.write_text("space: default\nopen: true\n")
    gw = Gateway(tmp_path, reserve_port(), config)
    await gw.start()
    return gw


async def _history(http: str, channel: str = "general") -> list[dict[str, Any]]:
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"{http}/channels/{channel}/messages?after_seq=0&limit=1000") as resp,
    ):
        body = await resp.json()
    messages: list[dict[str, Any]] = body["messages"]
    return messages


async def _raw_mew(url: str, pid: str, **extra: Any) -> WsClient:
    ws = await websockets.connect(url, max_size=None)
    client = WsClient(ws)
    await client.send({"type": "join", "participantId": pid, **extra})
    client.welcome = await client.expect("system/welcome")
    await client.expect("channel/joined")
    return client


# ------------------------------------------------------------------ kill -9 after the ack


@pytest.mark.slow  # a `hubbub serve` process, killed
async def test_kill_right_after_acks_loses_nothing_and_reuses_no_seq(tmp_path: Path) -> None:
    gw = await _serve(tmp_path)
    try:
        alice = await _raw_mew(gw.ws, "alice")
        seqs = []
        for i in range(8):
            await alice.send(_chat(f"ws-{i}"))
            echo = await alice.next_where(lambda f: f.get("kind") == "chat")
            seqs.append(echo["seq"])
        async with aiohttp.ClientSession() as http:
            for i in range(8):
                async with http.post(
                    f"{gw.http}/participants/cron/messages", json=_chat(f"http-{i}")
                ) as resp:
                    assert resp.status == 202
                    seqs.append((await resp.json())["seq"])
        await alice.send(_chat("later @@cb:30s@@wake me"))
        await alice.next_where(lambda f: f.get("payload", {}).get("text") == "later")
        gw.kill()  # right after the last acknowledgement
        await alice.close()

        await gw.start()
        texts = [m["payload"]["text"] for m in await _history(gw.http)]
        assert texts == [f"ws-{i}" for i in range(8)] + [f"http-{i}" for i in range(8)] + ["later"]
        # the callback whose scheduling was echoed is stored
        db = sqlite3.connect(tmp_path / "hubbub.db")
        assert db.execute("SELECT count(*) FROM callbacks").fetchone()[0] == 1
        db.close()
        # numbering goes on after the last seq anyone was shown: none is handed out twice
        bob = await _raw_mew(gw.ws, "bob")
        await bob.send(_chat("after the crash"))
        echo = await bob.next_where(lambda f: f.get("kind") == "chat")
        assert echo["seq"] == max(seqs) + 2  # + the callback's message
        await bob.close()
    finally:
        gw.stop()


@pytest.mark.slow  # a `hubbub serve` process, killed
async def test_dms_held_for_a_sleeper_survive_a_kill(tmp_path: Path) -> None:
    gw = await _serve(tmp_path)
    try:
        sleeper = await _raw_mew(gw.ws, "sleeper")
        alice = await _raw_mew(gw.ws, "alice")
        await sleeper.send(_chat("@@sleep:60s@@"))
        await alice.next_where(
            lambda f: (
                f.get("kind") == "system/presence"
                and f["payload"].get("participant", {}).get("presence") == "sleeping"
            )
        )
        for i in range(3):
            await alice.send(
                {"kind": "chat", "to": ["sleeper"], "private": True, "payload": {"text": f"d{i}"}}
            )
            await alice.next_where(lambda f: f.get("kind") == "chat")  # its echo: stored
        gw.kill()
        await sleeper.close()
        await alice.close()

        await gw.start()
        back = await _raw_mew(gw.ws, "sleeper")  # a new process: no resume
        got = [
            (await back.next_where(lambda f: f.get("kind") == "chat"))["payload"]["text"]
            for _ in range(3)
        ]
        assert got == ["d0", "d1", "d2"]
        await back.silent(lambda f: f.get("kind") == "chat")  # each once
        await back.close()
    finally:
        gw.stop()


async def test_durability_power_sets_full_sync(tmp_path: Path) -> None:
    from hubbub.store.sqlite import SqliteStore

    store = SqliteStore(tmp_path / "h.db", durability="power")
    await store.open()
    assert store._db is not None
    assert store._db.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    await store.close()


# ------------------------------------------------------------------ idempotent resend


async def test_resend_of_the_same_id_is_answered_with_the_original(gateway: RunningGateway) -> None:
    alice = await gateway.mew("alice", resume={})  # opts in to resends, as the SDK does
    bob = await gateway.mew("bob")
    await alice.send(_chat("once", id="msg-1"))
    first = await alice.next_where(lambda f: f.get("kind") == "chat")
    assert first["id"] == "msg-1" and first["protocol"] == "mew/v0.4"
    await bob.next_where(lambda f: f.get("kind") == "chat")
    await alice.send(_chat("once", id="msg-1"))  # did it land? send it again
    again = await alice.next_where(lambda f: f.get("kind") == "chat")
    assert (again["id"], again["seq"]) == ("msg-1", first["seq"])
    await bob.silent(lambda f: f.get("kind") == "chat")
    assert [m["id"] for m in await _history(gateway.http)] == ["msg-1"]

    await bob.send(_chat("mine", id="msg-1"))  # another sender's id is its own message
    mine = await alice.next_where(lambda f: f.get("kind") == "chat")
    assert (mine["id"], mine["from"], mine["payload"]["text"]) == ("msg-1", "bob", "mine")
    assert mine["seq"] == first["seq"] + 1
    await alice.send(_chat("changed", id="msg-1"))  # the same id, another message: new
    changed = await bob.next_where(lambda f: f.get("kind") == "chat" and f["from"] == "alice")
    assert (changed["id"], changed["seq"]) == ("msg-1", first["seq"] + 2)


async def test_http_idempotency_key_and_restart(tmp_path: Path) -> None:
    gw = await start_gateway(tmp_path)
    headers = {"Idempotency-Key": "nightly-42"}
    path = "/participants/cron/messages"
    url = gw.http + path
    try:
        async with aiohttp.ClientSession() as http:
            async with http.post(url, json=_chat("build green"), headers=headers) as resp:
                first = await resp.json()
            async with http.post(url, json=_chat("build green"), headers=headers) as resp:
                assert resp.status == 202
                assert await resp.json() == first
    finally:
        await stop_gateway(gw)
    gw = await start_gateway(tmp_path)  # the ids are kept across a restart
    url = gw.http + path
    try:
        async with (
            aiohttp.ClientSession() as http,
            http.post(url, json=_chat("build green"), headers=headers) as resp,
        ):
            assert (await resp.json())["seq"] == first["seq"]
        assert len(await _history(gw.http)) == 1
    finally:
        await stop_gateway(gw)


async def test_bad_client_ids_are_refused(gateway: RunningGateway) -> None:
    alice = await gateway.mew("alice")
    await alice.send(_chat("x", id="x" * 200))
    err = await alice.expect("system/error")
    assert err["payload"]["error"] == "invalid_id" and "printable" in err["payload"]["message"]


async def test_string_correlation_id_becomes_a_list(gateway: RunningGateway) -> None:
    alice = await gateway.mew("alice")
    await alice.send(_chat("re", correlation_id="abc"))
    echo = await alice.next_where(lambda f: f.get("kind") == "chat")
    assert echo["correlation_id"] == ["abc"]


@pytest.mark.slow  # a `hubbub serve` process, killed
async def test_sdk_client_resends_what_a_dropped_connection_lost(tmp_path: Path) -> None:
    gw = await _serve(tmp_path)
    try:
        async with Client(gateway=gw.ws, participant_id="writer", connect_timeout=30) as c:
            echoes = [asyncio.create_task(c.send(_chat(f"n{i}"), ack=True)) for i in range(30)]
            await asyncio.sleep(0.01)
            gw.kill()  # some are stored, some are not: the client does not know which
            await gw.start()
            done = await asyncio.gather(*echoes)
            assert all(e.seq for e in done)
        texts = [m["payload"]["text"] for m in await _history(gw.http)]
        assert sorted(texts, key=lambda t: int(t[1:])) == [f"n{i}" for i in range(30)]
    finally:
        gw.stop()


# ------------------------------------------------------------------ one connection's order


@pytest.mark.slow  # load: 2,000 joins and messages from two dialects
async def test_join_then_message_back_to_back_is_never_refused(tmp_path: Path) -> None:
    gw = await start_gateway(tmp_path, limits=Limits(rate_per_s=0))
    try:
        watcher = await gw.mew("watcher", channels=["#general"])
        await watcher.send({"kind": "channel/create", "payload": {"channel": "#room"}})
        await watcher.expect("channel/joined")
        mew = await gw.mew("m")
        ac = await gw.agentchat("a")
        n = 1000
        frames: list[str] = []
        for i in range(n):
            frames.append(json.dumps({"kind": "channel/join", "payload": {"channel": "#room"}}))
            frames.append(json.dumps(_chat(f"m{i}", channel="#room")))
            frames.append(json.dumps({"kind": "channel/leave", "payload": {"channel": "#room"}}))
        ac_frames: list[str] = []
        for i in range(n):
            ac_frames.append(json.dumps({"type": "JOIN", "channel": "#room"}))
            ac_frames.append(json.dumps({"type": "MSG", "to": "#room", "content": f"a{i}"}))
            ac_frames.append(json.dumps({"type": "LEAVE", "channel": "#room"}))
        errors: list[dict[str, Any]] = []

        async def drain(client: WsClient) -> None:  # the senders read what comes back
            while True:
                frame = await client.recv(30)
                if frame.get("kind") == "system/error" or frame.get("type") == "ERROR":
                    errors.append(frame)

        drains = [asyncio.create_task(drain(c)) for c in (mew, ac)]
        for f, g in zip(frames, ac_frames, strict=True):  # back to back, never waiting
            await mew.ws.send(f)
            await ac.ws.send(g)
        got: set[str] = set()
        while len(got) < 2 * n:
            frame = await watcher.next_where(lambda f: f.get("kind") == "chat", 20)
            got.add(frame["payload"]["text"])
        for task in drains:
            task.cancel()
        assert errors == []
    finally:
        await stop_gateway(gw)


async def test_create_then_message_back_to_back(gateway: RunningGateway) -> None:
    alice = await gateway.mew("alice")
    await alice.send({"kind": "channel/create", "payload": {"channel": "#fresh"}})
    await alice.send(_chat("first words", channel="#fresh"))
    joined = await alice.next_where(lambda f: f["kind"] in ("channel/joined", "system/error"))
    assert joined["kind"] == "channel/joined" and joined["payload"]["channel"] == "#fresh"
    # stored before the join's history was read: it arrives in that history, once
    assert [m["payload"]["text"] for m in joined["payload"]["history"]] == ["first words"]
    await alice.silent(lambda f: f.get("kind") in ("chat", "system/error"))


async def test_agentchat_not_in_channel_names_join(gateway: RunningGateway) -> None:
    ac = await gateway.agentchat("a", join=False)
    await ac.send({"type": "MSG", "to": "#general", "content": "hi"})
    err = await ac.expect_type("ERROR")
    assert err["code"] == "NOT_IN_CHANNEL"


# ------------------------------------------------------------------ history epoch


async def test_welcome_has_epoch_and_a_foreign_resume_is_reset(gateway: RunningGateway) -> None:
    alice = await gateway.mew("alice")
    epoch = alice.welcome["payload"]["epoch"]
    assert isinstance(epoch, str) and len(epoch) >= 16
    for i in range(3):
        await alice.send(_chat(f"m{i}"))
        await alice.next_where(lambda f: f.get("kind") == "chat")

    late = await gateway.connect()
    await late.send(
        {"type": "join", "participantId": "late", "resume": {"#general": 2}, "epoch": "other"}
    )
    joined = await late.expect("channel/joined")
    assert joined["payload"]["history_reset"] == {"reason": "epoch", "epoch": epoch}
    assert [m["payload"]["text"] for m in joined["payload"]["history"]] == ["m0", "m1", "m2"]

    ahead = await gateway.connect()
    await ahead.send({"type": "join", "participantId": "ahead", "resume": {"#general": 99}})
    joined = await ahead.expect("channel/joined")
    assert joined["payload"]["history_reset"]["reason"] == "past_end"
    assert len(joined["payload"]["history"]) == 3

    same = await gateway.connect()
    await same.send(
        {"type": "join", "participantId": "same", "resume": {"#general": 2}, "epoch": epoch}
    )
    joined = await same.expect("channel/joined")
    assert "history_reset" not in joined["payload"]
    assert [m["payload"]["text"] for m in joined["payload"]["history"]] == ["m2"]


async def test_sdk_reloads_a_reset_history(tmp_path: Path) -> None:
    gw = await start_gateway(tmp_path)
    try:
        async with Client(gateway=gw.url, participant_id="w") as writer:
            for i in range(3):
                await writer.send(_chat(f"m{i}"), ack=True)
        reader = Client(gateway=gw.url, participant_id="r")
        reader.last_seq["#general"] = 500  # a resume point from another history
        reader.epoch = "another-history"
        got: list[str] = []
        resets: list[Any] = []
        reader.on("chat", lambda env: got.append(env.payload["text"]))
        reader.on("history_reset", resets.append)
        async with reader, Client(gateway=gw.url, participant_id="w") as writer:
            await until(lambda: len(got) >= 3)
            await writer.send(_chat("last"), ack=True)  # a repeat would come before it
            await until(lambda: "last" in got)
        assert got == ["m0", "m1", "m2", "last"] and len(resets) == 1
        assert reader.last_seq["#general"] == 4
    finally:
        await stop_gateway(gw)


# ------------------------------------------------------------------ MEW transparency


async def test_to_without_channel_is_seen_by_the_channel(gateway: RunningGateway) -> None:
    alice = await gateway.mew("alice")
    bob = await gateway.mew("bob")
    carol = await gateway.mew("carol")
    await alice.send({"kind": "chat", "to": ["bob"], "payload": {"text": "for bob, seen by all"}})
    for c in (bob, carol):
        got = await c.next_where(lambda f: f.get("kind") == "chat")
        assert got["to"] == ["bob"] and got["channel"] == "#general"
    await alice.send(
        {"kind": "chat", "to": ["bob"], "private": True, "payload": {"text": "just bob"}}
    )
    got = await bob.next_where(lambda f: f.get("kind") == "chat")
    assert got["private"] is True and "channel" not in got
    await carol.silent(lambda f: f.get("kind") == "chat")


async def test_every_mew_envelope_carries_protocol(gateway: RunningGateway) -> None:
    m = await gateway.mew("m")
    assert m.welcome["protocol"] == "mew/v0.4"
    ac = await gateway.agentchat("a")
    await ac.send({"type": "MSG", "to": "#general", "content": "from agentchat"})
    await ac.send({"type": "MSG", "to": "@m", "content": "a dm"})
    async with aiohttp.ClientSession() as http:
        await http.post(f"{gateway.http}/participants/cron/messages", json=_chat("over http"))
    await m.send({"kind": "system/nonsense"})  # any other kind a capability allows is routed
    seen = [await m.next_where(lambda f: f.get("kind") != "system/presence") for _ in range(4)]
    assert {f["kind"] for f in seen} == {"chat", "system/error"}
    assert all(f["protocol"] == "mew/v0.4" for f in seen)
