"""The desk without sockets: what ``listen`` returns (once, none skipped), nudges, yields."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hubbub.mcp.desk import Desk
from hubbub.mcp.settings import ListenSettings
from hubbub.protocol.envelope import Envelope
from tests.strength import examples


class FakeSeat:
    """Records what the desk sends; nobody online."""

    def __init__(self) -> None:
        self.sent: list[Envelope] = []
        self.n = 0

    def new_id(self) -> str:
        self.n += 1
        return f"c{self.n}"

    async def send(self, env: Envelope) -> None:
        self.sent.append(env)

    def participants(self) -> Mapping[str, Mapping[str, Any]]:
        return {"bob": {"id": "bob", "kind": "human", "presence": "online"}}

    async def close(self) -> None:
        pass


FAST = ListenSettings(settle_s=0, nudge_s=0.05, jitter=0, progress_s=0.01)


def desk(settings: ListenSettings = FAST) -> Desk:
    d = Desk(FakeSeat(), "claude", settings)
    d.receive(Envelope(kind="system/welcome", payload={"you": {"id": "claude", "kind": "agent"}}))
    d.receive(Envelope(kind="channel/joined", payload={"channel": "#general", "seq": 0}))
    return d


def chat(seq: int, text: str = "", channel: str | None = "#general", **kw: Any) -> Envelope:
    return Envelope(kind="chat", id=f"m{seq}", seq=seq, from_="bob", channel=channel,
                    payload={"text": text or f"m{seq}"}, **kw)  # fmt: skip


@settings(max_examples=examples(60), deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=20), max_size=60), st.data())
def test_every_message_once_in_order_whatever_is_resent(arrivals: list[int], data: Any) -> None:
    """Deliveries in seq order with repeats (a resend, a resume overlap) and listens at any
    point: every seq comes out once, in order."""

    fresh: list[int] = []  # what a gateway stream with these repeats holds that is new

    async def run() -> list[int]:
        d = desk()
        out: list[int] = []
        high = 0
        for seq in arrivals:
            high = max(high, seq)
            sent = seq if data.draw(st.booleans()) else high
            if not fresh or sent > fresh[-1]:
                fresh.append(sent)
            d.receive(chat(sent))
            if data.draw(st.booleans()):
                got = await d.listen(None, 0.001)
                out += [e.seq or 0 for e in got.messages]
        got = await d.listen(None, 0.001)
        return out + [e.seq or 0 for e in got.messages]

    assert asyncio.run(run()) == fresh


async def test_a_cancelled_listen_keeps_its_messages() -> None:
    d = desk(ListenSettings(settle_s=30, nudge_s=30, jitter=0))
    task = asyncio.create_task(d.listen(None, None))
    await asyncio.sleep(0)
    d.receive(chat(1))
    await asyncio.sleep(0.01)  # now in the settle window
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    d.settings = FAST
    assert [e.seq for e in (await d.listen(None, None)).messages] == [1]


async def test_nudge_progress_and_yields_once() -> None:
    d = desk()
    ticks: list[float] = []

    async def progress(elapsed: float, _msg: str) -> None:
        ticks.append(elapsed)

    got = await d.listen(None, 0.05, progress)
    assert got.nudge and got.messages == [] and ticks
    d.receive(Envelope(kind="floor/yield", channel="#general",
                       payload={"msg_id": "m1", "winner": "maths"}))  # fmt: skip
    first = await d.listen(None, 1)
    assert [(y.msg_id, y.winner) for y in first.yields] == [("m1", "maths")]
    assert (await d.listen(None, 0.01)).yields == []


async def test_own_messages_and_other_channels() -> None:
    d = desk()
    d.receive(Envelope(kind="chat", id="x", seq=1, from_="claude", channel="#general",
                       payload={"text": "mine"}))  # fmt: skip
    d.receive(chat(2, "dm", channel=None))
    d.receive(chat(1, "ops", channel="#ops"))
    only = await d.listen(["#general"], 0.01)
    assert [e.payload["text"] for e in only.messages] == ["dm"]  # DMs always, ours never
    assert [e.payload["text"] for e in (await d.listen(None, 0.01)).messages] == ["ops"]


def test_addressed_and_kind() -> None:
    d = desk()
    assert d.addresses_me(chat(1, "hey @Claude"))
    assert d.addresses_me(chat(2, "psst", channel=None))
    assert d.addresses_me(chat(3, "for you", to=["claude"]))
    assert not d.addresses_me(chat(4, "claude@example.org"))
    assert d.kind_of("bob") == "human" and d.kind_of("system:gateway") == "server"
