"""Envelopes → what `hubbub chat` shows, without a terminal (the clock is a parameter)."""

from __future__ import annotations

import itertools
from typing import Any

import msgspec
import pytest

from hubbub.chat.activity import TYPING_SECONDS, typing_text
from hubbub.chat.format import (
    clock,
    duration,
    envelope_line,
    presence_text,
    to_epoch,
    tool_result_line,
)
from hubbub.chat.view import CLAIM_SECONDS, ChatView, status_text
from hubbub.protocol.envelope import Envelope

NOW = 1_800_000_000.0  # a fixed "now" in Unix seconds
TS = "2027-01-15T08:00:00.000Z"
_ids = itertools.count(1)


def env(kind: str, sender: str = "bob", **fields: Any) -> Envelope:
    """An envelope as the gateway delivers it."""
    fields.setdefault("id", f"01ID{next(_ids):022d}")
    return Envelope(kind=kind, from_=sender, ts=TS, **fields)


def chat(text: str, sender: str = "bob", seq: int | None = None, **fields: Any) -> Envelope:
    fields.setdefault("channel", "#general")
    return env("chat", sender, seq=seq, payload={"text": text}, **fields)


def joined(channel: str = "#general", members: list[str] | None = None, **payload: Any) -> Envelope:
    body = {"channel": channel, "members": members or ["alice", "bob"], "history": [], "seq": 0}
    body.update(payload)
    return env("channel/joined", "system:gateway", to=["alice"], channel=channel, payload=body)


def stored(envelope: Envelope) -> dict[str, Any]:
    out = msgspec.to_builtins(envelope)
    assert isinstance(out, dict)
    return out


def view_in(*channels: str) -> ChatView:
    v = ChatView("alice")
    v.handle(welcome("alice", "bob"), NOW)
    for ch in channels or ("#general",):
        v.handle(joined(ch), NOW)
    return v


def plain(v: ChatView, channel: str | None = None) -> list[str]:
    return [line.plain for line in v.lines(channel)]


# ---------------------------------------------------------------------- formatting


def test_a_channel_message_reads_time_sender_text() -> None:
    line = envelope_line(chat("hi all"), "alice")
    assert line is not None
    assert line.plain == f"{clock(TS)} bob: hi all"
    assert ("class:from", "bob") in line.fragments
    assert clock(TS).count(":") == 1 and len(clock(TS)) == 5


def test_own_messages_and_mentions_are_styled() -> None:
    own = envelope_line(chat("hello", sender="alice"), "alice")
    assert own is not None and ("class:from.me", "alice") in own.fragments
    mention = envelope_line(chat("@alice look"), "alice")
    assert mention is not None and ("class:mention", "@alice look") in mention.fragments


def test_an_addressed_channel_message_names_its_recipients() -> None:
    line = envelope_line(chat("for you", to=["carol"]), "alice")
    assert line is not None and line.plain.endswith("bob → carol: for you")


def test_a_dm_is_marked_and_styled_apart() -> None:
    line = envelope_line(chat("psst", channel=None, to=["alice"]), "alice")
    assert line is not None
    assert line.plain == f"{clock(TS)} [DM] bob → alice: psst"
    assert all("class:dm" in style for style, _ in line.fragments[1:] if "from" not in style)


def test_an_error_names_code_and_message() -> None:
    error = env("system/error", "system:gateway", payload={"error": "rate_limited", "message": "x"})
    line = envelope_line(error, "alice")
    assert line is not None and line.plain.endswith("error (rate_limited): x")


def test_unshown_kinds_have_no_line() -> None:
    assert envelope_line(env("system/heartbeat"), "alice") is None
    assert envelope_line(env("reasoning/thought", payload={"message": "hmm"}), "alice") is None


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0, "0s"), (0.2, "1s"), (47, "47s"), (99, "99s"), (125, "2m 05s"), (3720, "1h 02m")],
)
def test_durations(seconds: float, text: str) -> None:
    assert duration(seconds) == text


def test_times_in_iso_milliseconds_and_seconds() -> None:
    start, later = to_epoch(TS), to_epoch("2027-01-15T08:00:00.500Z")
    assert start is not None and later == start + 0.5
    assert to_epoch(1_800_000_047_000) == 1_800_000_047.0
    assert to_epoch(1_800_000_047) == 1_800_000_047.0
    assert to_epoch("not a time") is None and to_epoch(None) is None and to_epoch(True) is None


def test_presence_text_counts_down_to_the_wake() -> None:
    assert presence_text("online", None, NOW) == "online"
    assert presence_text("away", None, NOW) == "away"
    assert presence_text("sleeping", (NOW + 47) * 1000, NOW) == "sleeping, wakes in 47s"
    assert presence_text("sleeping", None, NOW) == "sleeping"
    assert presence_text("sleeping", NOW - 1, NOW) == "sleeping, waking now"


def test_tool_results() -> None:
    ok = tool_result_line("calc", {"content": [{"type": "text", "text": "5"}]})
    assert ok.plain == "✓ calc answered: 5"
    bad = tool_result_line("calc", {"content": [{"type": "text", "text": "boom"}], "isError": True})
    assert bad.plain == "✗ calc reported an error: boom"
    assert bad.fragments[0][0] == "class:result.error"
    structured = tool_result_line("calc", {"content": [], "structuredContent": {"sum": 5}})
    assert structured.plain == '✓ calc answered: {"sum": 5}'
    image = tool_result_line("cam", {"content": [{"type": "image", "data": "…"}]})
    assert image.plain == "✓ cam answered: [image]"


# ---------------------------------------------------------------------- join and history


def test_join_shows_the_history_then_live_messages_without_repeats() -> None:
    v = ChatView("alice")
    history = [stored(chat(f"old {n}", seq=n)) for n in (1, 2, 3)]
    v.handle(joined(history=history, seq=3), NOW)
    assert v.channels == ["#general"] and v.current == "#general"
    lines = plain(v)
    assert [line.split(" ", 1)[1] for line in lines[:3]] == [
        "bob: old 1",
        "bob: old 2",
        "bob: old 3",
    ]
    assert lines[3] == "— joined #general with bob —"
    v.handle(chat("old 3", seq=3), NOW)  # a resume delivers it again: not shown twice
    v.handle(chat("new", seq=4), NOW)
    assert plain(v)[-1].endswith("bob: new") and len(plain(v)) == 5


def test_join_history_skips_floor_claims() -> None:
    claim = env("floor/responding-to", channel="#general", seq=2, payload={"msg_id": "x"})
    v = ChatView("alice")
    v.handle(joined(history=[stored(chat("q", seq=1)), stored(claim)], seq=2), NOW)
    assert len(plain(v)) == 2 and v.claims == {}


def test_alone_in_a_channel() -> None:
    v = ChatView("alice")
    v.handle(joined(members=["alice"]), NOW)
    assert plain(v) == ["— joined #general (nobody else is here) —"]


def test_older_history_is_requested_before_the_oldest_and_put_on_top() -> None:
    v = ChatView("alice")
    v.handle(joined(history=[stored(chat(f"m{n}", seq=n)) for n in (51, 52)], seq=52), NOW)
    request = v.history_request("#general", 50)
    assert request == {"channel": "#general", "limit": 50, "before_seq": 51}
    assert v.history_request("#general", 50) is None  # one page at a time
    page = [stored(chat(f"m{n}", seq=n)) for n in range(1, 51)]
    response = env(
        "history/response",
        "system:gateway",
        payload={"channel": "#general", "messages": page, "has_more": False},
    )
    v.handle(response, NOW)
    lines = plain(v)
    assert lines[0] == "— the beginning of #general —"
    assert lines[1].endswith("bob: m1") and lines[50].endswith("bob: m50")
    assert lines[51].endswith("bob: m51")
    assert v.history_request("#general") is None
    assert plain(v)[-1] == "no older messages in #general"


def test_a_channel_joined_with_no_history_shown_pages_from_its_seq() -> None:
    v = ChatView("alice")
    v.handle(joined(seq=120), NOW)  # history_on_join = 0
    assert v.history_request("#general", 10) == {
        "channel": "#general",
        "limit": 10,
        "before_seq": 121,
    }


def test_an_empty_channel_has_nothing_older() -> None:
    v = view_in()
    assert v.history_request("#general") is None
    assert plain(v)[-1] == "no older messages in #general"


# ---------------------------------------------------------------------- channels and DMs


def test_dms_show_in_every_pane_and_unread_counts_other_channels() -> None:
    v = view_in("#general", "#dev")
    assert v.current == "#general"
    v.handle(chat("psst", channel=None, to=["alice"]), NOW)
    assert plain(v, "#general")[-1].endswith("[DM] bob → alice: psst")
    assert plain(v, "#dev")[-1].endswith("[DM] bob → alice: psst")
    v.handle(chat("in dev", channel="#dev", seq=1), NOW)
    v.handle(chat("again", channel="#dev", seq=2), NOW)
    assert v.unread == {"#dev": 2}
    assert status_text(v.status_fragments(NOW)) == "[#general] #dev(2) "
    assert v.cycle(1) == "#dev" and v.unread == {}
    assert status_text(v.status_fragments(NOW)) == "#general [#dev] "
    assert v.cycle(1) == "#general" and v.cycle(-1) == "#dev"


def test_messages_of_channels_not_joined_are_ignored() -> None:
    v = view_in()
    v.handle(chat("elsewhere", channel="#random", seq=1), NOW)
    assert "#random" not in v.logs and v.unread == {}


def test_switch_needs_a_joined_channel() -> None:
    v = view_in()
    assert not v.switch("#dev") and v.current == "#general"


def test_leaving_moves_to_another_channel() -> None:
    v = view_in("#general", "#dev")
    v.switch("#dev")
    v.handle(env("channel/left", "system:gateway", payload={"channel": "#dev"}), NOW)
    assert v.channels == ["#general"] and v.current == "#general"
    assert plain(v)[-1] == "— you left #dev —"
    v.handle(env("channel/left", "system:gateway", payload={"channel": "#general"}), NOW)
    assert v.current is None and plain(v) == ["— you left #general —"]
    assert status_text(v.presence_fragments(NOW)) == "not in a channel: /join #general"


def test_errors_show_in_the_current_pane() -> None:
    v = view_in("#general", "#dev")
    error = env(
        "system/error",
        "system:gateway",
        to=["alice"],
        payload={"error": "unknown_participant", "message": "no participant 'zed'"},
    )
    v.handle(error, NOW)
    assert "error (unknown_participant)" in plain(v, "#general")[-1]
    assert "error" not in plain(v, "#dev")[-1]


# ---------------------------------------------------------------------- presence


def presence(event: str, who: str, channel: str | None = None, **entry: Any) -> Envelope:
    payload: dict[str, Any] = {"event": event, "participant": {"id": who, **entry}}
    if channel is not None:
        payload["channel"] = channel
    return env("system/presence", "system:gateway", payload=payload)


def welcome(*people: str) -> Envelope:
    participants = [{"id": p, "kind": "agent", "presence": "online"} for p in people]
    return env("system/welcome", "system:gateway", payload={"participants": participants})


def test_presence_line_groups_members_by_state() -> None:
    v = ChatView("alice")
    v.handle(welcome("alice", "bob"), NOW)
    v.handle(joined(), NOW)
    v.handle(presence("join", "carol", kind="agent", presence="online", channels=["#general"]), NOW)
    assert plain(v)[-1] == "→ carol joined #general"
    v.handle(presence("update", "carol", kind="agent", presence="away"), NOW)
    assert plain(v)[-1] == "• carol is away"
    wake = "2027-01-15T08:00:47.000Z"
    v.handle(presence("update", "bob", kind="agent", presence="sleeping", wake_at=wake), NOW)
    now = to_epoch(TS)
    assert now is not None
    assert plain(v)[-1] == "• bob is sleeping, wakes in 47s"
    line = status_text(v.presence_fragments(now))
    assert line == "#general · online: alice · away: carol · sleeping: bob (wakes in 47s)"
    assert status_text(v.presence_fragments(now + 40)).endswith("bob (wakes in 7s)")
    who = [line.plain for line in v.who_lines(now)]
    assert who == [
        "in #general:",
        "  alice (you) [agent] online",
        "  bob [agent] sleeping, wakes in 47s",
        "  carol [agent] away",
    ]
    v.handle(presence("update", "bob", kind="agent", presence="online"), now)
    assert "wake_at" not in v.people["bob"]
    assert plain(v)[-1] == "• bob is online"


def test_wake_at_at_the_top_of_the_payload_is_read_too() -> None:
    v = view_in()
    payload = {
        "event": "update",
        "participant": {"id": "bob"},
        "presence": "sleeping",
        "wake_at": (NOW + 30) * 1000,
    }
    v.handle(env("system/presence", "system:gateway", payload=payload), NOW)
    assert v.presence_of("bob", NOW) == "sleeping, wakes in 30s"


def test_leaving_a_channel_and_going_offline() -> None:
    v = view_in()
    v.handle(presence("join", "carol", channel="#general"), NOW)
    v.handle(presence("leave", "carol", channel="#general"), NOW)
    assert plain(v)[-2:] == ["→ carol joined #general", "← carol left #general"]
    v.handle(presence("leave", "bob", kind="agent", presence="offline", channels=["#general"]), NOW)
    assert plain(v)[-1] == "← bob went offline"
    assert v.members["#general"] == {"alice"}


def test_coalesced_presence_and_own_events_are_quiet() -> None:
    v = view_in()
    before = len(plain(v))
    payload = {"event": "join", "participants": [{"id": "c1"}, {"id": "c2"}, {"id": "alice"}]}
    v.handle(env("system/presence", "system:gateway", channel=None, payload=payload), NOW)
    assert {"c1", "c2", "alice"} <= set(v.people)
    assert len(plain(v)) == before  # a space join without channels is not a channel event
    v.handle(presence("update", "alice", presence="away"), NOW)
    assert len(plain(v)) == before


# ---------------------------------------------------------------------- floor claims


def claim(who: str = "bob", channel: str = "#general") -> Envelope:
    return env(
        "floor/responding-to", who, channel=channel, payload={"msg_id": "m", "started_at": 1}
    )


def test_a_claim_shows_until_the_claimant_speaks() -> None:
    v = view_in()
    v.handle(claim(), NOW)
    assert "bob is responding…" in status_text(v.status_fragments(NOW))
    assert plain(v)[-1].startswith("—")  # a claim adds no message line
    v.handle(chat("carol says", sender="carol", seq=1), NOW)
    assert v.responding("#general", NOW) == ["bob"]
    v.handle(chat("the answer", seq=2), NOW + 3)
    assert v.responding("#general", NOW + 3) == []
    assert "responding" not in status_text(v.status_fragments(NOW + 3))


def test_a_claim_lapses_after_45_seconds() -> None:
    v = view_in()
    v.handle(claim(), NOW)
    assert v.responding("#general", NOW + CLAIM_SECONDS - 1) == ["bob"]
    assert v.responding("#general", NOW + CLAIM_SECONDS) == []


def test_floor_claimed_names_the_holder_and_claims_are_per_channel() -> None:
    v = view_in("#general", "#dev")
    payload = {"msg_id": "m", "holder": "carol", "started_at": 1, "expires_at": 2}
    v.handle(env("floor/claimed", "system:gateway", channel="#general", payload=payload), NOW)
    v.handle(claim("dave", "#general"), NOW)
    v.handle(claim("erin", "#dev"), NOW)
    assert "carol, dave are responding…" in status_text(v.status_fragments(NOW))
    v.switch("#dev")
    assert "erin is responding…" in status_text(v.status_fragments(NOW))


def outcome(holder: str, reason: str, yielded: list[str], seq: int) -> Envelope:
    payload: dict[str, Any] = {"msg_id": "m", "holder": holder, "reason": reason}
    payload["yielded"] = yielded
    return env("floor/outcome", "system:gateway", channel="#general", seq=seq, payload=payload)


@pytest.mark.parametrize(
    ("holder", "reason", "yielded", "text"),
    [
        (
            "maths",
            "answered",
            ["chef", "travel"],
            "↳ answered by maths · chef, travel yielded to maths",
        ),
        ("maths", "answered", [], "↳ answered by maths"),
        ("alice", "answered", ["bob"], "↳ answered by you · bob yielded to you"),
        ("chef", "expired", [], "↳ chef held the floor and did not answer in time"),
        ("chef", "disconnected", ["coder"], "↳ chef left before answering · coder yielded to chef"),
    ],
)
def test_a_floor_outcome_reads_who_answered_and_who_yielded(
    holder: str, reason: str, yielded: list[str], text: str
) -> None:
    line = envelope_line(outcome(holder, reason, yielded, 3), "alice")
    assert line is not None and line.plain.split(" ", 1)[1] == text


def test_the_floor_outcome_shows_live_and_from_history_alike() -> None:
    late = ChatView("alice")
    question, answer = chat("what is 6*7?", seq=1), chat("42", sender="maths", seq=2)
    ended = outcome("maths", "answered", ["chef"], 3)
    late.handle(joined(history=[stored(e) for e in (question, answer, ended)], seq=3), NOW)
    live = view_in()
    live.handle(claim("maths"), NOW)
    for e in (question, answer, ended):
        live.handle(e, NOW)
    assert plain(late)[:3] == plain(live)[-3:]
    assert plain(late)[2].endswith("↳ answered by maths · chef yielded to maths")
    assert live.responding("#general", NOW) == []


def test_an_expired_outcome_ends_the_holders_responding() -> None:
    v = view_in()
    v.handle(claim("bob"), NOW)
    v.handle(outcome("bob", "expired", [], 1), NOW + 1)
    assert v.responding("#general", NOW + 1) == []
    v.handle(outcome("bob", "expired", [], 1), NOW + 2)  # a resume repeats it: shown once
    assert [line for line in plain(v) if "↳" in line] == [plain(v)[-1]]


def test_a_gateway_notice_shows_in_its_channel() -> None:
    v = view_in()
    question = chat("what is the capital of Peru?", sender="alice", seq=1)
    v.handle(question, NOW)
    text = "no agent took this: nobody claimed or answered it within 30 s"
    v.handle(
        env(
            "system/notice",
            "system:gateway",
            to=["alice"],
            channel="#general",
            correlation_id=[question.id],
            payload={"notice": "unclaimed", "text": text, "msg_id": question.id},
        ),
        NOW,
    )
    assert plain(v)[-1].endswith("ⓘ " + text)


# ---------------------------------------------------------------------- typing


def reasoning(kind: str = "start", who: str = "maths", **fields: Any) -> Envelope:
    """A ``reasoning/*`` event, to #general unless ``to``/``channel`` say otherwise."""
    if "to" not in fields:
        fields.setdefault("channel", "#general")
    if kind == "start":
        fields.setdefault("payload", {"message": "Working on alice's message"})
    return env(f"reasoning/{kind}", who, **fields)


def status(v: ChatView, now: float = NOW) -> str:
    return status_text(v.status_fragments(now))


@pytest.mark.parametrize(
    ("ids", "text"),
    [
        ([], ""),
        (["maths"], "maths is typing…"),
        (["chef", "maths"], "chef and maths are typing…"),
        (["a", "b", "c"], "a, b and c are typing…"),
        (["a", "b", "c", "d"], "4 people are typing…"),
    ],
)
def test_typing_text(ids: list[str], text: str) -> None:
    assert typing_text(ids) == text


def test_typing_shows_until_the_answer_arrives() -> None:
    v = view_in()
    v.handle(reasoning(), NOW)
    assert "· maths is typing… " in status(v)
    assert plain(v)[-1].startswith("—")  # reasoning adds no message line
    v.handle(reasoning("thought", payload={"reasoning": "adding"}), NOW + 1)
    v.handle(chat("carol says", sender="carol", seq=1), NOW + 2)
    assert v.typists("#general", NOW + 2) == ["maths"]
    v.handle(chat("5", sender="maths", seq=2), NOW + 3)
    assert v.typists("#general", NOW + 3) == []
    assert "typing" not in status(v, NOW + 3)


@pytest.mark.parametrize("end", ["conclusion", "cancel"])
def test_typing_ends_with_the_turn(end: str) -> None:
    v = view_in()
    v.handle(reasoning(), NOW)
    v.handle(reasoning(end, who="chef"), NOW)  # someone else's end changes nothing
    assert v.typists("#general", NOW) == ["maths"]
    v.handle(reasoning(end), NOW + 1)
    assert v.typists("#general", NOW + 1) == []


def test_typing_lapses_without_news_and_thoughts_are_news() -> None:
    v = view_in()
    v.handle(reasoning(), NOW)
    assert v.typists("#general", NOW + TYPING_SECONDS - 1) == ["maths"]
    v.handle(reasoning("thought"), NOW + TYPING_SECONDS - 1)
    assert v.typists("#general", NOW + TYPING_SECONDS + 1) == ["maths"]
    assert v.typists("#general", NOW + 2 * TYPING_SECONDS - 1) == []


def test_the_typing_timeout_is_an_option() -> None:
    v = ChatView("alice", typing_seconds=5)
    v.handle(joined(), NOW)
    v.handle(reasoning(), NOW)
    assert v.typists("#general", NOW + 4) == ["maths"]
    assert v.typists("#general", NOW + 5) == []


def test_typing_is_per_channel_and_a_dm_shows_everywhere() -> None:
    v = view_in("#general", "#dev")
    v.handle(reasoning(who="chef", channel="#dev"), NOW)
    v.handle(reasoning(who="maths", to=["alice"]), NOW)
    v.handle(reasoning(who="zed", to=["bob"]), NOW)  # a DM to someone else (not delivered)
    assert "· maths is typing… " in status(v)
    v.switch("#dev")
    assert "· chef and maths are typing… " in status(v)
    v.handle(chat("in dev", sender="maths", channel="#dev", seq=1), NOW)
    assert v.typists("#dev", NOW) == ["chef", "maths"]  # maths types a DM, not in #dev
    v.handle(chat("psst", sender="maths", channel=None, to=["alice"]), NOW)
    assert v.typists("#dev", NOW) == ["chef"]


def test_more_than_three_typists_are_counted() -> None:
    v = view_in()
    for who in ("a", "b", "c", "d"):
        v.handle(reasoning(who=who), NOW)
    assert "· 4 people are typing… " in status(v)


def test_my_own_reasoning_and_the_servers_are_not_typing() -> None:
    v = view_in()
    v.handle(reasoning(who="alice"), NOW)
    v.handle(reasoning(who="system:gateway"), NOW)
    v.handle(reasoning(who="alice", channel=None, to=["maths"]), NOW)
    assert v.typists("#general", NOW) == []


def test_a_claim_takes_precedence_over_typing() -> None:
    v = view_in()
    v.handle(reasoning(who="bob"), NOW)
    v.handle(reasoning(who="maths"), NOW)
    v.handle(claim("bob"), NOW)
    assert "· bob is responding… · maths is typing… " in status(v)
    assert status(v).count("bob") == 1


def test_typing_ends_when_the_typist_leaves_or_goes_offline() -> None:
    v = view_in("#general", "#dev")
    v.handle(presence("join", "carol", channel="#general"), NOW)
    v.handle(presence("join", "carol", channel="#dev"), NOW)
    v.handle(reasoning(who="carol"), NOW)
    v.handle(reasoning(who="carol", channel="#dev"), NOW)
    v.handle(reasoning(who="maths", to=["alice"]), NOW)
    v.handle(presence("leave", "carol", channel="#general"), NOW)
    assert v.typists("#general", NOW) == ["maths"]
    assert v.typists("#dev", NOW) == ["carol", "maths"]
    v.handle(presence("leave", "carol", kind="agent", presence="offline"), NOW)
    v.handle(presence("leave", "maths", kind="agent", presence="offline"), NOW)
    assert v.typists("#dev", NOW) == []


# ---------------------------------------------------------------------- proposals


def proposal(sender: str = "agent", to: str = "calc", **args: Any) -> Envelope:
    payload = {
        "jsonrpc": "2.0",
        "id": "t-1",
        "method": "tools/call",
        "params": {"name": "add", "arguments": args or {"a": 2, "b": 3}},
    }
    return env("mcp/proposal", sender, to=[to], channel="#general", seq=7, payload=payload)


def test_a_proposal_is_numbered_with_what_to_type() -> None:
    v = view_in()
    p = proposal()
    v.handle(p, NOW)
    assert plain(v)[-1] == (
        f"{clock(TS)} ⚑ proposal #1: agent proposes tools/call add on calc "
        'args {"a": 2, "b": 3}  (/approve 1 or /reject 1 [reason])'
    )
    entry = v.proposal(1)
    assert entry is not None and entry.id == p.id and entry.status == "pending"
    assert v.proposal(2) is None and v.proposal(0) is None
    assert [line.plain for line in v.proposal_listing()] == [
        '#1 [pending] agent → calc: tools/call add args {"a": 2, "b": 3}'
    ]
    assert "1 proposal (/proposals)" in status_text(v.status_fragments(NOW))


def test_no_proposals_yet() -> None:
    assert [line.plain for line in view_in().proposal_listing()] == ["no proposals yet"]


def test_a_rejection_settles_the_proposal_and_says_why() -> None:
    v = view_in()
    p = proposal()
    v.handle(p, NOW)
    reject = env(
        "mcp/reject",
        "alice",
        to=["agent"],
        channel="#general",
        seq=8,
        correlation_id=[p.id],
        payload={"reason": "unsafe"},
    )
    v.handle(reject, NOW)
    assert plain(v)[-1] == "you rejected proposal #1: unsafe"
    assert v.proposals[0].status == "rejected" and v.pending_proposals() == 0


def test_a_fulfilment_by_someone_else_settles_it() -> None:
    v = view_in()
    p = proposal()
    v.handle(p, NOW)
    fulfil = env("mcp/request", "carol", to=["calc"], correlation_id=[p.id], payload=p.payload)
    v.handle(fulfil, NOW)
    assert v.proposals[0].status == "approved"
    assert plain(v)[-1] == "carol approved proposal #1"


def test_only_the_proposer_may_withdraw() -> None:
    v = view_in()
    p = proposal()
    v.handle(p, NOW)
    forged = env("mcp/withdraw", "mallory", channel="#general", correlation_id=[p.id])
    v.handle(forged, NOW)
    assert v.proposals[0].status == "pending"
    real = env("mcp/withdraw", "agent", channel="#general", correlation_id=[p.id])
    v.handle(real, NOW)
    assert v.proposals[0].status == "withdrawn"
    assert plain(v)[-1] == "agent withdrew proposal #1"


def test_own_proposals_are_shown_but_not_numbered() -> None:
    v = view_in()
    v.handle(proposal(sender="alice"), NOW)
    assert v.proposals == []
    assert "proposal: alice proposes tools/call add" in plain(v)[-1]


def test_long_arguments_are_cut() -> None:
    v = view_in()
    v.handle(proposal(text="x" * 500), NOW)
    listing = v.proposal_listing()[0].plain
    assert listing.endswith("…") and len(listing) < 300


def test_proposals_in_history_are_numbered_and_keep_how_they_were_settled() -> None:
    def proposal(seq: int, sender: str = "coder") -> Envelope:
        return env(
            "mcp/proposal", sender, seq=seq, channel="#general", to=["calc"],
            payload={"method": "tools/call", "params": {"name": "add"}},
        )  # fmt: skip

    def answer(kind: str, seq: int, about: Envelope) -> Envelope:
        return env(kind, "bob", seq=seq, channel="#general", correlation_id=[about.id])

    older, settled, waiting, mine = proposal(1), proposal(2), proposal(4), proposal(5, "alice")
    history = [settled, answer("mcp/request", 3, settled), waiting, mine]
    history.append(answer("mcp/reject", 6, older))  # its proposal is on an older page
    v = ChatView("alice")
    v.handle(welcome("alice", "bob", "coder"), NOW)
    v.handle(joined(history=[stored(e) for e in history]), NOW)
    assert [(p.number, p.id, p.status) for p in v.proposals] == [
        (1, settled.id, "approved"),
        (2, waiting.id, "pending"),
    ]
    assert any("proposal #2: coder proposes" in line for line in plain(v))
    v.handle(waiting, NOW)  # the same proposal live again (a resend): not a third entry
    assert len(v.proposals) == 2
    page = {"channel": "#general", "messages": [stored(older)], "has_more": False}
    v.handle(env("history/response", "system:gateway", payload=page), NOW)
    third = v.proposal(3)
    assert third is not None and (third.id, third.status) == (older.id, "rejected")
