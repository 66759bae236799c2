"""Where ``listen`` stopped for a participant: the point a new MCP session resumes from.

An MCP session on ``/mcp`` lives in the gateway's process, so a gateway restart ends it; the
client's next session (a new ``Mcp-Session-Id``, the same participant) must go on where the
last ``listen`` left off. The desk writes a :class:`ListenCursor` each time ``listen``
returns messages — per channel, the last ``seq`` up to which everything was returned (or
was not for ``listen``), the same for the space's DM stream, and the history ``epoch`` those
numbers belong to — and the gateway keeps it in its store (``server/http/mcp_http.py``). The
next session's join frame carries it as its ``resume``: the gateway replays what came after,
and ``listen`` returns it once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hubbub.protocol.ids import DM_STREAM, is_channel


@dataclass(frozen=True, slots=True)
class ListenCursor:
    """The resume point of a participant's ``listen``: channel → last ``seq``, the DM
    stream's last ``seq``, and the history epoch they belong to."""

    epoch: str | None = None
    channels: dict[str, int] = field(default_factory=dict)
    dm: int | None = None

    def hello_fields(self) -> dict[str, object]:
        """The fields of a MEW join frame that resume from here: the channels to rejoin,
        their ``resume`` points (the DM stream's under ``@dm``) and the ``epoch``."""
        resume: dict[str, int] = dict(self.channels)
        if self.dm is not None:
            resume[DM_STREAM] = self.dm
        out: dict[str, object] = {"resume": resume}
        if self.channels:
            out["channels"] = list(self.channels)
        if self.epoch is not None:
            out["epoch"] = self.epoch
        return out

    def to_json(self) -> dict[str, Any]:
        """The record saved in the store."""
        return {"epoch": self.epoch, "channels": dict(self.channels), "dm": self.dm}

    @classmethod
    def from_json(cls, raw: Any) -> ListenCursor | None:
        """A saved record read back (None when it is not one: it is then ignored)."""
        if not isinstance(raw, dict):
            return None
        epoch, channels, dm = raw.get("epoch"), raw.get("channels"), raw.get("dm")
        if epoch is not None and not isinstance(epoch, str):
            return None
        if not isinstance(channels, dict) or not (dm is None or _seq(dm)):
            return None
        points = {k: v for k, v in channels.items() if is_channel(k) and _seq(v)}
        return cls(epoch, points, dm)


def _seq(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
