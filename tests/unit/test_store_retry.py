"""A failed commit is tried again after pauses that double up to five seconds."""

from __future__ import annotations

from itertools import islice

from hubbub.store.retry import RETRY_MAX_S, retry_pauses


def test_pauses_double_from_50_ms_up_to_five_seconds() -> None:
    pauses = list(islice(retry_pauses(), 10))
    assert pauses[:4] == [0.05, 0.1, 0.2, 0.4]
    assert max(pauses) == RETRY_MAX_S == 5.0
    assert pauses[-3:] == [5.0, 5.0, 5.0]
