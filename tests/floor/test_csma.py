"""CSMA timing: the delay stays in the configured range and in its band; skill overlap; the
idle nudge jitter (the ranking itself: tests/sdk/test_ranking.py)."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hubbub.sdk.csma import (
    csma_delay_ms,
    delay_band,
    jittered,
    normalize_skill,
    skill_overlap,
    topic_tags,
)
from tests.strength import examples

PROPERTY = settings(max_examples=examples(200), deadline=None)
words = st.text(alphabet="abcdefghij", min_size=1, max_size=6)


def test_topic_tags_are_hashtags_and_words() -> None:
    tags = topic_tags("Any #Python tips for node.js and C++? #machine_learning")
    assert {"python", "node.js", "c++", "machine-learning", "tips", "any"} <= tags


def test_skill_overlap_finds_tags_hashtags_and_phrases() -> None:
    skills = ["python", "Machine Learning", "rust"]
    assert skill_overlap(skills, "a #python question") == {"python"}
    assert skill_overlap(skills, "any machine learning tips?") == {"machine-learning"}
    assert skill_overlap(skills, "#machine-learning") == {"machine-learning"}
    assert skill_overlap(skills, "what about cooking?") == frozenset()
    assert skill_overlap(["", "  "], "anything") == frozenset()
    assert normalize_skill(" #Big_Data ") == "big-data"


def test_the_bands_at_the_default_range() -> None:
    assert delay_band(2000, 8000, (), "anything") == (2000, 8000)
    assert delay_band(2000, 8000, ("python",), "#python help") == (2000, 3000)
    assert delay_band(2000, 8000, ("python",), "#python help", 0.9) == (2300, 3300)
    assert delay_band(2000, 8000, ("python",), "cooking help") == (5000, 8000)
    with pytest.raises(ValueError, match="empty"):
        delay_band(10, 5, (), "")


@PROPERTY
@given(
    lo=st.integers(0, 20_000),
    span=st.integers(0, 20_000),
    skills=st.lists(words, max_size=4),
    text=st.lists(words, max_size=8).map(" ".join),
    seed=st.integers(0, 2**32),
)
def test_the_delay_is_within_the_range_and_its_skill_band(
    lo: int, span: int, skills: list[str], text: str, seed: int
) -> None:
    hi = lo + span
    delay = csma_delay_ms(random.Random(seed), lo, hi, skills, text)
    assert lo <= delay <= hi
    if skills and any(s in text.split() for s in skills):  # it covers some of the topics
        assert delay <= lo + span * 2 / 3
    elif skills:
        assert delay >= lo + span / 2


@PROPERTY
@given(
    period=st.floats(0, 10_000, allow_nan=False),
    percent=st.floats(0, 0.99),
    seed=st.integers(0, 2**32),
)
def test_jitter_stays_within_the_percent(period: float, percent: float, seed: int) -> None:
    value = jittered(period, percent, random.Random(seed))
    assert period * (1 - percent) - 1e-9 <= value <= period * (1 + percent) + 1e-9


def test_jitter_spreads_idle_agents_apart() -> None:
    rng = random.Random(7)
    values = [jittered(60.0, 0.5, rng) for _ in range(1000)]
    assert min(values) >= 30 and max(values) <= 90
    assert min(values) < 35 and max(values) > 85  # the whole band is used
    per_second = Counter(int(v) for v in values)
    assert max(per_second.values()) < 40  # ~17 expected: idle agents do not wake together
    with pytest.raises(ValueError, match="jitter"):
        jittered(60.0, 1.0, rng)
