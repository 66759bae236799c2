"""The dialect registry: every wire dialect the gateway speaks, by name (one place to add one).

The gateway's handshake picks a dialect by its hello; everything after it (delivery, fan-out,
presence, metrics) iterates this registry or asks a dialect's properties, never its name.
"""

from __future__ import annotations

from typing import Final

from hubbub.protocol.agentchat import AgentchatDialect, is_agentchat_hello
from hubbub.protocol.dialect import Dialect
from hubbub.protocol.mew import MewDialect, is_mew_hello

MEW: Final = MewDialect()
AGENTCHAT: Final = AgentchatDialect()

DIALECTS: Final[dict[str, Dialect]] = {d.name: d for d in (MEW, AGENTCHAT)}
"""The codec of each dialect, by name."""

NATIVE: Final[Dialect] = MEW
"""The dialect of the canonical envelope (and of links between cluster nodes)."""


def dialect_of_hello(frame: dict[str, object]) -> Dialect | None:
    """The dialect a first frame selects, or None when it selects none."""
    if is_mew_hello(frame):
        return MEW
    if is_agentchat_hello(frame):
        return AGENTCHAT
    return None
