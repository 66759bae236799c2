"""History and resume: joined carries recent history, pages work, nothing is missed."""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp
import pytest

from hubbub.server.config import Limits
from tests.conftest import RunningGateway, start_gateway, stop_gateway


async def _say(c: object, text: str, channel: str = "#general") -> None:
    await c.send({"kind": "chat", "channel": channel, "payload": {"text": text}})  # type: ignore[attr-defined]


async def test_joined_carries_last_n_messages(tmp_path: Path) -> None:
    gw = await start_gateway(tmp_path, limits=Limits(history_on_join=5, rate_per_s=0))
    try:
        alice = await gw.mew("alice")
        for i in range(12):
            await _say(alice, f"m{i}")
        for _ in range(12):
            await alice.expect("chat")
        bob = await gw.connect()
        await bob.send({"type": "join", "participantId": "bob"})
        joined = await bob.expect("channel/joined")
        texts = [m["payload"]["text"] for m in joined["payload"]["history"]]
        assert texts == ["m7", "m8", "m9", "m10", "m11"]
        assert [m["seq"] for m in joined["payload"]["history"]] == [8, 9, 10, 11, 12]
        assert "alice" in joined["payload"]["members"] and "bob" in joined["payload"]["members"]
    finally:
        await stop_gateway(gw)


async def test_history_request_pages_backwards_and_forwards(gateway: RunningGateway) -> None:
    alice = await gateway.mew("alice")
    for i in range(30):
        await _say(alice, f"m{i}")
        await alice.expect("chat")
    await alice.send({"kind": "history/request", "payload": {"channel": "#general", "limit": 10}})
    page = await alice.expect("history/response")
    assert [m["seq"] for m in page["payload"]["messages"]] == list(range(21, 31))
    assert page["payload"]["has_more"] is True
    await alice.send(
        {
            "kind": "history/request",
            "payload": {"channel": "#general", "before_seq": 21, "limit": 10},
        }
    )
    page = await alice.expect("history/response")
    assert [m["seq"] for m in page["payload"]["messages"]] == list(range(11, 21))
    await alice.send(
        {
            "kind": "history/request",
            "payload": {"channel": "#general", "after_seq": 25, "limit": 10},
        }
    )
    page = await alice.expect("history/response")
    assert [m["seq"] for m in page["payload"]["messages"]] == list(range(26, 31))
    assert page["payload"]["has_more"] is False


async def test_resume_delivers_exactly_what_was_missed(gateway: RunningGateway) -> None:
    alice = await gateway.mew("alice")
    bob = await gateway.mew("bob")
    for i in range(5):
        await _say(alice, f"before{i}")
    seen = [(await bob.expect("chat"))["seq"] for _ in range(5)]
    await bob.close()
    for i in range(7):
        await _say(alice, f"missed{i}")
    for _ in range(12):
        await alice.expect("chat")
    bob2 = await gateway.connect()
    await bob2.send({"type": "join", "participantId": "bob", "resume": {"#general": seen[-1]}})
    joined = await bob2.expect("channel/joined")
    texts = [m["payload"]["text"] for m in joined["payload"]["history"]]
    assert texts == [f"missed{i}" for i in range(7)]
    await _say(alice, "live")
    live = await bob2.expect("chat")
    assert live["payload"]["text"] == "live" and live["seq"] == 13


@pytest.mark.slow  # load: a writer against a dropping reader
async def test_resume_under_load_misses_nothing_and_duplicates_nothing(
    tmp_path: Path,
) -> None:
    """A writer keeps sending while a reader drops and resumes; the reader sees 1..N once."""
    gw = await start_gateway(tmp_path, limits=Limits(rate_per_s=0, history_on_join=0))
    try:
        alice = await gw.mew("alice")
        total = 400
        got: list[int] = []

        async def writer() -> None:
            for i in range(total):
                await _say(alice, str(i))
                if i % 20 == 0:
                    await asyncio.sleep(0.005)

        task = asyncio.create_task(writer())
        last = 0
        for _round in range(4):
            reader = await gw.connect()
            resume = {"#general": last}
            await reader.send({"type": "join", "participantId": "reader", "resume": resume})
            joined = await reader.expect("channel/joined")
            got.extend(m["seq"] for m in joined["payload"]["history"])
            for _ in range(40):
                try:
                    got.append((await reader.expect("chat", timeout=0.5))["seq"])
                except TimeoutError:
                    break  # the writer may already be done: the final resume covers the rest
            last = got[-1] if got else last
            await reader.close()
        await task
        reader = await gw.connect()
        await reader.send({"type": "join", "participantId": "reader", "resume": {"#general": last}})
        joined = await reader.expect("channel/joined")
        got.extend(m["seq"] for m in joined["payload"]["history"])
        while len(got) < total:  # sent but not yet stored at the join: they come live
            got.append((await reader.expect("chat"))["seq"])
        assert got == list(range(1, total + 1))
    finally:
        await stop_gateway(gw)


async def test_history_survives_restart(tmp_path: Path) -> None:
    gw = await start_gateway(tmp_path)
    alice = await gw.mew("alice")
    await _say(alice, "remember me")
    await alice.expect("chat")
    await alice.send(
        {"kind": "chat", "to": ["alice"], "private": True, "payload": {"text": "note to self"}}
    )
    await alice.expect("chat")
    await stop_gateway(gw)

    gw2 = await start_gateway(tmp_path)
    try:
        bob = await gw2.connect()
        await bob.send({"type": "join", "participantId": "bob"})
        joined = await bob.expect("channel/joined")
        assert [m["payload"]["text"] for m in joined["payload"]["history"]] == ["remember me"]
        alice2 = await gw2.mew("alice", resume={"@dm": 0})
        dm = await alice2.expect("chat")
        assert dm["payload"]["text"] == "note to self"
        await _say(alice2, "after restart")
        msg = await bob.expect("chat")
        assert msg["seq"] == 2, "numbering continues after a restart"
        async with (
            aiohttp.ClientSession() as http,
            http.get(f"{gw2.http}/channels/general/messages?after_seq=0") as resp,
        ):
            body = await resp.json()
        assert [m["payload"]["text"] for m in body["messages"]] == ["remember me", "after restart"]
    finally:
        await stop_gateway(gw2)


async def test_history_beyond_the_cache_comes_from_sqlite(tmp_path: Path) -> None:
    gw = await start_gateway(tmp_path, limits=Limits(rate_per_s=0))
    try:
        alice = await gw.mew("alice")
        n = 700  # more than the in-memory cache of 512
        for i in range(n):
            await _say(alice, f"m{i}")
        for _ in range(n):
            await alice.expect("chat")
        bob = await gw.connect()
        await bob.send({"type": "join", "participantId": "bob", "resume": {"#general": 10}})
        joined = await bob.expect("channel/joined")
        assert [m["seq"] for m in joined["payload"]["history"]] == list(range(11, n + 1))
    finally:
        await stop_gateway(gw)


async def test_history_request_pages_through_ones_own_dms(gateway: RunningGateway) -> None:
    """``history/request`` on ``@dm``: a participant's own DMs, paged like a channel's."""
    alice = await gateway.mew("alice")
    await gateway.mew("bob")
    carol = await gateway.mew("carol")
    for i in range(12):  # alice -> bob, then carol -> bob (alice is not a party)
        sender, to = (alice, "bob") if i < 8 else (carol, "bob")
        await sender.send(
            {"kind": "chat", "to": [to], "private": True, "payload": {"text": f"d{i}"}}
        )
        await sender.expect("chat")

    async def page(**bounds: int) -> tuple[list[str], bool]:
        payload = {"channel": "@dm", "limit": 3, **bounds}
        await alice.send({"kind": "history/request", "payload": payload})
        answer = (await alice.expect("history/response"))["payload"]
        assert answer["channel"] == "@dm"
        return [m["payload"]["text"] for m in answer["messages"]], answer["has_more"]

    assert await page() == (["d5", "d6", "d7"], True)  # the last page: carol's are not hers
    assert await page(before_seq=6) == (["d2", "d3", "d4"], True)
    assert await page(before_seq=3) == (["d0", "d1"], False)
    assert await page(after_seq=6) == (["d6", "d7"], False)
    assert await page(after_seq=1, before_seq=6) == (["d1", "d2", "d3"], True)
    assert await page(after_seq=1, before_seq=5) == (["d1", "d2", "d3"], False)
    await alice.send({"kind": "history/request", "payload": {"channel": "@dm", "limit": -1}})
    error = await alice.expect("system/error")
    assert "limit must be a non-negative integer" in error["payload"]["message"]
