"""agentchat's public-key identity: Ed25519 keys as SPKI PEM, their ids, the challenge text.

A client proves its key by signing ``AGENTCHAT_AUTH|<nonce>|<challenge_id>|<timestamp>``
(base64 signature); its id is the first 16 hex digits of the SHA-256 of the PEM text.
Sans-I/O: the caller passes the time and the randomness.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from dataclasses import dataclass
from typing import Final

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import load_pem_public_key

from hubbub.protocol.errors import ErrorCode, ProtocolError

CHALLENGE_TTL_MS: Final = 60_000
"""How long a challenge may be answered (agentchat's default ``CHALLENGE_TIMEOUT_MS``)."""
KEY_ID = re.compile(r"[0-9a-f]{16}")
"""The shape of a key's id: a name of this shape is never given to a keyless client."""


def load_pubkey(pem: object) -> Ed25519PublicKey:
    """The Ed25519 key in ``pem`` (SPKI PEM text); raise ``invalid_envelope`` otherwise."""
    try:
        if not isinstance(pem, str):
            raise ValueError("not a string")
        key = load_pem_public_key(pem.encode())
    except (ValueError, TypeError):
        key = None
    if not isinstance(key, Ed25519PublicKey):
        raise ProtocolError(
            ErrorCode.INVALID_ENVELOPE,
            "Invalid public key format (must be Ed25519 PEM): send the SPKI PEM text of an "
            "Ed25519 public key as 'pubkey', or null for no key",
        )
    return key


def key_id(pem: str) -> str:
    """The id agentchat gives a key: the first 16 hex digits of SHA-256 of its PEM text."""
    return hashlib.sha256(pem.encode()).hexdigest()[:16]


def signing_text(nonce: str, challenge_id: str, timestamp: object) -> bytes:
    """What the client signs to answer a challenge."""
    return f"AGENTCHAT_AUTH|{nonce}|{challenge_id}|{timestamp}".encode()


@dataclass(frozen=True)
class Challenge:
    """A challenge sent to a client that presented ``pubkey``."""

    challenge_id: str
    nonce: str
    expires_at: int
    """Unix ms after which an answer is refused."""
    pubkey: str

    @classmethod
    def issue(cls, pubkey: str, now_ms: int, random_hex: str) -> Challenge:
        """A new challenge for ``pubkey`` (``random_hex``: 32+ hex digits of randomness)."""
        return cls(
            challenge_id=f"chal_{now_ms:x}_{random_hex[:8]}",
            nonce=random_hex[8:40],
            expires_at=now_ms + CHALLENGE_TTL_MS,
            pubkey=pubkey,
        )

    def check(
        self, challenge_id: object, signature: object, timestamp: object, now_ms: int
    ) -> None:
        """Accept the answer or raise ``verification_failed`` (a bad signature) or
        ``verification_expired`` (another or a late challenge, as agentchat) saying why."""
        if challenge_id != self.challenge_id:
            raise _expired(
                "Challenge not found or expired: VERIFY_IDENTITY names another challenge_id "
                "than the CHALLENGE sent"
            )
        if now_ms > self.expires_at:
            raise _expired("Challenge expired: answer within 60 s of the CHALLENGE")
        if not isinstance(signature, str) or isinstance(timestamp, bool):
            raise _failed("signature must be a base64 string")
        try:
            raw = base64.b64decode(signature, validate=True)
            load_pubkey(self.pubkey).verify(
                raw, signing_text(self.nonce, self.challenge_id, timestamp)
            )
        except (InvalidSignature, binascii.Error, ValueError):
            raise _failed(
                "Invalid signature: sign AGENTCHAT_AUTH|<nonce>|<challenge_id>|<timestamp> "
                "with the private key of the public key sent in IDENTIFY"
            ) from None


def _failed(why: str) -> ProtocolError:
    return ProtocolError(ErrorCode.VERIFICATION_FAILED, why)


def _expired(why: str) -> ProtocolError:
    return ProtocolError(ErrorCode.VERIFICATION_EXPIRED, why)
