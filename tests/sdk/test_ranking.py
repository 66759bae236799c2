"""CSMA ranking: the band follows how much of a message's topics an agent covers (by the
classifier's topic vocabularies, not literal tags) and the classifier's confidence, so the
best-suited agent draws first; continuity gives the previous answerer the first right."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from hubbub.sdk.csma import coverage, csma_delay_ms, delay_band, message_topics, topic_key
from tests.strength import examples

PROPERTY = settings(max_examples=examples(300), deadline=None)
LO, HI = 2000, 8000
SPAN = HI - LO

QUESTIONS = {  # text → its topics
    "what is 6*7?": {"math"},
    "can someone calculate 12 plus 30?": {"math"},
    "who can help me plan dinner for 4 people?": {"cooking"},
    "are there trains to Lyon tomorrow?": {"travel"},
    "can someone write a python script to find train times?": {"code", "travel"},
    "any recipe for a vegan dinner I can cook on the train?": {"cooking", "travel"},
}
SKILL_SETS = [
    ("math",),
    ("cooking",),
    ("travel",),
    ("code",),
    ("travel", "code"),
    ("cooking", "travel"),
]


def test_a_skills_vocabulary_counts_not_only_its_tag() -> None:
    # the finding: "what is 6*7?" for skills [math] drew from the long band (5-8 s)
    assert message_topics("what is 6*7?", ["math"]) == {"math"}
    assert coverage(["math"], "what is 6*7?") == 1.0
    low, high = delay_band(LO, HI, ["math"], "what is 6*7?", 0.9)
    assert (low, high) == (2300, 3300)
    assert delay_band(LO, HI, ["cooking"], "what is 6*7?", 0.9) == (5000, 8000)


def test_topics_of_the_questions() -> None:
    for text, topics in QUESTIONS.items():
        assert message_topics(text) == topics, text


def test_skill_tags_map_to_their_topics() -> None:
    assert topic_key("Maths") == "math"
    assert topic_key("python") == "code"  # a word of the code vocabulary
    assert topic_key("#Big_Data") == "big-data"  # no vocabulary: the tag itself
    assert coverage(["big data"], "any big data tips?") == 1.0
    assert coverage(["kubernetes"], "what is 6*7?") == 0.0


def test_covering_both_topics_beats_covering_one() -> None:
    text = "can someone write a python script to find train times?"
    both = delay_band(LO, HI, ["travel", "code"], text, 0.9)
    one = delay_band(LO, HI, ["code"], text, 0.9)
    assert coverage(["travel", "code"], text) == 1.0 and coverage(["code"], text) == 0.5
    assert both[1] <= one[0]  # the best-suited agent's whole band comes first


@PROPERTY
@given(
    text=st.sampled_from(sorted(QUESTIONS)),
    best=st.sampled_from(SKILL_SETS),
    other=st.sampled_from(SKILL_SETS),
    confidence=st.floats(2 / 3, 1.0),
    seed=st.integers(0, 2**32),
)
def test_more_coverage_at_the_same_confidence_never_draws_later(
    text: str, best: tuple[str, ...], other: tuple[str, ...], confidence: float, seed: int
) -> None:
    mine, theirs = coverage(best, text), coverage(other, text)
    a = csma_delay_ms(random.Random(seed), LO, HI, best, text, confidence)
    b = csma_delay_ms(random.Random(seed + 1), LO, HI, other, text, confidence)
    if mine > theirs:
        assert a <= b  # disjoint bands: the better-covering agent always draws first
    assert LO <= a <= HI and LO <= b <= HI


@PROPERTY
@given(
    text=st.sampled_from(sorted(QUESTIONS)),
    skills=st.sampled_from(SKILL_SETS),
    c1=st.floats(0.0, 1.0),
    c2=st.floats(0.0, 1.0),
)
def test_a_surer_classifier_never_moves_the_band_later(
    text: str, skills: tuple[str, ...], c1: float, c2: float
) -> None:
    lo_conf, hi_conf = sorted((c1, c2))
    assert delay_band(LO, HI, skills, text, hi_conf) <= delay_band(LO, HI, skills, text, lo_conf)


@PROPERTY
@given(
    lo=st.integers(0, 10_000),
    span=st.integers(0, 10_000),
    text=st.sampled_from(sorted(QUESTIONS)),
    skills=st.sampled_from([(), *SKILL_SETS]),
    confidence=st.none() | st.floats(0.0, 1.0),
    seed=st.integers(0, 2**32),
)
def test_continuity_gives_the_previous_answerer_the_first_band(
    lo: int,
    span: int,
    text: str,
    skills: tuple[str, ...],
    confidence: float | None,
    seed: int,
) -> None:
    hi = lo + span
    first = delay_band(lo, hi, skills, text, confidence, first=True)
    deferred = delay_band(lo, hi, skills, text, confidence, first=False)
    assert first == (lo, lo + span / 6)
    assert first[1] <= deferred[0] <= deferred[1] <= hi  # every other agent draws after it
    for flag in (True, False, None):
        delay = csma_delay_ms(random.Random(seed), lo, hi, skills, text, confidence, flag)
        assert lo <= delay <= hi
