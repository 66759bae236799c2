"""The resend window holds once the id index is full and keeps turning over: the newest ids
are answered with their original (also after a restart), ids past the window are new
messages, and another sender still cannot take a remembered id."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import aiohttp
import msgspec

from hubbub.server.config import Limits
from tests.conftest import RunningGateway, WsClient, start_gateway, stop_gateway

CAP = 1000
SENT = 3000


def _chat(i: int) -> dict[str, Any]:
    return {"kind": "chat", "channel": "#general", "id": f"m-{i}", "payload": {"text": f"#{i}"}}


async def _send_and_echo(client: WsClient, i: int) -> dict[str, Any]:
    await client.send(_chat(i))
    return await client.next_where(lambda f: f.get("kind") == "chat" and f["id"] == f"m-{i}")


async def _last_seq(gw: RunningGateway) -> int:
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"{gw.http}/channels/general/messages?limit=1") as resp,
    ):
        return int((await resp.json())["messages"][-1]["seq"])


def _stored_ids(data_dir: Path) -> int:
    """How many id records the gateway's SQLite file holds (a commit's are one msgpack row)."""
    with sqlite3.connect(data_dir / "hubbub.db") as db:
        return sum(
            len(msgspec.msgpack.decode(b)) for (b,) in db.execute("SELECT refs FROM ref_batches")
        )


async def test_resends_after_the_index_turned_over(tmp_path: Path) -> None:
    limits = Limits(rate_per_s=0, idempotency_ids=CAP)
    gw = await start_gateway(tmp_path, limits=limits)
    try:
        alice, bob = await gw.mew("alice", resume={}), await gw.mew("bob")
        for i in range(SENT):
            await alice.send(_chat(i))
        seqs = {}
        for _ in range(SENT):
            echo = await alice.next_where(lambda f: f.get("kind") == "chat")
            seqs[echo["id"]] = echo["seq"]
        newest = f"m-{SENT - CAP}"  # the oldest id still in the window
        again = await _send_and_echo(alice, SENT - CAP)
        assert again["seq"] == seqs[newest]
        assert await _last_seq(gw) == SENT  # answered, not stored twice

        await bob.send(_chat(SENT - 1))  # another sender's id: a message of its own
        mine = await bob.next_where(lambda f: f.get("kind") == "chat" and f["from"] == "bob")
        assert mine["seq"] == SENT + 1

        old = await _send_and_echo(alice, SENT - CAP - 2)  # past the window: a new message
        assert old["seq"] == SENT + 2 and await _last_seq(gw) == SENT + 2
        assert _stored_ids(tmp_path) <= CAP * 1.2  # pruned while running (not only at start)
    finally:
        await stop_gateway(gw)

    gw = await start_gateway(tmp_path, limits=limits)  # the window is read back from SQLite
    try:
        alice = await gw.mew("alice", resume={})
        again = await _send_and_echo(alice, SENT - 1)
        assert again["seq"] == seqs[f"m-{SENT - 1}"]
        assert await _last_seq(gw) == SENT + 2
    finally:
        await stop_gateway(gw)
