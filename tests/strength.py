"""How hard the property tests try: full strength in ``make test``, a tenth in the fast lane.

The hypothesis profile comes from ``HYPOTHESIS_PROFILE`` (tests/conftest.py registers
``hubbub``, the default, and ``fast``, which ``make test-fast`` selects). A property that asks
for more examples than the default names its number at full strength through
:func:`examples`, so the fast profile scales it down instead of being overridden by it.
"""

from __future__ import annotations

from typing import Final

from hypothesis import settings

FULL_EXAMPLES: Final = 100
"""``max_examples`` of the full-strength profile (hypothesis' own default)."""


def examples(n: int) -> int:
    """``n`` examples at full strength, scaled to the loaded profile (at least 1)."""
    return max(1, n * settings().max_examples // FULL_EXAMPLES)
