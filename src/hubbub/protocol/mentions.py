"""The one mention rule: which participants a chat text mentions.

A mention is ``@`` followed by a participant's id or display name, in any case, standing as a
word of its own: the ``@`` does not follow a letter, digit, ``_``, ``.``, ``-`` or another
``@`` (so ``x@maths.org`` mentions nobody), and the handle is not followed by a letter, digit,
``_``, ``-`` or ``.`` plus a letter (``@maths.`` at the end of a sentence mentions maths,
``@maths.org`` does not). ``@everyone`` or ``@someone-unknown`` mention nobody: only the
participants passed in count.

The gateway (sleep buffering treats a mention as a DM), the SDK's response policy (addressed
means addressed), ``hubbub chat`` (mentioned ids go in ``to``) and the web chat (a JS port held
equal by a parity test) all use this rule.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from functools import lru_cache

_BEFORE = r"(?<![\w.@-])"
_AFTER = r"(?![\w-]|\.\w)"


@lru_cache(maxsize=4096)
def _pattern(handle: str) -> re.Pattern[str]:
    """The compiled mention pattern of one handle (an id or a display name)."""
    return re.compile(_BEFORE + "@" + re.escape(handle) + _AFTER, re.IGNORECASE)


def mention_of(text: str, handles: Iterable[str]) -> str | None:
    """The first place in ``text`` that mentions one of ``handles`` (one participant's id and
    display name), as written (``@Maths``); ``None`` when none does."""
    if "@" not in text:
        return None
    lowered = text.lower()
    first: re.Match[str] | None = None
    for handle in handles:
        if not handle or "@" + handle.lower() not in lowered:
            continue
        m = _pattern(handle).search(text)
        if m is not None and (first is None or m.start() < first.start()):
            first = m
    return None if first is None else first.group(0)


def mentioned(
    text: str, participants: Iterable[str], names: Mapping[str, str] | None = None
) -> list[str]:
    """The ids of ``participants`` that ``text`` mentions (by ``@id``, or ``@name`` where
    ``names`` maps an id to its display name), in the order of their first mention."""
    if "@" not in text:
        return []
    names = names or {}
    found: list[tuple[int, str]] = []
    lowered = text.lower()
    for pid in dict.fromkeys(participants):
        best: int | None = None
        for handle in (pid, names.get(pid, "")):
            if not handle or "@" + handle.lower() not in lowered:
                continue
            m = _pattern(handle).search(text)
            if m is not None and (best is None or m.start() < best):
                best = m.start()
        if best is not None:
            found.append((best, pid))
    return [pid for _, pid in sorted(found)]


__all__ = ["mention_of", "mentioned"]
