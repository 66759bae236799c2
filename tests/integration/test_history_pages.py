"""History answers are paged by bytes: a resume of a channel of large messages never builds one
giant frame (issue 21 item 4); the SDK pages the rest and gets every message once."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aiohttp

from hubbub.protocol.envelope import Envelope
from hubbub.sdk import Client, State
from hubbub.server.config import Limits
from tests.conftest import RunningGateway, start_gateway, stop_gateway
from tests.sdk.conftest import FAST
from tests.timing import until

PAGE = 16 * 1024
BIG = "x" * 3000
"""Each message's text: about 3.1 KB stored, so a page holds five."""
LIMITS = Limits(rate_per_s=0, history_page_bytes=PAGE, history_on_join=50)


def _size(messages: list[Any]) -> int:
    return sum(len(json.dumps(m, separators=(",", ":"))) for m in messages)


async def _fill(gw: RunningGateway, n: int) -> None:
    alice = await gw.mew("alice")
    for i in range(n):
        await alice.send({"kind": "chat", "channel": "#general", "payload": {"text": f"{i} {BIG}"}})
    for _ in range(n):
        await alice.expect("chat")
    await alice.close()


async def test_a_resume_and_history_pages_are_bounded_by_bytes(tmp_path: Path) -> None:
    gw = await start_gateway(tmp_path, limits=LIMITS)
    await _fill(gw, 40)
    await stop_gateway(gw)
    gw = await start_gateway(tmp_path, limits=LIMITS)  # an empty cache: pages from SQLite
    try:
        bob = await gw.connect()
        await bob.send({"type": "join", "participantId": "bob", "resume": {"#general": 0}})
        joined = (await bob.expect("channel/joined"))["payload"]
        history = joined["history"]
        assert 1 <= len(history) < 40 and _size(history) <= PAGE
        assert joined["has_more"] is True
        assert [m["seq"] for m in history] == list(range(1, len(history) + 1))

        seqs = [m["seq"] for m in history]
        while True:  # page the rest forward as the SDK does
            await bob.send(
                {
                    "kind": "history/request",
                    "payload": {"channel": "#general", "after_seq": seqs[-1], "limit": 1000},
                }
            )
            page = (await bob.expect("history/response"))["payload"]
            assert page["messages"] and _size(page["messages"]) <= PAGE
            seqs += [m["seq"] for m in page["messages"]]
            if not page["has_more"]:
                break
        assert seqs == list(range(1, 41))

        # backward paging (no after_seq) is bounded the same way, newest first kept
        await bob.send(
            {"kind": "history/request", "payload": {"channel": "#general", "limit": 1000}}
        )
        page = (await bob.expect("history/response"))["payload"]
        assert page["has_more"] is True and _size(page["messages"]) <= PAGE
        assert page["messages"][-1]["seq"] == 40

        async with (
            aiohttp.ClientSession() as http,
            http.get(f"{gw.http}/channels/general/messages?after_seq=0&limit=1000") as resp,
        ):
            body = await resp.json()
        assert body["has_more"] is True and _size(body["messages"]) <= PAGE
        assert body["next_after_seq"] == body["messages"][-1]["seq"] < 40
    finally:
        await stop_gateway(gw)


async def test_a_fresh_join_on_either_dialect_gets_the_newest_that_fit(tmp_path: Path) -> None:
    gw = await start_gateway(tmp_path, limits=LIMITS)
    try:
        await _fill(gw, 40)
        bob = await gw.mew("bob")  # joined arrived in mew(); ask again on a new connection
        await bob.close()
        carol = await gw.connect()
        await carol.send({"type": "join", "participantId": "carol"})
        history = (await carol.expect("channel/joined"))["payload"]["history"]
        assert 1 <= len(history) < 40 and _size(history) <= PAGE
        assert history[-1]["seq"] == 40

        dave = await gw.connect()
        await dave.send({"type": "IDENTIFY", "name": "dave"})
        dave.welcome = await dave.expect_type("WELCOME")  # joined #general silently
        await dave.send({"type": "JOIN", "channel": "#general"})  # the history comes now
        await dave.expect_type("JOINED")
        replayed = [await dave.expect_type("MSG") for _ in range(len(history))]
        assert all(m.get("replay") for m in replayed)
        await dave.silent(lambda f: f.get("type") == "MSG")  # no more than one page
        assert _size(replayed) <= PAGE + 2048
    finally:
        await stop_gateway(gw)


async def test_the_sdk_pages_a_resume_of_large_messages_exactly_once(tmp_path: Path) -> None:
    gw = await start_gateway(tmp_path, limits=LIMITS)
    receiver = Client(
        gateway=gw.url,
        participant_id="receiver",
        **{**FAST, "reconnect_delay": 0.3, "max_reconnect_delay": 0.3},
    )
    sender = Client(gateway=gw.url, participant_id="sender", **FAST)
    try:
        await receiver.connect()
        await sender.connect()
        got: list[int] = []
        receiver.on("chat", lambda env: got.append(int(env.payload["text"].split()[0])))
        answers: list[Envelope] = []
        receiver.on("channel/joined", answers.append)
        await sender.send({"kind": "chat", "payload": {"text": f"0 {BIG}"}})
        await until(lambda: got == [0])
        ws = receiver._ws
        assert ws is not None and ws.transport is not None
        ws.transport.abort()
        await until(lambda: receiver.state is not State.READY)
        for i in range(1, 40):
            await sender.send({"kind": "chat", "payload": {"text": f"{i} {BIG}"}})
        await until(lambda: receiver.is_ready)
        await sender.send({"kind": "chat", "payload": {"text": "40"}})  # a live one, held
        await until(lambda: 40 in got)
        assert got == list(range(41))
        resumed = answers[0].payload  # one page of the 39 missed; the client paged the rest
        assert resumed["has_more"] is True and len(resumed["history"]) < 39
        assert _size(resumed["history"]) <= PAGE
    finally:
        await receiver.disconnect()
        await sender.disconnect()
        await stop_gateway(gw)
