"""The sans-I/O floor coordinator, with an injected clock: CSMA delays, skips, claims, yields,
the settle window and the exemptions, as hypothesis properties and unit tests."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hubbub.protocol.ids import SERVER_ID
from hubbub.sdk.floor import (
    Coordination,
    FloorCoordinator,
    FloorSettings,
    HumanPolicy,
    Reply,
    Stage,
    exemption,
    uses_claims,
    uses_csma,
)
from tests.strength import examples

PROPERTY = settings(max_examples=examples(200), deadline=None)
MODES: list[Coordination] = ["both", "csma", "claims", "none"]
ME = "me"


class Clock:
    """A manual clock in Unix milliseconds."""

    def __init__(self, now: float = 1_700_000_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, ms: float) -> None:
        self.now += ms


def coordinator(
    mode: Coordination = "both", seed: int = 0, clock: Clock | None = None, **settings_: object
) -> tuple[FloorCoordinator, Clock]:
    clock = clock or Clock()
    fs = FloorSettings(coordination=mode, **settings_)  # type: ignore[arg-type]
    return FloorCoordinator(ME, fs, clock=clock, rng=random.Random(seed)), clock


# ---------------------------------------------------------------------- CSMA delay


@PROPERTY
@given(
    mode=st.sampled_from(MODES),
    lo=st.integers(0, 10_000),
    span=st.integers(0, 10_000),
    skilled=st.booleans(),
    relevant=st.booleans(),
    seed=st.integers(0, 2**32),
)
def test_the_delay_is_within_the_configured_bounds_and_skill_bands(
    mode: Coordination, lo: int, span: int, skilled: bool, relevant: bool, seed: int
) -> None:
    skills = ("python",) if skilled else ()
    floor, _ = coordinator(mode, seed, csma_min_ms=lo, csma_max_ms=lo + span, skills=skills)
    text = "a #python question" if relevant else "a cooking question"
    step = floor.open("m1", "#general", text)
    assert step.action == "wait"
    if not uses_csma(mode):
        assert step.delay_ms == 0
        return
    assert lo <= step.delay_ms <= lo + span
    if skilled and relevant:  # covers the whole topic: the first sixth of the range
        assert step.delay_ms <= lo + span / 6 + 1e-9
    elif skilled:
        assert step.delay_ms >= lo + span / 2


def test_default_delays_are_two_to_eight_seconds_and_spread() -> None:
    floor, clock = coordinator(seed=3)
    delays = []
    for i in range(500):
        step = floor.open(f"m{i}", f"#c{i}", "question?")
        delays.append(step.delay_ms)
        clock.advance(10_000)
    assert min(delays) >= 2000 and max(delays) <= 8000
    assert min(delays) < 2100 and max(delays) > 7900


def said(who: str, text: str = "an answer", msg_id: str | None = None) -> Reply:
    """A chat by ``who`` (its id made up from the two unless given)."""
    return Reply(msg_id or f"{who}:{text}", who, text)


# ---------------------------------------------------------------------- skip during the delay

events = st.lists(
    st.tuples(
        st.sampled_from(["claim", "reply", "yield", "other-claim"]),
        st.sampled_from(["a1", "a2", "zz", "human"]),
        st.integers(-5_000, 5_000),
    ),
    max_size=6,
)


@PROPERTY
@given(mode=st.sampled_from(["both", "csma", "claims"]), seen=events, seed=st.integers(0, 999))
def test_only_a_claim_skips_during_the_delay_answers_are_kept_for_the_judge(
    mode: Coordination, seen: list[tuple[str, str, int]], seed: int
) -> None:
    floor, clock = coordinator(mode, seed)
    floor.chat_seen("#general", said("asker", "q", "m1"), from_agent=False)
    step = floor.open("m1", "#general", "question?", sender="asker")
    key = step.batch.key  # type: ignore[union-attr]
    claimed = False
    repliers: list[str] = []
    for what, who, offset in seen:
        clock.advance(abs(offset) / 10)
        if what == "claim":
            floor.claim_seen("m1", who, int(clock() + offset), human=who == "human")
            claimed = True
        elif what == "other-claim":
            floor.claim_seen("m-other", who, int(clock() + offset))
        elif what == "reply":
            floor.reply_seen("m1", said(who, f"reply {len(repliers)}"))
            repliers.append(who)
        else:
            floor.yield_received("m1", who)
            claimed = True  # the gateway gave the message to someone
    due = floor.due(key)
    if claimed:
        assert due.action == "skip"
        assert floor.begin(key).action == "skip"
        return
    assert due.action == "proceed"  # an answer seen meanwhile never skips by itself
    begin = floor.begin(key)
    assert begin.action == ("claim" if uses_claims(mode) else "proceed")
    assert begin.started_at == int(clock())
    assert floor.should_send(key)
    covering = [r.who for r in floor.covering(key)]
    assert covering == (repliers if uses_csma(mode) else [])


def test_a_claim_between_due_and_begin_skips_the_turn() -> None:
    floor, clock = coordinator()
    key = floor.open("m1", "#general", "q").batch.key  # type: ignore[union-attr]
    assert floor.due(key).action == "proceed"
    assert floor.claim_seen("m1", "other", int(clock())).action == "skip"
    assert floor.begin(key).action == "skip"
    assert floor.batch(key).stage is Stage.SKIPPED  # type: ignore[union-attr]


def test_claims_seen_before_the_message_was_considered_skip_it_at_once() -> None:
    floor, clock = coordinator()
    floor.claim_seen("m1", "fast", int(clock()))  # the classifier was still thinking
    assert floor.open("m1", "#general", "q").action == "skip"
    floor.reply_seen("m2", said("fast"))  # an answer is only kept: the draft is judged later
    key = floor.open("m2", "#general", "q").batch.key  # type: ignore[union-attr]
    assert [r.who for r in floor.covering(key)] == ["fast"]
    claims_only, _ = coordinator("claims")
    claims_only.reply_seen("m3", said("fast"))  # answers only count with CSMA
    key = claims_only.open("m3", "#general", "q").batch.key  # type: ignore[union-attr]
    assert claims_only.covering(key) == []


def test_own_claims_and_replies_are_ignored() -> None:
    floor, clock = coordinator()
    floor.chat_seen("#general", said("asker", "q", "m1"), from_agent=False)
    key = floor.open("m1", "#general", "q").batch.key  # type: ignore[union-attr]
    assert floor.claim_seen("m1", ME, int(clock())).action == "none"
    floor.reply_seen("m1", said(ME))
    floor.chat_seen("#general", said(ME, "my own words"), from_agent=True)
    assert floor.due(key).action == "proceed"
    assert floor.covering(key) == []


def test_later_chats_from_agents_count_as_answers_without_a_correlation_id() -> None:
    """agentchat clients send no correlation_id: another agent's later chat in the channel is
    an answer to compare with; humans', earlier ones, other channels' and the askers' are not."""
    floor, _ = coordinator("csma")
    floor.chat_seen("#general", said("bot-a", "said before the question"), from_agent=True)
    floor.chat_seen("#general", said("asker", "question?", "m1"), from_agent=False)
    key = floor.open("m1", "#general", "question?", sender="asker").batch.key  # type: ignore[union-attr]
    floor.chat_seen("#general", said("bot-b", "the answer is 4"), from_agent=True)
    floor.chat_seen("#general", said("carol", "I think 5"), from_agent=False)  # a human
    floor.chat_seen("#other", said("bot-c", "elsewhere"), from_agent=True)
    floor.chat_seen("#general", said("asker", "also, why?"), from_agent=True)  # the asker
    correlated = said("bot-d", "4, because 2+2", "r1")
    floor.reply_seen("m1", correlated)
    floor.chat_seen("#general", correlated, from_agent=True)
    floor.chat_seen("#general", said("bot-b", "the answer is 4"), from_agent=True)  # again
    assert [(r.who, r.text) for r in floor.covering(key)] == [
        ("bot-b", "the answer is 4"),
        ("bot-d", "4, because 2+2"),
    ]


# ---------------------------------------------------------------------- after the claim

claims_after = st.lists(
    st.tuples(
        st.sampled_from(["a", "b", "me2", "zed"]),
        st.integers(-3_000, 3_000),
        st.booleans(),
    ),
    max_size=8,
)


@PROPERTY
@given(claims=claims_after, tie=st.booleans(), yielded=st.booleans(), seed=st.integers(0, 99))
def test_the_agent_continues_iff_its_claim_is_the_least_and_no_human_claimed(
    claims: list[tuple[str, int, bool]], tie: bool, yielded: bool, seed: int
) -> None:
    floor, clock = coordinator("both", seed)
    key = floor.open("m1", "#general", "q").batch.key  # type: ignore[union-attr]
    clock.advance(5_000)
    floor.due(key)
    begin = floor.begin(key)
    assert begin.action == "claim" and begin.started_at is not None
    ours = (begin.started_at, ME)
    seen: list[tuple[int, str]] = []
    human = False
    for who, offset, is_human in claims:
        started = begin.started_at if tie else begin.started_at + offset
        step = floor.claim_seen("m1", who, started, human=is_human)
        seen.append((started, who))
        human = human or is_human
        stage = floor.batch(key).stage  # type: ignore[union-attr]
        least = all(ours < other for other in seen)
        assert (stage is Stage.CLAIMED) == (least and not human)
        if step.action == "yield":
            assert step.winner == who
    if yielded:
        step = floor.yield_received("m1", "winner")
        if floor.batch(key).stage is Stage.YIELDED:  # type: ignore[union-attr]
            assert step.action in ("yield", "none")
        assert floor.batch(key).stage is Stage.YIELDED  # type: ignore[union-attr]
        assert not floor.should_send(key)
    least = all(ours < other for other in seen)
    continues = least and not human and not yielded
    assert (floor.batch(key).stage is Stage.CLAIMED) == continues  # type: ignore[union-attr]
    assert floor.should_send(key) == continues


def test_claims_on_other_messages_do_not_matter() -> None:
    floor, _ = coordinator()
    key = floor.open("m1", "#general", "q").batch.key  # type: ignore[union-attr]
    floor.claim_seen("m2", "early", 1)
    floor.yield_received("m2", "early")
    assert floor.due(key).action == "proceed"
    assert floor.begin(key).action == "claim"
    assert floor.claim_seen("m2", "earlier", 0).action == "none"
    assert floor.batch(key).stage is Stage.CLAIMED  # type: ignore[union-attr]


def test_csma_only_ignores_claims_after_starting_and_keeps_answers_for_the_judge() -> None:
    floor, _ = coordinator("csma")
    key = floor.open("m1", "#general", "q").batch.key  # type: ignore[union-attr]
    floor.due(key)
    begin = floor.begin(key)
    assert begin.action == "proceed"
    assert floor.claim_seen("m1", "a", 0).action == "none"
    assert floor.should_send(key) and floor.covering(key) == []
    floor.reply_seen("m1", said("a", "done"))
    assert floor.should_send(key)  # the model judges the draft against it (document 001)
    assert floor.covering(key) == [said("a", "done")]
    claims_only, _ = coordinator("claims")
    key = claims_only.open("m1", "#general", "q").batch.key  # type: ignore[union-attr]
    claims_only.due(key)
    claims_only.begin(key)
    claims_only.reply_seen("m1", said("a"))
    assert claims_only.should_send(key) and claims_only.covering(key) == []


def test_finish_forgets_the_batch() -> None:
    floor, _ = coordinator()
    key = floor.open("m1", "#general", "q").batch.key  # type: ignore[union-attr]
    assert [b.key for b in floor.pending()] == ["m1"]
    floor.finish(key)
    assert floor.batch(key) is None and floor.batch_of("m1") is None and not floor.pending()
    assert floor.due(key).action == "skip"
    assert floor.yield_received("m1", "x").action == "none"


def test_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="must not exceed"):
        FloorSettings(csma_min_ms=5, csma_max_ms=4)
    with pytest.raises(ValueError, match=">= 0"):
        FloorSettings(settle_ms=-1)
    with pytest.raises(ValueError, match="coordination"):
        FloorSettings(coordination="loud")  # type: ignore[arg-type]


# ---------------------------------------------------------------------- settle window


def test_messages_within_the_settle_window_join_the_waiting_batch() -> None:
    floor, clock = coordinator(csma_min_ms=4000, csma_max_ms=4000, settle_ms=3000)
    first = floor.open("m1", "#general", "q1")
    assert first.action == "wait" and first.delay_ms == 4000
    clock.advance(1000)
    assert floor.open("m2", "#general", "q2").action == "joined"
    assert floor.open("x1", "#other", "elsewhere").action == "wait"  # another channel
    clock.advance(2000)  # at the window's end: still in
    assert floor.open("m3", "#general", "q3").action == "joined"
    clock.advance(1)  # past the window, still before the delay ends: a new batch
    late = floor.open("m4", "#general", "q4")
    assert late.action == "wait" and late.batch.key == "m4"  # type: ignore[union-attr]
    clock.advance(1000)
    due = floor.due("m1")
    assert due.action == "proceed" and due.batch.messages == ["m1", "m2", "m3"]  # type: ignore[union-attr]
    begin = floor.begin("m1")
    assert begin.action == "claim" and begin.batch.messages == ["m1", "m2", "m3"]  # type: ignore[union-attr]
    # claims are per message: an earlier claim on one message of the batch takes only that
    # one; losing the last one yields the batch
    release = floor.claim_seen("m2", "a", int(clock()) - 1)
    assert (release.action, release.message, release.winner) == ("release", "m2", "a")
    assert release.batch.messages == ["m1", "m3"] and floor.batch_of("m2") is None  # type: ignore[union-attr]
    assert floor.yield_received("m1", "b").action == "release"
    assert floor.claim_seen("m3", "human", int(clock()) + 9, human=True).action == "yield"
    assert not floor.should_send("m1")


@PROPERTY
@given(
    taken=st.lists(st.sampled_from(["m1", "m2", "m3"]), max_size=4),
    when=st.sampled_from(["waiting", "ready", "claimed"]),
    how=st.sampled_from(["claim", "yield"]),
)
def test_a_batch_gives_up_only_the_messages_others_took(
    taken: list[str], when: str, how: str
) -> None:
    """Whatever others take, the batch keeps the rest, and is skipped or yielded exactly when
    nothing is left."""
    floor, clock = coordinator(csma_min_ms=100, csma_max_ms=100, settle_ms=100)
    floor.open("m1", "#general", "q1")
    floor.open("m2", "#general", "q2")
    floor.open("m3", "#general", "q3")
    if when != "waiting":
        clock.advance(100)
        assert floor.due("m1").action == "proceed"
    if when == "claimed":
        assert floor.begin("m1").action == "claim"
    for msg_id in taken:
        if how == "claim":
            floor.claim_seen(msg_id, "rival", int(clock()) - 1000)
        else:
            floor.yield_received(msg_id, "rival")
    batch = floor.batch("m1")
    assert batch is not None
    left = [m for m in ("m1", "m2", "m3") if m not in taken]
    if left:
        assert batch.messages == left and sorted(batch.released) == sorted(set(taken))
        assert floor.should_send("m1")
    else:
        assert batch.stage in (Stage.SKIPPED, Stage.YIELDED) and not floor.should_send("m1")


def test_the_settle_window_adds_no_latency() -> None:
    floor, clock = coordinator(csma_min_ms=1000, csma_max_ms=1000, settle_ms=5000)
    floor.open("m1", "#general", "q1")
    clock.advance(999)
    assert floor.open("m2", "#general", "q2").action == "joined"
    clock.advance(1)
    assert floor.due("m1").action == "proceed"  # at the CSMA deadline, not at 5 s
    assert floor.open("m3", "#general", "q3").action == "wait"  # the window closed with it
    no_csma, _ = coordinator("claims", settle_ms=5000)
    assert no_csma.open("m1", "#general", "q1").delay_ms == 0
    assert no_csma.due("m1").action == "proceed"
    assert no_csma.open("m2", "#general", "q2").action == "wait"


def test_a_dm_or_mention_cuts_the_settle_window_short() -> None:
    floor, clock = coordinator(csma_min_ms=4000, csma_max_ms=4000, settle_ms=5000)
    floor.open("m1", "#general", "q1")
    clock.advance(100)
    assert [b.key for b in floor.cut_settle()] == ["m1"]
    clock.advance(100)
    assert floor.open("m2", "#general", "q2").action == "wait"
    clock.advance(3800)
    assert floor.due("m1").batch.messages == ["m1"]  # type: ignore[union-attr]


@PROPERTY
@given(
    gaps=st.lists(st.integers(0, 3000), min_size=1, max_size=12),
    settle=st.integers(0, 6000),
    delay=st.integers(0, 8000),
)
def test_every_message_lands_in_exactly_one_batch_within_its_window(
    gaps: list[int], settle: int, delay: int
) -> None:
    floor, clock = coordinator(csma_min_ms=delay, csma_max_ms=delay, settle_ms=settle)
    batches: dict[str, list[str]] = {}
    for i, gap in enumerate(gaps):
        clock.advance(gap)
        for key in [b.key for b in floor.pending() if b.due_at <= clock()]:
            step = floor.due(key)
            batches[key] = list(step.batch.messages)  # type: ignore[union-attr]
        msg = f"m{i}"
        step = floor.open(msg, "#general", "q")
        batch = step.batch
        assert batch is not None
        assert clock() - batch.opened_at <= settle
        assert clock() < batch.due_at or batch.key == msg
    clock.advance(10_000)
    for b in floor.pending():
        batches[b.key] = list(floor.due(b.key).batch.messages)  # type: ignore[union-attr]
    flat = [m for msgs in batches.values() for m in msgs]
    assert sorted(flat) == sorted(f"m{i}" for i in range(len(gaps)))


# ---------------------------------------------------------------------- exemptions


@PROPERTY
@given(
    mode=st.sampled_from(MODES),
    channel=st.sampled_from([None, "#general"]),
    rule=st.sampled_from(["direct", "mention", "classifier"]),
    sender=st.sampled_from(["alice", "bot", SERVER_ID]),
    kind=st.sampled_from(["human", "agent", "service", None]),
    humans=st.sampled_from(["coordinate", "exempt"]),
)
def test_exempt_messages_are_exactly_the_documented_ones(
    mode: Coordination,
    channel: str | None,
    rule: str,
    sender: str,
    kind: str | None,
    humans: HumanPolicy,
) -> None:
    reason = exemption(
        mode,
        channel=channel,
        rule=rule,
        sender=sender,
        sender_kind=kind,
        humans=humans,
    )
    expected = (
        mode == "none"
        or channel is None
        or rule in ("direct", "mention")
        or sender == SERVER_ID
        or (humans == "exempt" and kind == "human")
    )
    assert (reason is not None) == expected


def test_the_askers_own_follow_up_is_not_an_answer() -> None:
    floor, _ = coordinator("csma")
    floor.reply_seen("m1", said("asker", "to be precise"))  # before the agent considered m1
    key = floor.open("m1", "#general", "q", sender="asker").batch.key  # type: ignore[union-attr]
    floor.reply_seen("m1", said("asker", "any news?"))
    assert floor.due(key).action == "proceed"
    floor.begin(key)
    assert floor.covering(key) == []
    floor.reply_seen("m1", said("helper"))
    assert [r.who for r in floor.covering(key)] == ["helper"]
