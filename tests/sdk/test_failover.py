"""A Client given several gateway URLs, against real gateways on real sockets: it connects to
one that answers, fails over when its gateway goes, and resume plus the outbox make the
switch lossless (the second gateway runs on the same SQLite file, as a gateway restarted at
another URL would)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from hubbub.errors import AuthRefused, ConnectionFailed
from hubbub.protocol.envelope import Envelope
from hubbub.sdk import Client, Failover, Reconnecting
from hubbub.server.config import Limits, ParticipantConfig, SpaceConfig, hash_token
from tests.conftest import RunningGateway, start_gateway, stop_gateway
from tests.ports import reserve_port
from tests.sdk.conftest import FAST
from tests.timing import until

OPEN = Limits(rate_per_s=0)


def dead_url() -> str:
    """A URL where nothing listens."""
    return f"ws://127.0.0.1:{reserve_port()}/ws"


def team(token: str) -> list[SpaceConfig]:
    """A space ``team`` where ``bot`` must present ``token``."""
    cfg = SpaceConfig(
        space="team", participants={"bot": ParticipantConfig(token_hash=hash_token(token))}
    )
    cfg.validate()
    return [cfg]


async def test_a_dead_url_first_then_the_live_one(gw: RunningGateway) -> None:
    dead = dead_url()
    c = Client(gateway=[dead, gw.url], participant_id="alice", **FAST)
    opened: list[str] = []
    failovers: list[Failover] = []
    reconnects: list[Reconnecting] = []
    c.on("connected", opened.append)
    c.on("failover", failovers.append)
    c.on("reconnecting", reconnects.append)
    assert c.gateway_url is None
    async with c:
        assert c.is_ready and c.gateway_url == gw.url
        assert opened == [gw.url]
    assert failovers == [] and reconnects == []  # the first connect is no switch, no backoff


async def test_every_url_dead_names_each_one() -> None:
    first, second = dead_url(), dead_url()
    c = Client(gateway=f"{first},{second}", participant_id="alice", **FAST)
    with pytest.raises(ConnectionFailed) as info:
        await c.connect()
    message = str(info.value)
    assert message.startswith("could not connect to any of the 2 gateways")
    assert (
        f"could not connect to {first}" in message and f"could not connect to {second}" in message
    )
    assert c.gateway_url is None


async def test_a_drop_moves_to_the_next_url_at_once(tmp_path: Path) -> None:
    a = await start_gateway(tmp_path / "a", limits=OPEN)
    b = await start_gateway(tmp_path / "b", limits=OPEN)
    c = Client(gateway=[a.url, b.url], participant_id="alice", **FAST)
    failovers: list[Failover] = []
    reconnects: list[Reconnecting] = []
    c.on("failover", failovers.append)
    c.on("reconnecting", reconnects.append)
    try:
        await c.connect()
        assert c.gateway_url == a.url
        for expected in (b.url, a.url):  # and round again, in list order
            ws = c._ws
            assert ws is not None and ws.transport is not None
            ws.transport.abort()
            await until(lambda expected=expected: c.is_ready and c.gateway_url == expected)
        assert failovers == [Failover(a.url, b.url), Failover(b.url, a.url)]
        assert reconnects == []  # another URL is tried at once, without backoff
    finally:
        await c.disconnect()
        await stop_gateway(a)
        await stop_gateway(b)


async def test_switching_gateways_loses_and_repeats_nothing(tmp_path: Path) -> None:
    """Gateway A dies; B starts on A's SQLite file at another URL. Messages sent on A,
    across the switch and on B reach the receiver once each, in order; a message A stored
    but never acknowledged to its sender is resent to B and delivered once."""
    a = await start_gateway(tmp_path, limits=OPEN)
    b_port = reserve_port()
    b_url = f"ws://127.0.0.1:{b_port}/ws"
    urls = [a.url, b_url]
    receiver = Client(gateway=urls, participant_id="receiver", **FAST)
    sender = Client(gateway=",".join(urls), participant_id="sender", **FAST)
    got: list[str] = []
    seqs: dict[str, int | None] = {}
    dms: list[str] = []
    failovers: dict[str, list[Failover]] = {"receiver": [], "sender": []}
    resets: list[Envelope] = []

    @receiver.on("chat")
    def on_chat(env: Envelope) -> None:
        if env.from_ == "sender":
            (dms if env.private else got).append(env.payload["text"])
            seqs[env.payload["text"]] = env.seq

    receiver.on("failover", failovers["receiver"].append)
    sender.on("failover", failovers["sender"].append)
    receiver.on("history_reset", resets.append)
    b: RunningGateway | None = None

    async def say(text: str, **extra: Any) -> Envelope:
        return await sender.send({"kind": "chat", "payload": {"text": text}, **extra}, ack=True)

    try:
        await receiver.connect()
        await sender.connect()
        for i in range(10):
            await say(str(i))
        await say("dm-before", to=["receiver"])
        await until(lambda: len(got) == 10 and dms == ["dm-before"])

        # A stores message 10 and delivers it, but its echo never reaches the sender
        ws = sender._ws
        assert ws is not None and ws.transport is not None
        ws.transport.pause_reading()
        unacknowledged = asyncio.ensure_future(say("10"))
        await until(lambda: len(got) == 11)
        assert not unacknowledged.done() and len(sender.outbox) == 1

        await stop_gateway(a)  # A goes; nothing listens at B's URL yet
        ws.transport.abort()  # the unread echo is lost with the sender's socket
        more = asyncio.ensure_future(_send_in_turn(say, range(11, 30)))
        b = await start_gateway(tmp_path, limits=OPEN, port=b_port)  # same SQLite file
        await say("dm-during", to=["receiver"])
        await more
        echo = await unacknowledged
        assert echo.seq == seqs["10"] and sender.outbox.resent >= 1  # the original answer
        for i in range(30, 40):
            await say(str(i))
        await until(lambda: len(got) >= 40 and len(dms) >= 2)
        # a last DM: a repeat of anything earlier would have come before it on this connection
        await say("dm-last", to=["receiver"])
        await until(lambda: "dm-last" in dms)

        assert got == [str(i) for i in range(40)]  # once each, in order
        assert dms == ["dm-before", "dm-during", "dm-last"]
        assert receiver.gateway_url == sender.gateway_url == b_url
        assert failovers == {
            "receiver": [Failover(a.url, b_url)],
            "sender": [Failover(a.url, b_url)],
        }
        assert resets == []  # the same history (epoch): resumed, not reloaded
        history = await _history(receiver)
        assert history == [str(i) for i in range(40)]  # stored once each
    finally:
        await receiver.disconnect()
        await sender.disconnect()
        if b is not None:
            await stop_gateway(b)


async def _send_in_turn(say: Any, numbers: range) -> None:
    """Send one message after another, each acknowledged before the next."""
    for i in numbers:
        await say(str(i))


async def _history(client: Client) -> list[str]:
    """The texts of every chat message of #general, from the client's gateway."""
    answer = client.expect("history/response")
    request = {"channel": "#general", "after_seq": 0, "limit": 1000}
    await client.send({"kind": "history/request", "payload": request})
    env = await asyncio.wait_for(answer, 5)
    return [m["payload"]["text"] for m in env.payload["messages"] if m["kind"] == "chat"]


async def test_a_refusal_moves_on_to_the_next_url(tmp_path: Path) -> None:
    refusing = await start_gateway(tmp_path / "a", spaces=team("other"))
    accepting = await start_gateway(tmp_path / "b", spaces=team("right"))
    try:
        c = Client(
            gateway=[refusing.url, accepting.url],
            participant_id="bot",
            space="team",
            token="right",
            **FAST,
        )
        async with c:
            assert c.gateway_url == accepting.url
    finally:
        await stop_gateway(refusing)
        await stop_gateway(accepting)


async def test_a_refusal_from_every_url_ends_the_connect(tmp_path: Path) -> None:
    a = await start_gateway(tmp_path / "a", spaces=team("right"))
    b = await start_gateway(tmp_path / "b", spaces=team("right"))
    try:
        c = Client(
            gateway=[a.url, b.url], participant_id="bot", space="team", token="wrong", **FAST
        )
        opened: list[str] = []
        reconnects: list[Reconnecting] = []
        c.on("connected", opened.append)
        c.on("reconnecting", reconnects.append)
        with pytest.raises(AuthRefused, match="unknown token"):
            await c.connect()
        await asyncio.sleep(0.1)
        assert opened == [a.url, b.url] and reconnects == []  # each asked once, no retry
    finally:
        await stop_gateway(a)
        await stop_gateway(b)


async def test_refused_by_every_url_after_a_drop_ends_as_with_one(tmp_path: Path) -> None:
    a = await start_gateway(tmp_path / "a", spaces=team("right"))
    b = await start_gateway(tmp_path / "b", spaces=team("other"))
    c = Client(gateway=[a.url, b.url], participant_id="bot", space="team", token="right", **FAST)
    errors: list[BaseException] = []
    c.on("error", errors.append)
    try:
        await c.connect()
        assert c.gateway_url == a.url
        port = a.port
        await stop_gateway(a)
        a = await start_gateway(tmp_path / "a2", spaces=team("other"), port=port)  # now refuses
        async with asyncio.timeout(5):
            await c.wait_closed()
        assert isinstance(c.failure, AuthRefused) and c.failure.code == "auth_failed"
        assert errors and errors[-1] is c.failure
    finally:
        await c.disconnect()
        await stop_gateway(a)
        await stop_gateway(b)
