"""CSMA timing (document 001, "csma-coordination"): the random delay before answering a channel
message, weighted by the agent's skills, and the jittered period of idle nudges.

Pure functions over an injected :class:`random.Random`, so tests draw exactly what an agent
would draw.

Skill weighting: the message's *topic* is its hashtags and its words; a skill tag that appears
in it (``python`` in "#python question", ``machine-learning`` in "any machine learning tips?")
is an overlap. With ``[lo, hi]`` the configured range (default 2000–8000 ms):

- overlap → the high-relevance band ``[lo, lo + (hi - lo) / 3]`` (2–4 s by default);
- skills but no overlap → the low-relevance band ``[lo + (hi - lo) / 2, hi]`` (5–8 s);
- no skills → uniform over ``[lo, hi]``.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable, Sequence
from typing import Final

_WORD: Final = re.compile(r"[a-z0-9][a-z0-9_+.-]*[a-z0-9+]|[a-z0-9]")
_HASHTAG: Final = re.compile(r"(?<![\w#])#([A-Za-z0-9][\w-]*)")
_SEP: Final = re.compile(r"[\s_-]+")


def normalize_skill(tag: str) -> str:
    """``"Machine_Learning "`` → ``"machine-learning"`` (lower case, one ``-`` between words)."""
    return _SEP.sub("-", tag.strip().lower().lstrip("#")).strip("-")


def topic_tags(text: str) -> frozenset[str]:
    """The message's topic: its hashtags and words, lower case (``#ML`` → ``ml``)."""
    lowered = text.lower()
    tags = {normalize_skill(h) for h in _HASHTAG.findall(text)}
    tags.update(w.strip(".") for w in _WORD.findall(lowered))
    return frozenset(t for t in tags if t)


def skill_overlap(skills: Iterable[str], text: str) -> frozenset[str]:
    """The skills that appear in the message's topic (multi-word skills as a phrase)."""
    tags = topic_tags(text)
    flat = " " + " ".join(_WORD.findall(text.lower().replace("#", " "))) + " "
    found: set[str] = set()
    for raw in skills:
        skill = normalize_skill(raw)
        if not skill:
            continue
        if skill in tags or (" " + skill.replace("-", " ") + " ") in flat:
            found.add(skill)
    return frozenset(found)


def delay_band(lo: float, hi: float, skills: Sequence[str], text: str) -> tuple[float, float]:
    """The ``[low, high]`` milliseconds the CSMA delay for ``text`` is drawn from."""
    if hi < lo:
        raise ValueError(f"the CSMA range is empty: min {lo} > max {hi}")
    if not skills:
        return lo, hi
    span = hi - lo
    if skill_overlap(skills, text):
        return lo, lo + span / 3
    return lo + span / 2, hi


def csma_delay_ms(
    rng: random.Random, lo: float, hi: float, skills: Sequence[str] = (), text: str = ""
) -> float:
    """A CSMA delay in milliseconds: uniform in the band :func:`delay_band` picks."""
    low, high = delay_band(lo, hi, skills, text)
    return low if high <= low else rng.uniform(low, high)


def jittered(period: float, percent: float, rng: random.Random) -> float:
    """``period`` moved by up to ``±percent`` of itself (0.5: anywhere in 50–150 %)."""
    if period < 0:
        raise ValueError(f"period must be >= 0, got {period}")
    if not 0 <= percent < 1:
        raise ValueError(f"jitter percent must be in [0, 1), got {percent}")
    return period * (1 + rng.uniform(-percent, percent))


__all__ = [
    "csma_delay_ms",
    "delay_band",
    "jittered",
    "normalize_skill",
    "skill_overlap",
    "topic_tags",
]
