"""The desk without sockets: what ``listen`` returns (once, none skipped), nudges, yields."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Mapping
from typing import Any

import msgspec
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from hubbub.mcp.cursor import ListenCursor
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


def _resumed_desk(cursor: ListenCursor | None, saved: list[ListenCursor]) -> Desk:
    async def save(at: ListenCursor) -> None:
        saved.append(at)

    return Desk(FakeSeat(), "claude", FAST, resume=cursor, on_cursor=save)


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(st.sampled_from(["chat", "dm", "listen", "listen DMs", "restart"]), max_size=30))
@example(["chat", "dm", "listen DMs", "restart"])  # #general's message outlives the session
def test_sessions_resumed_from_the_saved_cursor_return_every_message_once(steps: list[str]) -> None:
    """A run of sessions, each ending at any point (its inbox lost, as when the gateway is
    killed) and the next resumed from the cursor the last ``listen`` saved, with the gateway
    replaying what came after it: every channel message and DM is returned once, in order."""

    async def run() -> tuple[list[int], list[int], list[int], list[int]]:
        log: list[Envelope] = []  # what the gateway stored
        saved: list[ListenCursor] = []
        out: list[Envelope] = []

        def connect() -> Desk:
            cursor = saved[-1] if saved else None
            d = _resumed_desk(cursor, saved)
            d.receive(Envelope(kind="system/welcome", payload={"epoch": "e1", "dm_seq": 0}))
            ch = [e for e in log if e.channel is not None]
            point = cursor.channels.get("#general", 0) if cursor else 0
            history = [msgspec.to_builtins(e) for e in ch if (e.seq or 0) > point]
            d.receive(Envelope(kind="channel/joined", channel="#general",
                               payload={"channel": "#general", "seq": len(ch),
                                        "history": history if cursor else []}))  # fmt: skip
            dm_point = cursor.dm or 0 if cursor else 0
            for e in log:
                if e.channel is None and (e.seq or 0) > dm_point:
                    d.receive(e)
            if cursor is None:
                saved.append(d.cursor())
            return d

        d = connect()
        for step in steps:
            if step in ("chat", "dm"):
                n = 1 + sum(1 for e in log if (e.channel is None) == (step == "dm"))
                e = chat(n, f"{step}{n}", "#general" if step == "chat" else None)
                log.append(e)
                d.receive(e)
            elif step == "listen":
                out += (await d.listen(None, 0.001)).messages
            elif step == "listen DMs":  # #general's messages stay in the inbox
                out += (await d.listen(["#other"], 0.001)).messages
            else:
                d = connect()
        out += (await d.listen(None, 0.001)).messages
        got_ch = [e.seq or 0 for e in out if e.channel is not None]
        got_dm = [e.seq or 0 for e in out if e.channel is None]
        all_ch = [e.seq or 0 for e in log if e.channel is not None]
        all_dm = [e.seq or 0 for e in log if e.channel is None]
        return got_ch, all_ch, got_dm, all_dm

    got_ch, all_ch, got_dm, all_dm = asyncio.run(run())
    assert got_ch == all_ch
    assert got_dm == all_dm


class PagingSeat(FakeSeat):
    """Answers ``history/request`` pages from ``log`` (and ``channel/list``), as a gateway."""

    def __init__(self, log: list[Envelope], page: int) -> None:
        super().__init__()
        self.log, self.page = log, page
        self.desk: Desk | None = None

    async def send(self, env: Envelope) -> None:
        await super().send(env)
        assert self.desk is not None
        answer: dict[str, Any] = {"channels": []}
        if env.kind == "history/request":
            after = env.payload["after_seq"]
            rows = [e for e in self.log if (e.seq or 0) > after]
            answer = {"messages": [msgspec.to_builtins(e) for e in rows[: self.page]],
                      "has_more": len(rows) > self.page}  # fmt: skip
        reply = Envelope(kind="x/answer", correlation_id=[env.id or ""], payload=answer)
        asyncio.get_running_loop().call_soon(self.desk.receive, reply)


async def test_a_resume_longer_than_a_page_is_paged_and_live_messages_wait() -> None:
    log = [chat(seq) for seq in range(1, 26)]
    seat = PagingSeat(log, page=4)
    d = Desk(seat, "claude", FAST, resume=ListenCursor("e1", {"#general": 3}, 0))
    seat.desk = d
    d.receive(Envelope(kind="system/welcome", payload={"epoch": "e1", "dm_seq": 0}))
    first = [msgspec.to_builtins(e) for e in log[3:8]]
    d.receive(Envelope(kind="channel/joined", channel="#general",
                       payload={"channel": "#general", "seq": 25, "history": first,
                                "has_more": True}))  # fmt: skip
    d.receive(chat(26))  # live, after the gap: held until the gap is filled
    d.receive(chat(27))
    await d.catch_up()
    got = await d.listen(None, 0.001)
    assert [e.seq for e in got.messages] == list(range(4, 28))
    assert d.cursor(got.messages).channels == {"#general": 27}


async def test_another_epoch_is_a_fresh_start() -> None:
    d = Desk(FakeSeat(), "claude", FAST, resume=ListenCursor("old", {"#general": 3}, 9))
    d.receive(Envelope(kind="system/welcome", payload={"epoch": "new", "dm_seq": 2}))
    d.receive(Envelope(kind="channel/joined", channel="#general",
                       payload={"channel": "#general", "seq": 5,
                                "history": [msgspec.to_builtins(chat(5))]}))  # fmt: skip
    assert d.inbox == deque()  # the join's history is context, not news
    assert d.cursor() == ListenCursor("new", {"#general": 5}, 2)


def test_cursor_records_read_back() -> None:
    c = ListenCursor("e", {"#general": 4}, 7)
    assert ListenCursor.from_json(c.to_json()) == c
    assert c.hello_fields() == {"resume": {"#general": 4, "@dm": 7},
                                "channels": ["#general"], "epoch": "e"}  # fmt: skip
    for bad in (None, [], {"channels": []}, {"channels": {}, "dm": -1}, {"epoch": 3}):
        assert ListenCursor.from_json(bad) is None
    assert ListenCursor.from_json({"channels": {"nope": 1, "#a": True, "#b": 2}}) == (
        ListenCursor(None, {"#b": 2}, None)
    )


class Clock:
    """A clock the test moves."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _clocked(clock: Clock, **kw: Any) -> Desk:
    s = ListenSettings(**{"settle_s": 0.001, "nudge_s": 30, "jitter": 0, **kw})
    d = Desk(FakeSeat(), "claude", s, clock=clock)
    d.receive(Envelope(kind="system/welcome", payload={"you": {"id": "claude", "kind": "agent"}}))
    d.receive(Envelope(kind="channel/joined", payload={"channel": "#general", "seq": 0}))
    return d


async def test_a_batch_returned_past_the_client_timeout_comes_again_flagged() -> None:
    """A listen that returns after its client most likely gave up (the settle window
    ended past ``client_timeout_s``) keeps its batch: the next listen returns it again,
    marked repeated, and the cursor stays before it until then."""
    clock = Clock()
    saved: list[ListenCursor] = []

    async def save(c: ListenCursor) -> None:
        saved.append(c)

    d = _clocked(clock, client_timeout_s=10)
    d.on_cursor = save
    d.receive(chat(1))
    asyncio.get_running_loop().call_soon(setattr, clock, "now", 11.0)  # during the settle
    late = await d.listen(None, None, request="r1")
    assert [e.seq for e in late.messages] == [1] and late.repeated == []
    assert saved == []  # not handed over: a restart offers it again too
    again = await d.listen(None, None, request="r2")
    assert [e.seq for e in again.messages] == [1] and again.repeated == ["m1"]
    assert saved[-1].channels == {"#general": 1}
    assert not d.inbox  # returned in time now: gone


async def test_a_batch_whose_request_was_cancelled_after_it_returned_comes_again() -> None:
    d = desk()
    d.receive(chat(1))
    got = await d.listen(None, None, request="7")
    assert [e.seq for e in got.messages] == [1]
    assert await d.reoffer("6") is False  # not that listen's
    assert await d.reoffer("7") is True
    again = await d.listen(None, None)
    assert [e.seq for e in again.messages] == [1] and again.repeated == ["m1"]


async def test_a_listen_asked_again_steps_aside_and_learns_the_client_timeout() -> None:
    """The client gave up on a listen and calls it again: the old one ends without taking
    anything, and from then on listen ends within 3/4 of how long the old one had run."""
    clock = Clock()
    d = _clocked(clock)
    old = asyncio.create_task(d.listen(None, None))
    await asyncio.sleep(0)
    clock.now = 8.0
    new = asyncio.create_task(d.listen(None, None))
    assert (await old).superseded
    assert d.observed_timeout_s == 8.0 and d.client_timeout_s() == 8.0
    d.receive(chat(1))
    assert [e.seq for e in (await new).messages] == [1]
    clock.now = 100.0
    waiting = asyncio.create_task(d.listen(None, None))
    await asyncio.sleep(0)
    clock.now = 100.0 + 6.0  # 3/4 of 8 s: the nudge is due, though nudge_s is 30
    d._arrived.set()
    assert (await waiting).nudge
