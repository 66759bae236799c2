"""CSMA timing (document 001, "csma-coordination"): the random delay before answering a channel
message, ranked by how well the agent suits it, and the jittered period of idle nudges.

Pure functions over an injected :class:`random.Random`, so tests draw exactly what an agent
would draw.

**Ranking.** A message's *topics* (:func:`message_topics`) are the skills whose vocabulary it
uses (the vocabularies the offline classifier judges by, :mod:`hubbub.llm.topics`: "what is
6*7?" is about ``math``, "plan dinner" about ``cooking``), the agent's own skill tags it
names (``python`` in "#python question", ``machine-learning`` in "any machine learning
tips?"). The agent's *coverage* is the share of those topics its skills cover; its *score*
is coverage times the classifier's confidence (1 when unknown). With ``[lo, hi]`` the
configured range (default 2000–8000 ms), ``span = hi - lo`` and ``w = span / 6``:

- score > 0 → a band ``w`` wide starting at ``lo + span * (1 - score) / 2``: covering all of
  a question at confidence 0.9 draws from 2.3–3.3 s, half of it from 3.65–4.65 s, so the
  agent that covers the most (and is surest) usually claims first; equal ones share a band
  and the floor settles the tie;
- skills but no topic covered → the low-relevance band ``[lo + span / 2, hi]`` (5–8 s);
- no skills → uniform over ``[lo, hi]``.

**Continuity** (``first``): the agent that answered this asker last, within the agent's
``continuity_s``, gets ``[lo, lo + w]`` (the first right to claim); every other agent's band
moves ``w`` later (capped at ``hi``), so the follow-up goes to who answered before.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable, Sequence
from typing import Final

from hubbub.llm.offline import expressions
from hubbub.llm.topics import SKILL_ALIASES, TOPICS, skill_topic, words

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


_VOCABULARIES: Final = {key: skill_topic(key) for key in TOPICS}


def topic_key(skill: str) -> str:
    """The topic a skill tag stands for: ``Maths`` → ``math``, a word of a known vocabulary
    → that topic (``python`` → ``code``), any other tag → itself (``#Big_Data`` →
    ``big-data``)."""
    tag = normalize_skill(skill)
    tag = SKILL_ALIASES.get(tag, tag)
    if tag in TOPICS:
        return tag
    for key, vocab in _VOCABULARIES.items():
        if tag in vocab:
            return key
    return tag


def message_topics(text: str, skills: Iterable[str] = ()) -> frozenset[str]:
    """The topics ``text`` is about: every known vocabulary it uses (arithmetic is ``math``),
    and each of ``skills`` it names or whose vocabulary it uses (as their :func:`topic_key`)."""
    said = words(text)
    found = {key for key, vocab in _VOCABULARIES.items() if said & vocab}
    if expressions(text):
        found.add("math")
    skills = list(skills)
    for skill in skills:
        key = topic_key(skill)
        if key and said & skill_topic(skill):
            found.add(key)
    found.update(topic_key(s) for s in skill_overlap(skills, text))
    return frozenset(found)


def coverage(skills: Sequence[str], text: str) -> float:
    """The share of ``text``'s topics that ``skills`` cover (0 when it has none they know)."""
    topics = message_topics(text, skills)
    if not topics:
        return 0.0
    mine = {topic_key(s) for s in skills} & topics
    return len(mine) / len(topics)


def delay_band(
    lo: float,
    hi: float,
    skills: Sequence[str],
    text: str,
    confidence: float | None = None,
    first: bool | None = None,
) -> tuple[float, float]:
    """The ``[low, high]`` milliseconds the CSMA delay for ``text`` is drawn from: ranked by
    coverage times ``confidence``; ``first``: True when this agent answered the asker last
    (the first right to claim), False when another agent did (defer), None when neither."""
    if hi < lo:
        raise ValueError(f"the CSMA range is empty: min {lo} > max {hi}")
    span = hi - lo
    width = span / 6
    if first:
        return lo, lo + width
    if not skills:
        low, high = lo, hi
    else:
        score = coverage(skills, text) * (1.0 if confidence is None else confidence)
        if score > 0:
            low = lo + span * (1 - min(score, 1.0)) / 2
            high = low + width
        else:
            low, high = lo + span / 2, hi
    if first is False:
        low, high = min(low + width, hi), min(high + width, hi)
    return low, high


def csma_delay_ms(
    rng: random.Random,
    lo: float,
    hi: float,
    skills: Sequence[str] = (),
    text: str = "",
    confidence: float | None = None,
    first: bool | None = None,
) -> float:
    """A CSMA delay in milliseconds: uniform in the band :func:`delay_band` picks."""
    low, high = delay_band(lo, hi, skills, text, confidence, first)
    return low if high <= low else rng.uniform(low, high)


def jittered(period: float, percent: float, rng: random.Random) -> float:
    """``period`` moved by up to ``±percent`` of itself (0.5: anywhere in 50–150 %)."""
    if period < 0:
        raise ValueError(f"period must be >= 0, got {period}")
    if not 0 <= percent < 1:
        raise ValueError(f"jitter percent must be in [0, 1), got {percent}")
    return period * (1 + rng.uniform(-percent, percent))


__all__ = [
    "coverage",
    "csma_delay_ms",
    "delay_band",
    "jittered",
    "message_topics",
    "normalize_skill",
    "skill_overlap",
    "topic_key",
    "topic_tags",
]
