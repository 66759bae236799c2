"""Suggestions for a misspelt name (one rule for every config: the agent's, the space's)."""

from __future__ import annotations

import difflib
from collections.abc import Sequence


def did_you_mean(key: str, known: Sequence[str]) -> str:
    """`` (did you mean 'x'?)`` for the known key closest to ``key``, else the known keys."""
    close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else f" (known keys: {', '.join(known)})"
