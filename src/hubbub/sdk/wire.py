"""The SDK's wire-form helpers: a dict to an :class:`Envelope`, a ``system/error`` to its
exception."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from hubbub.errors import CapabilityDenied, GatewayError
from hubbub.protocol.envelope import Envelope


def to_envelope(data: Mapping[str, Any]) -> Envelope:
    """Build an :class:`Envelope` from a wire-form dict (``from``, ``to``, ``payload``...)."""
    try:
        return msgspec.convert(dict(data), Envelope)
    except msgspec.ValidationError as exc:
        raise ValueError(f"not a valid envelope: {exc}") from None


def gateway_error(env: Envelope) -> GatewayError:
    """The exception for a ``system/error`` envelope."""
    payload = env.payload
    code = str(payload.get("error", "error"))
    message = str(payload.get("message", ""))
    if code == "capability_violation":
        return CapabilityDenied(message, str(payload.get("attempted_kind", "")), payload)
    return GatewayError(code, message, payload)


__all__ = ["gateway_error", "to_envelope"]
