"""The mention rule: when a message's text mentions a participant, and whom it addresses.

One rule for every client and the gateway (DESIGN §1, "addressing"):

- a mention is ``@`` followed by a participant's id, or by its display name, compared without
  regard to case (``@Maths`` mentions ``maths``);
- it stands as a word of its own: the ``@`` does not follow a letter, digit or one of
  ``_ . - @`` (``bob@maths.org`` mentions nobody), and the name is not continued by a
  letter, digit, ``_`` or ``-``, nor by ``.`` and a letter or digit (``@maths.`` at the end
  of a sentence mentions ``maths``; ``@maths.org`` does not);
- a message *addresses* a participant when its ``to`` lists it or its text mentions it (and
  when it replies to the participant's message: :mod:`hubbub.protocol.addressing`, the whole
  rule, which also settles whose display name counts).

The functions are pure and keep no state beyond a bounded cache of compiled patterns.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from functools import lru_cache

MENTION_ID_RE = re.compile(r"(?<![\w.@-])@([A-Za-z0-9_.-]{1,32})")
"""An ``@id`` written in a text (group 1: the id as written; a trailing ``.`` is punctuation)."""

_BEFORE = r"(?<![\w.@-])@"
_AFTER = r"(?![\w-]|\.\w)"


@lru_cache(maxsize=4096)
def _pattern(name: str) -> re.Pattern[str]:
    return re.compile(_BEFORE + re.escape(name) + _AFTER, re.IGNORECASE)


def mentions(text: str, participant_id: str, display_name: str | None = None) -> bool:
    """Whether ``text`` mentions the participant by ``@id`` or ``@display name``."""
    if "@" not in text:
        return False
    for name in (participant_id, display_name):
        if name and _pattern(name).search(text) is not None:
            return True
    return False


def first_mention(text: str, handle: str) -> int:
    """Where ``text`` first mentions ``handle`` (an id or a display name) as ``@handle``: the
    index of its ``@``, -1 if nowhere."""
    if not handle or "@" not in text:
        return -1
    match = _pattern(handle).search(text)
    return -1 if match is None else match.start()


def mentioned_ids(text: str, known: Iterable[str]) -> list[str]:
    """The ids among ``known`` that ``text`` mentions, in the order first written, once each
    (as they are spelled in ``known``)."""
    if "@" not in text:
        return []
    by_lower = {pid.lower(): pid for pid in known}
    found: dict[str, None] = {}
    for match in MENTION_ID_RE.finditer(text):
        written = match.group(1)
        for candidate in (written, written.rstrip(".")):
            pid = by_lower.get(candidate.lower())
            if pid is not None and mentions(text, pid):
                found[pid] = None
                break
    return list(found)


def addresses(
    to: Sequence[str] | None, text: str, participant_id: str, display_name: str | None = None
) -> bool:
    """Whether a message with this ``to`` and ``text`` addresses the participant."""
    if to and participant_id in to:
        return True
    return mentions(text, participant_id, display_name)
