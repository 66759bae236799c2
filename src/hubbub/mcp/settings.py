"""How ``listen`` waits: the settle window, the jittered nudge, and the longest a call may take.

Every MCP client gives up on a request after some time: 60 s for the TypeScript SDK, the
Inspector and Codex; less for some agent frameworks. A ``listen`` must answer before that,
so its longest wait — nudge timeout plus jitter, then the settle window — stays under
:data:`DEFAULT_MAX_LISTEN_S` (45 s) by default, and a batch written after the client most
likely gave up (:attr:`ListenSettings.client_timeout_s`) is offered again by the next
``listen`` (docs/mcp.md, "Timeouts").
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

DEFAULT_SETTLE_MS = 5000
"""How long a burst may take to finish (agentchat's ``AGENTCHAT_SETTLE_MS``)."""
DEFAULT_NUDGE_S = 30.0
"""How long ``listen`` waits for traffic before it returns ``nudge: true``."""
DEFAULT_JITTER = 0.2
"""The nudge timeout varies by up to ±20 % (agentchat's ``AGENTCHAT_JITTER_PERCENT``)."""
DEFAULT_MAX_LISTEN_S = 45.0
"""The longest a ``listen`` takes, wait and settle window together: under the 60 s request
timeout of the TypeScript SDK, the Inspector and Codex."""
DEFAULT_CLIENT_TIMEOUT_S = 60.0
"""When a client most likely gave up on a request: a batch written later is offered again."""
PROGRESS_EVERY_S = 10.0
"""How often a waiting ``listen`` sends a progress notification."""


@dataclass(frozen=True, slots=True)
class ListenSettings:
    """The settle window, the nudge timeout and its jitter, the longest listen, the client's
    likely request timeout (all in seconds) and the progress tick.

    ``random`` is injected (a ``random.Random().random``), so tests fix the jitter.
    """

    settle_s: float = DEFAULT_SETTLE_MS / 1000
    nudge_s: float = DEFAULT_NUDGE_S
    jitter: float = DEFAULT_JITTER
    progress_s: float = PROGRESS_EVERY_S
    max_listen_s: float = DEFAULT_MAX_LISTEN_S
    client_timeout_s: float = DEFAULT_CLIENT_TIMEOUT_S
    random: Callable[[], float] = field(default=random.random, compare=False)

    def __post_init__(self) -> None:
        if self.settle_s < 0 or self.nudge_s <= 0 or self.progress_s <= 0:
            raise ValueError(
                "listen settings: settle must be >= 0 and the nudge timeout and progress "
                "interval > 0 seconds"
            )
        if not 0 <= self.jitter < 1:
            raise ValueError("listen settings: jitter is a fraction in [0, 1), e.g. 0.2")
        if self.max_listen_s <= self.settle_s:
            raise ValueError(
                f"listen settings: the longest listen ({self.max_listen_s:g}s, "
                "HUBBUB_MCP_MAX_LISTEN_S) must be longer than the settle window "
                f"({self.settle_s:g}s, HUBBUB_MCP_SETTLE_MS)"
            )
        if self.client_timeout_s <= 0:
            raise ValueError("listen settings: the client timeout must be > 0 seconds")

    @property
    def longest_wait_s(self) -> float:
        """The longest a listen waits for traffic (the settle window comes on top)."""
        return self.max_listen_s - self.settle_s

    def nudge_after(self, timeout_s: float | None, limit_s: float | None = None) -> float:
        """How long this listen waits for traffic: ``timeout_s`` (or the default) ± jitter,
        at most :attr:`longest_wait_s` (and ``limit_s``)."""
        base = self.nudge_s if timeout_s is None else max(timeout_s, 0.0)
        wait = base * (1 + self.jitter * (2 * self.random() - 1))
        longest = self.longest_wait_s if limit_s is None else min(self.longest_wait_s, limit_s)
        return min(wait, max(longest, 0.0))

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> ListenSettings:
        """Settings from ``HUBBUB_MCP_SETTLE_MS`` (or ``AGENTCHAT_SETTLE_MS``),
        ``HUBBUB_MCP_NUDGE_S``, ``HUBBUB_MCP_JITTER`` (or ``AGENTCHAT_JITTER_PERCENT``),
        ``HUBBUB_MCP_MAX_LISTEN_S``, ``HUBBUB_MCP_CLIENT_TIMEOUT_S`` and
        ``HUBBUB_MCP_PROGRESS_S``; defaults where unset."""
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
            max_listen_s=number("HUBBUB_MCP_MAX_LISTEN_S", default=DEFAULT_MAX_LISTEN_S),
            client_timeout_s=number(
                "HUBBUB_MCP_CLIENT_TIMEOUT_S", default=DEFAULT_CLIENT_TIMEOUT_S
            ),
        )
