"""How long a store waits before trying a failed commit again."""

from __future__ import annotations

from collections.abc import Iterator

RETRY_FIRST_S = 0.05
"""The pause after a commit's first failure."""
RETRY_MAX_S = 5.0
"""Longest wait between two tries of a failed commit (nothing is acknowledged meanwhile)."""


def retry_pauses() -> Iterator[float]:
    """The pauses between the tries of one failed commit: doubling, at most ``RETRY_MAX_S``."""
    pause = RETRY_FIRST_S
    while True:
        yield pause
        pause = min(pause * 2, RETRY_MAX_S)
