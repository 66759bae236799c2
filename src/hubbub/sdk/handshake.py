"""One connection's join, sans-I/O: the join frame, and which answers complete it.

The client writes :meth:`JoinHandshake.frame` once the socket is open. The join is complete
(the connection may become ``READY``) once the gateway's ``system/welcome`` arrived and every
channel of the frame was answered, by ``channel/joined`` or by an error about it: the gateway
answers them in order, so an uncorrelated join error is about the first channel still
awaited. An error before the welcome that refuses the participant itself (bad token, ban,
unknown space...) is the connection's :attr:`~JoinHandshake.refusal`. No I/O here; the
:class:`~hubbub.sdk.Client` feeds what arrived (``tests/sdk/test_handshake.py``).
"""

from __future__ import annotations

from typing import Any, Final

from hubbub.errors import AuthRefused
from hubbub.sdk.options import ClientOptions

REFUSALS: Final = frozenset(
    {"auth_failed", "wrong_space", "unknown_space", "handshake_required", "invalid_id", "banned"}
)
"""Error codes that refuse the participant itself (before the welcome)."""
JOIN_ERRORS: Final = frozenset(
    {"capability_violation", "unknown_channel", "invalid_channel", "not_in_channel"}
)
"""Error codes that refuse one channel of the join frame."""


class JoinHandshake:
    """The join of one connection: its frame, and what is still awaited."""

    def __init__(
        self,
        options: ClientOptions,
        channels: list[str],
        resume: dict[str, int],
        epoch: str | None,
    ) -> None:
        self.awaiting = list(channels)
        """Channels of the frame not answered yet, in the frame's order."""
        self.welcomed = False
        self.refusal: AuthRefused | None = None
        """Why the gateway refused the participant, if it did."""
        frame: dict[str, Any] = {
            "type": "join",
            "participantId": options.participant_id,
            "space": options.space,
            "channels": list(channels),
        }
        if options.token:
            frame["token"] = options.token
        if options.kind:
            frame["kind"] = options.kind
        if options.name and options.name != options.participant_id:
            frame["name"] = options.name  # the display name (docs/protocol.md, join)
        if options.capabilities is not None:
            frame["capabilities"] = options.capabilities
        frame["resume"] = resume  # even empty: it asks for resends to be recognised
        frame["presence_lists"] = True  # a burst of joins as one frame (the roster reads it)
        if resume and epoch is not None:
            frame["epoch"] = epoch  # a resume into another history is reset
        self._frame = frame

    def frame(self) -> dict[str, Any]:
        """The join frame (MEW's ``{"type": "join", ...}``)."""
        return dict(self._frame)

    @property
    def complete(self) -> bool:
        """Welcomed, and every channel of the frame answered."""
        return self.welcomed and not self.awaiting

    def welcome(self) -> None:
        """``system/welcome`` arrived."""
        self.welcomed = True

    def joined(self, channel: str) -> None:
        """``channel/joined`` arrived for ``channel``."""
        if channel in self.awaiting:
            self.awaiting.remove(channel)

    def refuses(self, code: str, message: str) -> bool:
        """Whether an error (before the welcome) refuses the participant; it is kept as
        :attr:`refusal`."""
        if self.welcomed or code not in REFUSALS:
            return False
        self.refusal = AuthRefused(f"the gateway refused the join: {message}", code)
        return True

    def channel_refused(self, code: str, correlated: bool) -> str | None:
        """The channel of the frame an error refuses (the first one still awaited), if any:
        only an uncorrelated join error after the welcome is about the frame's channels."""
        if not self.welcomed or not self.awaiting or code not in JOIN_ERRORS or correlated:
            return None
        return self.awaiting.pop(0)


__all__ = ["JOIN_ERRORS", "REFUSALS", "JoinHandshake"]
