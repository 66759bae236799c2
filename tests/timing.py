"""One time unit for every wait in the tests, and one way to wait for a condition.

Every timeout under tests/ is a multiple of :data:`UNIT` (seconds). ``HUBBUB_TEST_UNIT=3``
triples them all on a slow machine; nothing else changes. A timeout is how long a test waits
for something that must happen, never a pause before an assertion: a condition that must come
true is awaited with :func:`until`; something that must *not* happen is asserted after a
barrier that proves it would have happened by then (``WsClient.silent``: the gateway
settles, then a fence on the connection).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from typing import Final

UNIT: Final = float(os.environ.get("HUBBUB_TEST_UNIT", "1"))
"""The test time unit, in seconds."""

WAIT: Final = 5 * UNIT
"""A reply on a loopback socket, or a state an in-process gateway reaches."""

SLOW_WAIT: Final = 20 * UNIT
"""Something a browser shows, a process starts or a cluster node learns."""

POLL: Final = 0.005
"""How often :func:`until` looks again (a condition over state, not one event)."""


async def until(
    condition: Callable[[], object], timeout: float = WAIT, what: str = "the condition"
) -> None:
    """Return once ``condition()`` is true; fail naming ``what`` after ``timeout`` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        if loop.time() >= deadline:
            raise AssertionError(f"{what} did not hold within {timeout:g}s")
        await asyncio.sleep(POLL)
