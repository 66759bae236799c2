"""Protocol error codes and the exception that carries one to the wire."""

from __future__ import annotations

from enum import StrEnum


class ErrorCode(StrEnum):
    """Error codes sent in ``system/error`` (MEW) and ``ERROR`` (agentchat, upper-cased)."""

    INVALID_JSON = "invalid_json"
    FRAME_TOO_LARGE = "frame_too_large"
    PAYLOAD_TOO_LARGE = "payload_too_large"
    INVALID_ENVELOPE = "invalid_envelope"
    UNKNOWN_KIND = "unknown_kind"
    INVALID_ID = "invalid_id"
    INVALID_REQUEST = "invalid_request"
    DUPLICATE_ID = "duplicate_id"
    INVALID_CHANNEL = "invalid_channel"
    UNKNOWN_CHANNEL = "unknown_channel"
    CHANNEL_EXISTS = "channel_exists"
    CHANNEL_LIMIT = "channel_limit"
    NOT_IN_CHANNEL = "not_in_channel"
    NOT_INVITED = "not_invited"
    NOT_ALLOWED = "not_allowed"
    VERIFICATION_FAILED = "verification_failed"
    VERIFICATION_EXPIRED = "verification_expired"
    NO_PUBKEY = "no_pubkey"
    UNKNOWN_PARTICIPANT = "unknown_participant"
    CAPABILITY_VIOLATION = "capability_violation"
    NOTHING_REVOKED = "nothing_revoked"
    RATE_LIMITED = "rate_limited"
    AUTH_FAILED = "auth_failed"
    WRONG_SPACE = "wrong_space"
    UNKNOWN_SPACE = "unknown_space"
    HANDSHAKE_REQUIRED = "handshake_required"
    SLOW_CONSUMER = "slow_consumer"
    BANNED = "banned"
    INVALID_CLAIM = "invalid_claim"
    CALLBACK_REJECTED = "callback_rejected"
    AUTH_REQUIRED = "auth_required"
    UNSUPPORTED = "unsupported"
    SESSION_DISPLACED = "session_displaced"
    UNAVAILABLE = "unavailable"
    STREAM_NOT_FOUND = "stream_not_found"
    STREAM_LIMIT = "stream_limit"
    UNAUTHORIZED = "unauthorized"
    UNAUTHORIZED_STREAM_WRITE = "unauthorized_stream_write"
    PARTICIPANT_NOT_FOUND = "participant_not_found"
    TARGET_NOT_FOUND = "target_not_found"
    INVALID_OPERATION = "invalid_operation"
    INVITE_LIMIT = "invite_limit"
    INTERNAL = "internal_error"


class ProtocolError(Exception):
    """A problem with what a participant sent; becomes an error frame, never a crash."""

    def __init__(
        self,
        code: ErrorCode,
        message: str,
        *,
        correlation_id: str | None = None,
        extra: dict[str, object] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.correlation_id = correlation_id
        self.extra = extra or {}

    def payload(self) -> dict[str, object]:
        """The payload of the ``system/error`` envelope that reports this error."""
        return {"error": self.code.value, "message": self.message, **self.extra}
