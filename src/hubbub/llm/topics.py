"""What the offline model knows of topics: which skill a message is about.

A real model knows that "plan dinner" is about cooking; the offline model knows it from a
small vocabulary per skill (:data:`TOPICS`). A skill it has no vocabulary for is matched as a
word of the message (``python`` in "a python question"), plurals folded (``trains`` is
``train``). Arithmetic (``12*7``, ``3 plus 4``) is about ``math``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final

_WORD: Final = re.compile(r"[a-z][a-z0-9+#]*")


def _vocabulary(text: str) -> frozenset[str]:
    return frozenset(text.split())


TOPICS: Final[dict[str, frozenset[str]]] = {
    "math": _vocabulary(
        "math maths mathematics arithmetic sum addition subtract multiply multiplication "
        "divide division calculate calculation compute equation number percent percentage "
        "algebra average square root fraction"
    ),
    "cooking": _vocabulary(
        "cook cooking dinner lunch breakfast supper meal recipe food bake baking oven kitchen "
        "dish menu ingredient soup bread pasta dessert vegetarian vegan eat"
    ),
    "travel": _vocabulary(
        "travel trip train flight fly hotel journey ticket station airport holiday vacation "
        "itinerary railway rail route visit tourist luggage"
    ),
    "code": _vocabulary(
        "code coding program programming python javascript typescript rust bug debug function "
        "script compile compiler git api refactor software library exception stacktrace regex"
    ),
}
"""The words that put a message in a skill's topic (singular, lower case)."""

SKILL_ALIASES: Final[dict[str, str]] = {
    "maths": "math",
    "mathematics": "math",
    "arithmetic": "math",
    "cook": "cooking",
    "food": "cooking",
    "recipes": "cooking",
    "coding": "code",
    "programming": "code",
    "software": "code",
}


def _singular(word: str) -> str:
    if len(word) > 3 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def words(text: str) -> frozenset[str]:
    """The words of ``text``, lower case, plurals folded."""
    return frozenset(_singular(w) for w in _WORD.findall(text.lower()))


def skill_topic(skill: str) -> frozenset[str]:
    """The words that make a message about ``skill`` (its vocabulary, or the skill itself)."""
    tag = skill.strip().lower().lstrip("#")
    key = SKILL_ALIASES.get(tag, tag)
    vocabulary = TOPICS.get(key, frozenset())
    return frozenset(_singular(w) for w in (*vocabulary, tag, key))


def skills_covering(text: str, skills: Iterable[str], *, arithmetic: bool = False) -> list[str]:
    """The ``skills`` whose topic ``text`` is about (``arithmetic``: the text holds a sum,
    which is about ``math``), in the order given."""
    said = words(text)
    out: list[str] = []
    for skill in skills:
        topic = skill_topic(skill)
        if said & topic or (arithmetic and "math" in topic):
            out.append(skill)
    return out


__all__ = ["SKILL_ALIASES", "TOPICS", "skill_topic", "skills_covering", "words"]
