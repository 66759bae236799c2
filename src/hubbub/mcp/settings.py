"""How ``listen`` waits: document 001's settle window and the jittered nudge timeout."""

from __future__ import annotations

import os
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

DEFAULT_SETTLE_MS = 5000
"""Document 001's ``AGENTCHAT_SETTLE_MS``: how long a burst may take to finish."""
DEFAULT_NUDGE_S = 60.0
"""How long ``listen`` waits for traffic before it returns ``nudge: true``."""
DEFAULT_JITTER = 0.5
"""Document 001's ``AGENTCHAT_JITTER_PERCENT``: the nudge timeout varies by up to ±50 %."""
MAX_LISTEN_S = 600.0
"""The longest ``timeout_s`` a listen may ask for."""
PROGRESS_EVERY_S = 10.0
"""How often a waiting ``listen`` sends a progress notification."""


@dataclass(frozen=True, slots=True)
class ListenSettings:
    """The settle window, the nudge timeout and its jitter (seconds), and the progress tick.

    ``random`` is injected (a ``random.Random().random``), so tests fix the jitter.
    """

    settle_s: float = DEFAULT_SETTLE_MS / 1000
    nudge_s: float = DEFAULT_NUDGE_S
    jitter: float = DEFAULT_JITTER
    progress_s: float = PROGRESS_EVERY_S
    random: Callable[[], float] = field(default=random.random, compare=False)

    def __post_init__(self) -> None:
        if self.settle_s < 0 or self.nudge_s <= 0 or self.progress_s <= 0:
            raise ValueError(
                "listen settings: settle must be >= 0 and the nudge timeout and progress "
                "interval > 0 seconds"
            )
        if not 0 <= self.jitter < 1:
            raise ValueError("listen settings: jitter is a fraction in [0, 1), e.g. 0.5")

    def nudge_after(self, timeout_s: float | None) -> float:
        """How long this listen waits for traffic: ``timeout_s`` (or the default) ± jitter."""
        base = self.nudge_s if timeout_s is None else min(max(timeout_s, 0.0), MAX_LISTEN_S)
        return base * (1 + self.jitter * (2 * self.random() - 1))

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> ListenSettings:
        """Settings from ``HUBBUB_MCP_SETTLE_MS``, ``HUBBUB_MCP_NUDGE_S`` and
        ``HUBBUB_MCP_JITTER`` (document 001's ``AGENTCHAT_SETTLE_MS`` and
        ``AGENTCHAT_JITTER_PERCENT`` are read too) and ``HUBBUB_MCP_PROGRESS_S``; defaults
        where unset."""
        env = os.environ if env is None else env

        def number(*names: str, default: float) -> float:
            for name in names:
                raw = env.get(name)
                if raw:
                    try:
                        return float(raw)
                    except ValueError:
                        raise ValueError(f"{name}={raw!r} is not a number") from None
            return default

        return cls(
            settle_s=number(
                "HUBBUB_MCP_SETTLE_MS", "AGENTCHAT_SETTLE_MS", default=DEFAULT_SETTLE_MS
            )
            / 1000,
            nudge_s=number("HUBBUB_MCP_NUDGE_S", default=DEFAULT_NUDGE_S),
            jitter=number("HUBBUB_MCP_JITTER", "AGENTCHAT_JITTER_PERCENT", default=DEFAULT_JITTER),
            progress_s=number("HUBBUB_MCP_PROGRESS_S", default=PROGRESS_EVERY_S),
        )
