"""Who sends a routed message: a connected session, or a participant posting over HTTP."""

from __future__ import annotations

from typing import Any

from hubbub.protocol.capabilities import CapabilitySet
from hubbub.protocol.errors import ProtocolError
from hubbub.server.admission.auth import Identity
from hubbub.server.state.space import Session, SpaceState


class HttpSender:
    """A participant posting over HTTP: same identity and capabilities, no connection."""

    asleep = False  # only a connection can sleep

    def __init__(
        self, space: SpaceState, identity: Identity, caps: CapabilitySet, *, resends: bool = False
    ) -> None:
        self.id = identity.id
        self.kind = identity.kind
        self.role = identity.role
        self.space = space
        self.caps = caps
        self.resends = resends
        """The request carried an ``Idempotency-Key``: a repeat of it is answered with the
        original."""
        self.answer: dict[str, object] = {}
        """What the gateway answered a request kind (a stream's id, an invite's token): the
        HTTP response carries it, as the answer envelope does on a WebSocket."""
        self.refusals: list[ProtocolError] = []
        """Parts of the message refused while the rest went on (a rejected callback): the
        HTTP response reports them, as ``system/error`` does on a WebSocket."""


Sender = Session | HttpSender

SENDER_FIELDS = ("from_name", "verified")
"""The chat payload fields that only the server writes: who sent it, as its session says."""


def stamp_sender(payload: dict[str, Any], sender: Sender) -> None:
    """Write ``sender``'s display name and key's ``verified`` into a chat payload (when it
    has them), replacing whatever the client wrote under those names."""
    for field in SENDER_FIELDS:
        payload.pop(field, None)
    if isinstance(sender, Session):
        who = sender.identity()
        if "name" in who:
            payload["from_name"] = who["name"]
        if "verified" in who:
            payload["verified"] = who["verified"]
