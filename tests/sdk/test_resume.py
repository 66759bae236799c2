"""The client's resume bookkeeping without a gateway: verdicts, resume points, paging."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from hubbub.protocol.envelope import Envelope
from hubbub.protocol.ids import DM_STREAM
from hubbub.sdk.resume import HISTORY_PAGE, ResumeState, Verdict


def msg(seq: int, channel: str | None = "#general", sender: str = "bob") -> Envelope:
    to = None if channel is not None else ["alice"]
    return Envelope(kind="chat", seq=seq, channel=channel, to=to, payload={"text": str(seq)})


def wire(env: Envelope) -> dict[str, Any]:
    out = {"kind": env.kind, "seq": env.seq, "payload": env.payload}
    if env.channel is not None:
        out["channel"] = env.channel
    return out


def joined_fresh(state: ResumeState, channel: str = "#general", seq: int = 0) -> None:
    assert state.joined(channel, {"channel": channel, "seq": seq}).missed == []


@given(st.lists(st.integers(1, 30), max_size=60))
def test_a_channel_delivers_each_seq_once_and_in_increasing_order(seqs: list[int]) -> None:
    state = ResumeState()
    joined_fresh(state)
    delivered = [s for s in seqs if state.accept(msg(s)) is Verdict.DELIVER]
    assert delivered == sorted(set(delivered))  # strictly increasing: no repeat, no going back
    assert state.duplicates_dropped == len(seqs) - len(delivered)
    assert state.last_seq["#general"] == (delivered[-1] if delivered else 0)


@given(st.lists(st.integers(1, 50), max_size=80))
def test_direct_messages_are_delivered_once_in_any_order(seqs: list[int]) -> None:
    state = ResumeState()
    delivered = [s for s in seqs if state.accept(msg(s, channel=None)) is Verdict.DELIVER]
    assert sorted(delivered) == sorted(set(seqs))  # every one once, whatever the order


@given(
    first=st.lists(st.integers(1, 20), min_size=1, max_size=20),
    replay=st.lists(st.integers(1, 40), max_size=40),
)
def test_a_resume_starts_after_what_was_delivered_and_drops_replays(
    first: list[int], replay: list[int]
) -> None:
    state = ResumeState()
    joined_fresh(state)
    for s in first:
        state.accept(msg(s))
    for s in first:
        state.accept(msg(s, channel=None))
    point = state.last_seq["#general"]
    resume = state.join_points(["#general"])
    assert resume == {"#general": point, DM_STREAM: max(first)}
    history = [wire(msg(s)) for s in sorted(set(replay))]
    out = state.joined("#general", {"channel": "#general", "history": history})
    again = [e.seq for e in out.missed if state.replayed("#general", e) is Verdict.DELIVER]
    assert again == [s for s in sorted(set(replay)) if s > point]
    # a DM at or below the resume point is a replay, one above it is new
    assert state.accept(msg(max(first), channel=None)) is Verdict.DUPLICATE
    assert state.accept(msg(max(first) + 1, channel=None)) is Verdict.DELIVER


def test_the_first_join_resumes_nothing_and_the_welcome_sets_the_dm_point() -> None:
    state = ResumeState()
    assert state.join_points(["#general"]) == {}
    state.welcomed({"epoch": "e1", "dm_seq": 7})
    assert state.epoch == "e1"
    joined_fresh(state, seq=12)
    assert state.join_points(["#general", "#other"]) == {"#general": 12, DM_STREAM: 7}


def test_another_epoch_forgets_the_dm_point_but_keeps_the_channel_points() -> None:
    state = ResumeState()
    state.welcomed({"epoch": "e1", "dm_seq": 7})
    joined_fresh(state, seq=3)
    state.welcomed({"epoch": "e2", "dm_seq": 1})  # another history: DMs start from its present
    assert state.join_points(["#general"]) == {"#general": 3, DM_STREAM: 1}


def test_a_reset_history_reloads_the_channel_from_what_the_gateway_sends() -> None:
    state = ResumeState()
    joined_fresh(state, seq=500)
    state.join_points(["#general"])
    history = [wire(msg(1)), wire(msg(2))]
    out = state.joined("#general", {"channel": "#general", "history": history, "history_reset": {}})
    assert out.reset
    assert [state.replayed("#general", e) for e in out.missed] == [Verdict.DELIVER] * 2
    assert state.last_seq["#general"] == 2


def test_a_cut_resume_holds_live_messages_until_the_pages_fill_the_gap() -> None:
    state = ResumeState()
    joined_fresh(state, seq=10)
    state.join_points(["#general"])
    out = state.joined(
        "#general", {"channel": "#general", "history": [wire(msg(11))], "has_more": True}
    )
    assert out.more
    for env in out.missed:
        state.replayed("#general", env)
    assert state.page("#general", "r1") == {
        "channel": "#general",
        "after_seq": 11,
        "limit": HISTORY_PAGE,
    }
    assert state.accept(msg(15)) is Verdict.HELD  # live, after the gap
    messages, more = state.paged(
        "#general", {"messages": [wire(msg(12)), wire(msg(13))], "has_more": True}
    )
    assert more and [state.replayed("#general", e) for e in messages] == [Verdict.DELIVER] * 2
    state.page("#general", "r2")
    messages, more = state.paged("#general", {"messages": [wire(msg(14)), wire(msg(15))]})
    assert not more
    assert [e.seq for e in messages if state.replayed("#general", e) is Verdict.DELIVER] == [14, 15]
    held = state.filled("#general")
    assert [state.replayed("#general", e) for e in held] == [
        Verdict.DUPLICATE
    ]  # 15 came in the page
    assert not state.is_paging("#general") and state.accept(msg(16)) is Verdict.DELIVER


def test_a_refused_page_names_its_channel_and_releases_what_was_held() -> None:
    state = ResumeState()
    joined_fresh(state, seq=1)
    state.join_points(["#general"])
    state.joined("#general", {"channel": "#general", "history": [], "has_more": True})
    state.page("#general", "r9")
    assert state.accept(msg(5)) is Verdict.HELD
    assert state.page_refused(["other"]) == [] and state.page_refused(["r9"]) == ["#general"]
    assert [e.seq for e in state.filled("#general")] == [5]


def test_leaving_forgets_the_resume_point_and_a_bad_history_entry_is_skipped() -> None:
    state = ResumeState()
    joined_fresh(state, seq=4)
    state.left("#general")
    assert state.join_points(["#general"]) == {}
    joined_fresh(state, seq=4)
    state.join_points(["#general"])
    out = state.joined("#general", {"channel": "#general", "history": [{"kind": 5}, wire(msg(5))]})
    assert [e.seq for e in out.missed] == [5]
