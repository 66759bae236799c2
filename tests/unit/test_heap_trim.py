"""The heap is trimmed once when a busy spell ends, never under steady traffic."""

from __future__ import annotations

import asyncio

from hubbub.server.heap import HeapTrimmer, QuietTrim
from hubbub.server.state.metrics import Metrics


def test_a_trim_follows_each_busy_spell_once_and_never_steady_traffic() -> None:
    q = QuietTrim()
    looks = [(0, 0), (0, 0)]  # nothing happened since the start: no trim
    looks += [(100, 5), (900, 5000), (900, 5000), (900, 5000)]  # joins, then quiet: one trim
    looks += [(1000 * i, 5000) for i in range(1, 6)]  # steady traffic: none
    looks += [(5000, 5000), (5000, 4000), (5000, 4000)]  # leaves, then quiet: one more
    assert [q.due(*look) for look in looks] == [
        *[False, False],
        *[False, False, True, False],
        *[False] * 5,
        *[True, False, True],
    ]


def test_the_gateway_trims_after_its_connections_settle() -> None:
    """Each look is the trimmer's timer firing (run here one after another, no waiting)."""

    async def run() -> int:
        trims: list[int] = []
        metrics = Metrics()
        trimmer = HeapTrimmer(metrics, trim=lambda: trims.append(1))
        trimmer.start()
        for change in (None, {"mew": 3}, None, None):
            if change:
                metrics.connections.update(change)
            trimmer._look()
        trimmer.stop()
        return len(trims)

    assert asyncio.run(run()) == 1
