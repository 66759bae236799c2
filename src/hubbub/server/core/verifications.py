"""agentchat's ``VERIFY_REQUEST``/``VERIFY_RESPONSE``: one agent asks the server to check that
another holds the private key of its public key. Sans-I/O: the caller passes the time.

The requester names a target and a nonce; the target signs the nonce; the server checks the
signature against the key the target proved at IDENTIFY. A request not answered within
:data:`VERIFY_TIMEOUT_MS` fails.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Final

from cryptography.exceptions import InvalidSignature

from hubbub.protocol.errors import ErrorCode, ProtocolError
from hubbub.protocol.keys import load_pubkey

VERIFY_TIMEOUT_MS: Final = 30_000
"""How long the target has to answer (agentchat's ``verificationTimeoutMs``)."""
MAX_PENDING: Final = 10_000
"""Most verification requests pending at once in the gateway (the oldest are dropped)."""


@dataclass(frozen=True)
class Pending:
    """A verification request waiting for the target's answer."""

    request_id: str
    requester: str
    target: str
    pubkey: str
    nonce: str
    expires_at: int


class Verifications:
    """The pending verification requests of the gateway."""

    def __init__(self) -> None:
        self._pending: dict[str, Pending] = {}
        self._n = 0

    def ask(
        self, requester: str, target: str, pubkey: str | None, nonce: object, now: int
    ) -> Pending:
        """A new request of ``requester`` for ``target`` (whose proven key is ``pubkey``)."""
        if pubkey is None:
            raise ProtocolError(
                ErrorCode.NO_PUBKEY,
                f"@{target} has no persistent identity (it connected without a public key): "
                "only an agent with a key can be verified",
            )
        if not isinstance(nonce, str) or not nonce:
            raise ProtocolError(ErrorCode.INVALID_ENVELOPE, "VERIFY_REQUEST needs a 'nonce' string")
        self._n += 1
        pending = Pending(
            f"verify_{now:x}_{self._n}", requester, target, pubkey, nonce, now + VERIFY_TIMEOUT_MS
        )
        if len(self._pending) >= MAX_PENDING:
            self._pending.pop(next(iter(self._pending)))
        self._pending[pending.request_id] = pending
        return pending

    def answer(
        self, responder: str, request_id: object, nonce: object, signature: object, now: int
    ) -> tuple[Pending, bool]:
        """The request ``responder`` answers and whether its signature of the nonce holds."""
        pending = self._pending.get(request_id) if isinstance(request_id, str) else None
        if pending is None or now > pending.expires_at:
            if pending is not None:
                del self._pending[pending.request_id]
            raise ProtocolError(
                ErrorCode.VERIFICATION_EXPIRED, "Verification request not found or expired"
            )
        if pending.target != responder:
            raise ProtocolError(
                ErrorCode.INVALID_ENVELOPE, "You are not the target of this verification"
            )
        if nonce != pending.nonce:
            raise ProtocolError(ErrorCode.INVALID_ENVELOPE, "Nonce mismatch")
        del self._pending[pending.request_id]
        try:
            raw = base64.b64decode(signature if isinstance(signature, str) else "", validate=True)
            load_pubkey(pending.pubkey).verify(raw, pending.nonce.encode())
        except (InvalidSignature, binascii.Error, ValueError):
            return pending, False
        return pending, True

    def expire(self, request_id: str, now: int) -> Pending | None:
        """Drop ``request_id`` if it is still pending and past its time; the dropped request."""
        pending = self._pending.get(request_id)
        if pending is None or now <= pending.expires_at:
            return None
        del self._pending[request_id]
        return pending
