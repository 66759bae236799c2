"""Participant helpers for the server's markers, on a real gateway: callbacks (DM and channel),
sleep and wake, history since a seq, and recognising deliveries from @server."""

from __future__ import annotations

import asyncio

import pytest

from hubbub.protocol.envelope import Envelope
from hubbub.protocol.ids import SERVER_ID
from hubbub.sdk.server_notes import (
    CallbackFired,
    Wake,
    csma_check,
    csma_payload,
    server_note,
)
from tests.agent.test_agent import next_from, say
from tests.sdk.conftest import MakeParticipant


async def test_callbacks_come_back_to_their_origin_only(participant: MakeParticipant) -> None:
    p = await participant("worker")
    other = await participant("other")
    mine: list[CallbackFired] = []
    theirs: list[CallbackFired] = []
    arrived = asyncio.Event()
    p.on_callback(mine.append)
    other.on_callback(theirs.append)

    async def also_async(note: CallbackFired) -> None:
        mine.append(note)
        arrived.set()

    p.on_callback(also_async)
    sent = await p.schedule_callback(0.05, "wake me", channel="#general")
    assert sent.payload["text"] == "@@cb:0.05s#general@@wake me" and sent.channel == "#general"
    await asyncio.wait_for(arrived.wait(), 5)
    arrived.clear()
    assert mine[0].payload == "wake me" and mine[0].origin == "worker"
    assert mine[0].channel == "#general" and mine[0] is mine[1]
    assert theirs == []
    await p.schedule_callback(0.01, "dm")
    await asyncio.wait_for(arrived.wait(), 5)
    assert mine[2].channel is None and mine[2].envelope.to == ["worker"]


async def test_server_note_hooks_can_be_removed(participant: MakeParticipant) -> None:
    p = await participant("worker")
    kept: list[CallbackFired] = []
    removed: list[CallbackFired] = []
    arrived = asyncio.Event()
    p.on_callback(lambda note: (kept.append(note), arrived.set()))
    p.on_callback(removed.append)()
    p.on_wake(removed.append)()
    await p.schedule_callback(0.01, "once")
    await asyncio.wait_for(arrived.wait(), 5)
    assert [n.payload for n in kept] == ["once"] and removed == []


async def test_sleep_and_the_wake_hook(participant: MakeParticipant) -> None:
    p = await participant("sleeper")
    woke: list[Wake] = []
    arrived = asyncio.Event()
    p.on_wake(lambda note: (woke.append(note), arrived.set()))
    sent = await p.sleep(0.1, "drop")
    assert sent.payload["text"] == "@@sleep:0.1s:drop@@"
    await asyncio.wait_for(arrived.wait(), 5)
    assert woke[0].buffered == 0 and woke[0].envelope.from_ == SERVER_ID
    with pytest.raises(ValueError, match="sleep mode"):
        await p.sleep(1, "deep")  # type: ignore[arg-type]


async def test_history_after_a_seq(participant: MakeParticipant) -> None:
    p = await participant("reader")
    stream = p.client.messages()
    first = await say(p.client, stream, "one")
    await say(p.client, stream, "two")
    await say(p.client, stream, "three")
    assert first.seq is not None
    after = await p.history("#general", after_seq=first.seq, limit=10)
    assert [e.payload["text"] for e in after] == ["two", "three"]
    assert [e.payload["text"] for e in await p.history("#general", limit=1)] == ["three"]


async def test_marker_chats_go_to_the_first_channel_or_a_self_dm(
    participant: MakeParticipant,
) -> None:
    p = await participant("lonely", channels=[])
    sent = await p.schedule_callback(0.01, "x")
    assert sent.channel is None and sent.to == ["lonely"]
    got = await next_from(p.client.messages(), SERVER_ID, ("chat",))
    assert server_note(got) is not None


def test_server_notes_and_csma_payloads() -> None:
    fire = Envelope(
        kind="chat",
        from_=SERVER_ID,
        to=["a"],
        payload={"text": "@@cb-fire@@" + csma_payload("01X", "#general", 7), "cb_id": "c1",
                 "cb_origin": "a"},
    )  # fmt: skip
    note = server_note(fire)
    assert isinstance(note, CallbackFired) and note.cb_id == "c1" and note.origin == "a"
    check = csma_check(note)
    assert check is not None and (check.reply_to, check.channel, check.seq) == (
        "01X",
        "#general",
        7,
    )
    wake = Envelope(kind="chat", from_=SERVER_ID, payload={"text": "@@wake@@", "buffered": 3})
    assert server_note(wake) == Wake(3, wake)
    spoofed = Envelope(kind="chat", from_="mallory", payload={"text": "@@wake@@"})
    assert server_note(spoofed) is None
    plain = CallbackFired("c2", "not json", None, fire)
    assert plain.json() is None and csma_check(plain) is None
    assert csma_check(CallbackFired("c3", '{"csma": "check"}', None, fire)) is None
