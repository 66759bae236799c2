"""Floor control (document 000): claims per (channel, msg_id), the earliest start keeps it."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from hubbub.engines.floor import (
    Claim,
    ClaimRefused,
    ClaimRejected,
    FloorControl,
    FloorOutcome,
    Release,
)
from hubbub.engines.timers import TimerQueue
from tests.strength import examples

NOW = 1_000_000
TS = NOW - 10_000  # the timestamp of the claimed message
CH = "#general"


def make(ttl_ms: float = 45_000, skew: float = 2_000) -> tuple[TimerQueue, FloorControl]:
    timers = TimerQueue()
    return timers, FloorControl(timers, ttl_ms=ttl_ms, max_skew_ms=skew, scope="sp")


def claim(
    floor: FloorControl,
    who: str,
    started_at: int,
    *,
    now: float = NOW,
    msg: str = "m1",
    channel: str = CH,
    human: bool = False,
    msg_ts: float | None = TS,
) -> FloorOutcome:
    return floor.claim(now, channel, msg, who, started_at, msg_ts=msg_ts, human=human)


# ---------------------------------------------------------------------------- contests


def test_first_claim_holds() -> None:
    timers, floor = make()
    out = claim(floor, "a1", TS + 100)
    assert out.holder == Claim(CH, "m1", "a1", TS + 100, NOW + 45_000)
    assert out.winner == "a1"
    assert out.relay and out.changed and out.yielded == []
    assert floor.holder(CH, "m1") == out.holder
    assert floor.holds("a1")
    assert len(floor) == 1
    assert floor.claims() == [out.holder]
    assert timers.due_at(floor.timer_key(CH, "m1")) == NOW + 45_000


def test_earlier_start_displaces_holder() -> None:
    timers, floor = make()
    claim(floor, "a1", TS + 500)
    out = claim(floor, "a2", TS + 100, now=NOW + 50)
    assert out.winner == "a2"
    assert out.yielded == ["a1"]  # the holder is told to yield
    assert out.relay and out.changed
    assert floor.holder(CH, "m1") == Claim(CH, "m1", "a2", TS + 100, NOW + 50 + 45_000)
    assert not floor.holds("a1")
    assert timers.due_at(floor.timer_key(CH, "m1")) == NOW + 50 + 45_000
    assert len(timers) == 1


def test_later_start_yields_newcomer() -> None:
    timers, floor = make()
    first = claim(floor, "a1", TS + 100).holder
    out = claim(floor, "a2", TS + 500, now=NOW + 50)
    assert out.winner == "a1"
    assert out.holder == first
    assert out.yielded == ["a2"]
    assert out.relay  # the loser's RESPONDING_TO is still relayed (it is advisory)
    assert not out.changed
    assert not floor.holds("a2")
    assert timers.due_at(floor.timer_key(CH, "m1")) == NOW + 45_000  # expiry unchanged


@pytest.mark.parametrize(("first", "second"), [("a1", "a2"), ("a2", "a1")])
def test_tie_goes_to_smaller_id(first: str, second: str) -> None:
    _, floor = make()
    claim(floor, first, TS + 100)
    out = claim(floor, second, TS + 100)
    assert out.winner == "a1"
    assert out.yielded == ["a2"]


def test_tie_is_lexicographic() -> None:
    _, floor = make()
    claim(floor, "agent-b", TS)
    assert claim(floor, "Agent-z", TS).winner == "Agent-z"  # "A" < "a"
    assert claim(floor, "agent-a", TS).yielded == ["agent-a"]


def test_human_outranks_earlier_agent() -> None:
    _, floor = make()
    claim(floor, "a1", TS + 1)
    out = claim(floor, "zed", TS + 1_000, human=True)
    assert out.winner == "zed"
    assert out.yielded == ["a1"]
    out = claim(floor, "a0", TS, now=NOW + 1)
    assert out.winner == "zed"
    assert out.yielded == ["a0"]
    assert floor.holder(CH, "m1").human  # type: ignore[union-attr]


def test_the_outcome_says_why_the_loser_yields() -> None:
    _, floor = make()
    assert claim(floor, "a2", TS + 100).reason == ""  # nobody yields
    assert "earlier started_at" in claim(floor, "a3", TS + 200).reason  # newcomer loses
    assert "same started_at" in claim(floor, "a1", TS + 100).reason  # holder a2 loses the tie
    assert "human" in claim(floor, "zed", TS + 900, human=True).reason
    assert "human" in claim(floor, "a0", TS, now=NOW + 1).reason


def test_humans_contest_among_themselves_by_start_then_id() -> None:
    _, floor = make()
    claim(floor, "bob", TS + 50, human=True)
    assert claim(floor, "alice", TS + 60, human=True).yielded == ["alice"]
    assert claim(floor, "carol", TS + 40, human=True).yielded == ["bob"]
    assert claim(floor, "abe", TS + 40, human=True).yielded == ["carol"]
    assert floor.holder(CH, "m1").holder == "abe"  # type: ignore[union-attr]


def test_reclaim_by_holder_is_idempotent() -> None:
    timers, floor = make()
    first = claim(floor, "a1", TS + 100).holder
    for started in (TS + 100, TS + 1, TS + 900):
        out = claim(floor, "a1", started, now=NOW + 5_000)
        assert out.holder == first
        assert not out.relay and not out.changed
        assert out.yielded == []
    assert floor.holder(CH, "m1") == first
    assert timers.due_at(floor.timer_key(CH, "m1")) == NOW + 45_000  # TTL not extended


def test_loser_claiming_again_yields_again() -> None:
    _, floor = make()
    claim(floor, "a1", TS + 100)
    assert claim(floor, "a2", TS + 200).yielded == ["a2"]
    out = claim(floor, "a2", TS + 200)
    assert out.yielded == ["a2"] and out.relay and not out.changed


def test_claims_per_message_are_independent() -> None:
    timers, floor = make()
    claim(floor, "a1", TS + 100, msg="m1")
    claim(floor, "a1", TS + 100, msg="m2")
    claim(floor, "a2", TS + 50, msg="m1", channel="#other")
    out = claim(floor, "a2", TS + 200, msg="m2")
    assert out.yielded == ["a2"]  # a1 keeps m2
    assert floor.holder(CH, "m1").holder == "a1"  # type: ignore[union-attr]
    assert floor.holder(CH, "m2").holder == "a1"  # type: ignore[union-attr]
    assert floor.holder("#other", "m1").holder == "a2"  # type: ignore[union-attr]
    assert len(floor) == 3
    assert len(timers) == 3


# ---------------------------------------------------------------------------- rejections


def test_reject_unknown_message() -> None:
    timers, floor = make()
    with pytest.raises(ClaimRejected, match="not a recent message"):
        claim(floor, "a1", TS, msg_ts=None)
    assert len(floor) == 0 and len(timers) == 0


def test_reject_start_before_message() -> None:
    _, floor = make()
    with pytest.raises(ClaimRejected, match="before the message"):
        claim(floor, "a1", TS - 1)
    assert claim(floor, "a1", TS).winner == "a1"  # exactly the message's time is fine


def test_reject_start_in_the_future() -> None:
    _, floor = make(skew=2_000)
    with pytest.raises(ClaimRejected, match="in the future"):
        claim(floor, "a1", NOW + 2_001)
    assert claim(floor, "a1", NOW + 2_000).winner == "a1"  # within the skew


def test_rejected_claim_does_not_disturb_holder() -> None:
    timers, floor = make()
    held = claim(floor, "a1", TS + 100).holder
    with pytest.raises(ClaimRejected):
        claim(floor, "a2", TS - 5)  # would have won if believed
    with pytest.raises(ClaimRejected):
        claim(floor, "a3", NOW + 10_000)
    assert floor.holder(CH, "m1") == held
    assert timers.due_at(floor.timer_key(CH, "m1")) == held.expires_at


def test_reject_even_a_human_lying_about_its_clock() -> None:
    _, floor = make()
    with pytest.raises(ClaimRejected):
        claim(floor, "ann", TS - 1, human=True)


# ---------------------------------------------------------------------------- ends


def test_ttl_expiry_via_timer_key() -> None:
    timers, floor = make(ttl_ms=1_000)
    claim(floor, "a1", TS)
    assert timers.pop_due(NOW + 999) == []
    (key,) = timers.pop_due(NOW + 1_000)
    assert key == floor.timer_key(CH, "m1") == ("sp", "floor", CH, "m1")
    rel = floor.expire(key[2], key[3])
    assert rel == Release(Claim(CH, "m1", "a1", TS, NOW + 1_000), "expired")
    assert floor.holder(CH, "m1") is None
    assert not floor.holds("a1")
    assert floor.expire(CH, "m1") is None  # nothing left to expire


def test_expiry_counts_from_the_winning_claim() -> None:
    timers, floor = make(ttl_ms=1_000)
    claim(floor, "a1", TS + 100)
    claim(floor, "a2", TS + 50, now=NOW + 600)
    assert timers.pop_due(NOW + 1_000) == []  # a1's expiry went with a1's claim
    assert timers.pop_due(NOW + 1_600) == [floor.timer_key(CH, "m1")]


def test_new_claim_after_expiry_holds() -> None:
    timers, floor = make(ttl_ms=1_000)
    claim(floor, "a1", TS)
    for key in timers.pop_due(NOW + 1_000):
        floor.expire(key[2], key[3])
    out = claim(floor, "a2", TS + 5_000, now=NOW + 1_000)
    assert out.winner == "a2" and out.yielded == []


def test_an_answer_ends_only_the_claims_it_replies_to() -> None:
    timers, floor = make()
    claim(floor, "a1", TS, msg="m1")
    claim(floor, "a1", TS, msg="m2")
    claim(floor, "a1", TS, msg="m1", channel="#other")
    claim(floor, "a2", TS, msg="m3")
    (rel,) = floor.spoke(CH, "a1", reply_to=["m1"])
    assert (rel.claim.msg_id, rel.claim.channel, rel.reason) == ("m1", CH, "answered")
    assert floor.holder(CH, "m1") is None
    assert floor.holder(CH, "m2").holder == "a1"  # type: ignore[union-attr]
    assert floor.holder("#other", "m1").holder == "a1"  # type: ignore[union-attr]
    assert floor.holder(CH, "m3").holder == "a2"  # type: ignore[union-attr]
    assert floor.timer_key(CH, "m1") not in timers
    assert len(timers) == 3


def test_a_holders_other_chat_ends_no_claim() -> None:
    _, floor = make()
    claim(floor, "a1", TS, msg="m1")
    assert floor.spoke(CH, "a1") == []  # replies to nothing
    assert floor.spoke(CH, "a1", reply_to=["m9"]) == []  # replies to another message
    assert floor.holder(CH, "m1").holder == "a1"  # type: ignore[union-attr]


def test_spoke_with_reply_to_releases_only_those() -> None:
    _, floor = make()
    claim(floor, "a1", TS, msg="m1")
    claim(floor, "a1", TS, msg="m2")
    rels = floor.spoke(CH, "a1", reply_to=["m2", "unrelated"])
    assert [r.claim.msg_id for r in rels] == ["m2"]
    assert floor.holder(CH, "m1") is not None


def test_spoke_without_claims_or_elsewhere_releases_nothing() -> None:
    _, floor = make()
    claim(floor, "a1", TS)
    assert floor.spoke(CH, "a2", reply_to=["m1"]) == []
    assert floor.spoke("#other", "a1", reply_to=["m1"]) == []
    assert floor.holder(CH, "m1") is not None


def test_a_claim_on_an_answered_message_is_refused_naming_who_answered() -> None:
    timers, floor = make()
    floor.answered(CH, "m1", "maths", "ans1")
    with pytest.raises(ClaimRefused) as refused:
        claim(floor, "chef", TS + 5)
    assert refused.value.why == "answered" and refused.value.winner == "maths"
    assert refused.value.answer == "ans1"
    assert str(refused.value) == (
        "m1 was answered already by maths (message ans1); do not answer it again"
    )
    assert len(floor) == 0 and len(timers) == 0
    with pytest.raises(ClaimRefused, match="answered already by you"):
        claim(floor, "maths", TS + 5)  # the answerer itself: nothing left to claim
    with pytest.raises(ClaimRefused):
        claim(floor, "ann", TS + 5, human=True)  # a person too
    claim(floor, "chef", TS + 5, channel="#other")  # the same id elsewhere is another message


def test_the_first_answer_is_the_one_remembered() -> None:
    _, floor = make()
    floor.answered(CH, "m1", "maths", "ans1")
    floor.answered(CH, "m1", "chef", "ans2")
    assert floor.answer_of(CH, "m1") == ("maths", "ans1")


def test_a_claim_on_a_message_addressed_to_others_is_refused() -> None:
    _, floor = make()
    floor.heard(CH, "m1", ("travel",))
    with pytest.raises(ClaimRefused) as refused:
        claim(floor, "chef", TS + 5)
    assert refused.value.why == "addressed" and refused.value.by == ("travel",)
    assert str(refused.value) == "m1 is addressed to travel, not to you; leave it to travel"
    assert claim(floor, "travel", TS + 5).winner == "travel"  # its addressee may claim it
    floor.heard(CH, "m2", ("travel", "maths"))
    with pytest.raises(ClaimRefused, match="to travel, maths, not to you; leave it to them"):
        claim(floor, "chef", TS + 5, msg="m2")
    floor.heard(CH, "m3", ())  # not addressed: anyone may claim it
    assert claim(floor, "chef", TS + 5, msg="m3").winner == "chef"


def test_a_refused_claim_leaves_the_holder_alone() -> None:
    _, floor = make()
    held = claim(floor, "maths", TS + 100).holder
    floor.answered(CH, "m1", "coder", "ans9")  # someone answered without claiming
    with pytest.raises(ClaimRefused):
        claim(floor, "chef", TS + 1)  # earlier, but the message is answered
    assert floor.holder(CH, "m1") == held


def test_the_floor_forgets_the_oldest_answers_past_its_bound() -> None:
    from hubbub.engines.floor import KEPT

    _, floor = make()
    for i in range(KEPT + 1):
        floor.answered(CH, f"q{i}", "maths", None)
        floor.heard(CH, f"q{i}", ("maths",))
    assert floor.answer_of(CH, "q0") is None and floor.refusal(CH, "q0", "chef") is None
    assert floor.answer_of(CH, f"q{KEPT}") == ("maths", None)


def test_disconnected_releases_all() -> None:
    timers, floor = make()
    claim(floor, "a1", TS, msg="m1")
    claim(floor, "a1", TS, msg="m2", channel="#other")
    claim(floor, "a2", TS, msg="m3")
    rels = floor.disconnected("a1")
    assert sorted((r.claim.channel, r.claim.msg_id) for r in rels) == [
        ("#general", "m1"),
        ("#other", "m2"),
    ]
    assert {r.reason for r in rels} == {"disconnected"}
    assert not floor.holds("a1")
    assert len(floor) == 1 and len(timers) == 1
    assert floor.disconnected("a1") == []


def test_a_release_names_who_yielded_while_it_was_held() -> None:
    _, floor = make()
    claim(floor, "chef", TS + 300)
    claim(floor, "maths", TS + 100)  # displaces chef
    claim(floor, "travel", TS + 200)  # yields to maths
    claim(floor, "travel", TS + 250)  # yields again: named once
    (rel,) = floor.spoke(CH, "maths", reply_to=["m1"])
    assert rel.reason == "answered" and rel.claim.holder == "maths"
    assert rel.yielded == ("chef", "travel")
    out = claim(floor, "coder", TS + 900)  # a later claim starts afresh
    (again,) = floor.disconnected("coder")
    assert out.winner == "coder" and again.yielded == ()


def test_released_message_can_be_claimed_again() -> None:
    _, floor = make()
    claim(floor, "a1", TS + 10)
    floor.disconnected("a1")
    out = claim(floor, "a2", TS + 500)
    assert out.winner == "a2" and out.yielded == [] and out.changed


# ---------------------------------------------------------------------------- open questions


def test_an_open_question_nobody_claims_is_handed_back_when_its_timer_fires() -> None:
    timers, floor = make()
    assert floor.asked(NOW, CH, "q1", "ann")
    assert timers.due_at(floor.open_key(CH, "q1")) == NOW + 30_000
    assert timers.pop_due(NOW + 29_999) == []
    (key,) = timers.pop_due(NOW + 30_000)
    assert key == ("sp", "open", CH, "q1")
    assert floor.unclaimed(CH, "q1") == "ann"
    assert floor.unclaimed(CH, "q1") is None and floor.open_questions() == 0


def test_a_claim_or_an_answer_takes_the_question() -> None:
    timers, floor = make()
    floor.asked(NOW, CH, "m1", "ann")
    claim(floor, "maths", TS + 5)
    assert floor.open_key(CH, "m1") not in timers and floor.unclaimed(CH, "m1") is None
    floor.asked(NOW, CH, "q2", "ann")
    floor.answered(CH, "q2", "bob", "a2")  # a person answered it
    assert floor.open_key(CH, "q2") not in timers and floor.open_questions() == 0
    assert not floor.asked(NOW, CH, "q2", "ann")  # answered already: not open
    assert not floor.asked(NOW, CH, "m1", "ann")  # held: not open


def test_no_open_questions_when_the_notice_is_off() -> None:
    timers = TimerQueue()
    floor = FloorControl(timers, scope="sp", unclaimed_ms=0)
    assert not floor.asked(NOW, CH, "q1", "ann") and len(timers) == 0
    disabled = FloorControl(timers, scope="sp", enabled=False)
    assert not disabled.asked(NOW, CH, "q1", "ann") and len(timers) == 0


# ---------------------------------------------------------------------------- property

TTL = 1_000
SKEW = 2_000
START = 100_000
CHANNELS = ["#a", "#b"]
MESSAGES = {"m1": 0, "m2": 50_000, "ghost": None}  # msg_id -> timestamp (None: unknown)
HUMANS = {"ann": True, "bob": True, "a1": False, "a2": False, "a3": False}


@dataclass(eq=False)
class Rec:
    """One accepted claim as the model sees it."""

    key: tuple[str, str]
    who: str
    started_at: int
    human: bool
    expires_at: float
    ended: str | None = None  # None while live, else "yield", "answered", ...
    events: int = 0  # YIELDs and releases the engine reported for this claim

    def rank(self) -> tuple[int, int, str]:
        return (0 if self.human else 1, self.started_at, self.who)


class FloorModel(RuleBasedStateMachine):
    """Random claims, expiries, answers and disconnects against a model of live claims."""

    def __init__(self) -> None:
        super().__init__()
        self.now = START
        self.timers = TimerQueue()
        self.floor = FloorControl(self.timers, ttl_ms=TTL, max_skew_ms=SKEW, scope="s")
        self.recs: list[Rec] = []
        self.yields: dict[tuple[str, str], list[str]] = {}
        """Who was told to yield on each held message since it became held."""
        self.answers: dict[tuple[str, str], str] = {}
        """Who answered each answered message first."""
        self.addressees: dict[tuple[str, str], tuple[str, ...]] = {}

    def live(self, key: tuple[str, str] | None = None, who: str | None = None) -> list[Rec]:
        return [
            r
            for r in self.recs
            if r.ended is None and key in (None, r.key) and who in (None, r.who)
        ]

    def yielded(self, key: tuple[str, str], who: str) -> None:
        """Attribute a YIELD to ``who``'s newest claim on ``key`` not yet told anything."""
        rec = next(r for r in reversed(self.recs) if r.key == key and r.who == who and not r.events)
        rec.events += 1
        assert rec.ended == "yield", "YIELD sent to a claim the model did not expect to lose"

    def released(self, rels: list[Release], reason: str) -> list[Rec]:
        got = []
        for rel in rels:
            assert rel.reason == reason
            c = rel.claim
            (rec,) = [r for r in self.live((c.channel, c.msg_id), c.holder) if not r.events]
            assert c.started_at == rec.started_at and c.human == rec.human
            assert c.expires_at == rec.expires_at
            rec.events += 1
            got.append(rec)
        for rec in got:
            rec.ended = reason
        for rel in rels:
            key = (rel.claim.channel, rel.claim.msg_id)
            assert rel.yielded == tuple(self.yields.pop(key)), "the release names who yielded"
        return got

    @rule(
        channel=st.sampled_from(CHANNELS),
        msg=st.sampled_from(sorted(MESSAGES)),
        who=st.sampled_from(sorted(HUMANS)),
        offset=st.sampled_from([0, 0, 1, 7]) | st.integers(-100, 2_100),
        base=st.sampled_from(["msg", "now"]),
    )
    def claim(self, channel: str, msg: str, who: str, offset: int, base: str) -> None:
        ts = MESSAGES[msg]
        started = (ts or 0) + offset if base == "msg" else self.now + offset
        key = (channel, msg)
        human = HUMANS[who]
        valid = ts is not None and ts <= started <= self.now + SKEW
        to = self.addressees.get(key)
        if ts is not None and (key in self.answers or (to and who not in to)):
            before = self.floor.claims()
            with pytest.raises(ClaimRefused) as refused:
                self.floor.claim(self.now, channel, msg, who, started, msg_ts=ts, human=human)
            assert refused.value.by == ((self.answers[key],) if key in self.answers else to)
            assert self.floor.claims() == before
            return
        if not valid:
            before = self.floor.claims()
            try:
                self.floor.claim(self.now, channel, msg, who, started, msg_ts=ts, human=human)
            except ClaimRejected:
                assert self.floor.claims() == before
                return
            raise AssertionError("an unbelievable claim was accepted")
        out = self.floor.claim(self.now, channel, msg, who, started, msg_ts=ts, human=human)
        if self.live(key, who):  # the holder claims again: nothing happens
            assert (out.relay, out.changed, out.yielded) == (False, False, [])
            return
        new = Rec(key, who, started, human, self.now + TTL)
        if not self.live(key):
            self.yields[key] = []  # the message becomes held: nobody yielded on it yet
        contenders = [*self.live(key), new]
        self.recs.append(new)
        best = min(contenders, key=Rec.rank)
        losers = [r for r in contenders if r is not best]
        for r in losers:
            r.ended = "yield"
        assert out.relay
        assert out.changed == (best is new)
        assert out.winner == best.who and out.holder.started_at == best.started_at
        assert sorted(out.yielded) == sorted(r.who for r in losers)
        for loser in out.yielded:
            self.yielded(key, loser)
        told = self.yields[key]
        told.extend(r.who for r in losers if r.who not in told)
        if best.who in told:
            told.remove(best.who)

    @rule(dt=st.integers(0, 1_500))
    def advance(self, dt: int) -> None:
        self.now += dt
        rels = []
        for key in self.timers.pop_due(self.now):
            assert key[:2] == ("s", "floor")
            rel = self.floor.expire(key[2], key[3])
            assert rel is not None
            rels.append(rel)
        due = {id(r) for r in self.live() if r.expires_at <= self.now}
        expired = self.released(rels, "expired")
        assert {id(r) for r in expired} == due  # exactly the claims past their TTL end

    @rule(
        channel=st.sampled_from(CHANNELS),
        who=st.sampled_from(sorted(HUMANS)),
        reply_to=st.none() | st.lists(st.sampled_from(["m1", "m2", "other"]), max_size=2),
    )
    def spoke(self, channel: str, who: str, reply_to: list[str] | None) -> None:
        mine = [r for r in self.live(who=who) if r.key[0] == channel]
        expected = [r for r in mine if r.key[1] in (reply_to or ())]
        rels = self.floor.spoke(channel, who, reply_to)
        self.released(rels, "answered")
        assert sorted(r.claim.msg_id for r in rels) == sorted(r.key[1] for r in expected)

    @rule(msg=st.sampled_from(["m1", "m2"]), who=st.sampled_from(sorted(HUMANS)))
    def answered(self, msg: str, who: str) -> None:
        """Someone answers a message of #b (#a stays open for contests)."""
        self.floor.answered("#b", msg, who, f"ans-{who}")
        self.answers.setdefault(("#b", msg), who)

    @rule(to=st.lists(st.sampled_from(sorted(HUMANS)), min_size=1, max_size=2, unique=True))
    def addressed(self, to: list[str]) -> None:
        """m2 of #a is addressed to some (m1 of #a stays open for anyone)."""
        self.floor.heard("#a", "m2", tuple(to))
        self.addressees[("#a", "m2")] = tuple(to)

    @rule(who=st.sampled_from(sorted(HUMANS)))
    def disconnect(self, who: str) -> None:
        expected = self.live(who=who)
        rels = self.floor.disconnected(who)
        self.released(rels, "disconnected")
        assert len(rels) == len(expected)
        assert not self.floor.holds(who)

    @invariant()
    def holder_is_least_live_claim(self) -> None:
        for channel in CHANNELS:
            for msg in MESSAGES:
                live = self.live((channel, msg))
                held = self.floor.holder(channel, msg)
                if not live:
                    assert held is None
                    assert self.floor.timer_key(channel, msg) not in self.timers
                    continue
                best = min(live, key=Rec.rank)
                assert held is not None
                assert (held.holder, held.started_at, held.human) == (
                    best.who,
                    best.started_at,
                    best.human,
                )
                assert self.timers.due_at(self.floor.timer_key(channel, msg)) == best.expires_at
        assert len(self.floor) == len(self.live())

    @invariant()
    def every_lost_claim_heard_exactly_once(self) -> None:
        for r in self.recs:
            assert r.events == (0 if r.ended is None else 1)

    def teardown(self) -> None:
        # end everything: then every claim, the final holders' too, heard exactly once
        for who in HUMANS:
            self.disconnect(who)
        assert len(self.floor) == 0 and len(self.timers) == 0
        assert all(r.events == 1 for r in self.recs)


TestFloorModel = FloorModel.TestCase
TestFloorModel.settings = settings(max_examples=examples(100), deadline=None)
