"""Whether one capability list covers another: a grant never exceeds what the granter holds.

``covers(held, wanted)`` is True only when every envelope that ``wanted`` allows is allowed by
``held`` too. The check is **sound, not complete**: it never says "covered" wrongly, but it may
refuse an exotic grant that is in fact covered (a negation or regex wider than it can prove,
a pattern covered only by the union of several held entries). It reads patterns with the
matcher's own rules (:mod:`hubbub.protocol.capabilities`): a literal is covered when a held
pattern matches it; a glob when a held glob provably matches everything it matches (``**``
absorbs anything, ``*`` anything without ``/``); a negation or regex only by an identical
pattern or a pattern that matches everything.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

from hubbub.protocol.capabilities import glob_tokens, pattern_type, string_matcher

__all__ = ["covers", "uncovered"]

_MAX_GLOB_WORK: Final = 1_000_000
"""Largest (held tokens × wanted tokens) table a glob comparison builds; past it: not covered."""


def uncovered(
    held: Sequence[Mapping[str, Any]], wanted: Sequence[Mapping[str, Any]]
) -> list[Mapping[str, Any]]:
    """The entries of ``wanted`` that ``held`` does not cover (empty: all covered)."""
    return [entry for entry in wanted if not covers(held, entry)]


def covers(held: Sequence[Mapping[str, Any]], wanted: Mapping[str, Any]) -> bool:
    """Whether every envelope the capability ``wanted`` allows is allowed by ``held``."""
    payload = wanted.get("payload") or None
    for kind in _alternatives(wanted.get("kind")):
        if not any(
            any(_str_covers(h, kind) for h in _alternatives(entry.get("kind")))
            and _payload_covers(entry.get("payload") or None, payload)
            for entry in held
        ):
            return False
    return True


def _alternatives(kind: object) -> list[str]:
    if isinstance(kind, str):
        return [kind]
    if isinstance(kind, list | tuple):
        return [k for k in kind if isinstance(k, str)]
    return []


def _str_covers(held: str, wanted: str) -> bool:
    """Whether the string pattern ``held`` matches every value that ``wanted`` matches."""
    if held == wanted or _matches_everything(held):
        return True
    read = pattern_type(wanted)
    if read == "literal":
        return string_matcher(held)(wanted)
    if read == "glob" and pattern_type(held) in ("glob", "literal"):
        return _glob_covers(glob_tokens(held), glob_tokens(wanted))
    return False


def _matches_everything(pattern: str) -> bool:
    return pattern_type(pattern) == "glob" and set(glob_tokens(pattern)) == {"**"}


def _glob_covers(held: list[str], wanted: list[str]) -> bool:
    """Whether the glob ``held`` matches every string the glob ``wanted`` matches.

    ``cover[i][j]``: ``held[i:]`` matches everything ``wanted[j:]`` matches. A ``**`` of
    ``held`` may absorb any token of ``wanted``; a ``*`` any token that never yields ``/``.
    """
    n, m = len(held), len(wanted)
    if (n + 1) * (m + 1) > _MAX_GLOB_WORK:
        return False
    cover = [[False] * (m + 1) for _ in range(n + 1)]
    cover[n][m] = True
    for i in range(n - 1, -1, -1):
        for j in range(m, -1, -1):
            h = held[i]
            w = wanted[j] if j < m else None
            if h == "**":
                cover[i][j] = cover[i + 1][j] or (w is not None and cover[i][j + 1])
            elif h == "*":
                no_slash = w is not None and w not in ("**", "/")
                cover[i][j] = cover[i + 1][j] or (no_slash and cover[i][j + 1])
            elif h == "?":
                cover[i][j] = w is not None and w not in ("**", "*", "/") and cover[i + 1][j + 1]
            else:
                cover[i][j] = w == h and cover[i + 1][j + 1]
    return cover[0][0]


def _payload_covers(held: object, wanted: object) -> bool:
    """Whether the payload pattern ``held`` matches every payload ``wanted`` matches."""
    if held is None:
        return True
    if not isinstance(held, Mapping) or not isinstance(wanted, Mapping):
        return False
    return all(key in wanted and _value_covers(sub, wanted[key]) for key, sub in held.items())


def _value_covers(held: object, wanted: object) -> bool:
    """Whether the payload value pattern ``held`` matches every value ``wanted`` matches."""
    if _canonical(held) == _canonical(wanted):
        return True
    if isinstance(wanted, list | tuple):
        return all(_value_covers(held, item) for item in wanted)
    if isinstance(held, list | tuple):
        return any(_value_covers(item, wanted) for item in held)
    if isinstance(held, str):
        return isinstance(wanted, str) and _str_covers(held, wanted)
    if isinstance(held, Mapping):
        return _payload_covers(held, wanted)
    return False


def _canonical(value: object) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
