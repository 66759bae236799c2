"""The canonical message: a MEW v0.4 envelope with a ``channel`` extension (DESIGN §2)."""

from __future__ import annotations

import hashlib
import re
from typing import Any, Final

import msgspec

from hubbub.protocol.errors import ErrorCode, ProtocolError
from hubbub.protocol.kinds import (  # the kind table (one home); re-exported for clients
    CLIENT_KINDS,
    CONTROL_KINDS,
    SERVER_KINDS,
    STANDARD_KINDS,
    STORED_KINDS,
)

__all__ = [
    "CLIENT_KINDS",
    "CONTROL_KINDS",
    "MAX_NESTING",
    "PROTOCOL",
    "PROTOCOL_RE",
    "SERVER_KINDS",
    "STANDARD_KINDS",
    "STORED_KINDS",
    "Envelope",
    "check_payload_depth",
    "content_digest",
    "decode_envelope",
    "encode",
    "to_builtins",
]

PROTOCOL: Final = "mew/v0.4"
PROTOCOL_RE: Final = re.compile(r"mew/v0\.[0-9]{1,3}")
"""The ``protocol`` values a client may send: MEW v0.x (absent means :data:`PROTOCOL`)."""


class Envelope(msgspec.Struct, omit_defaults=True, kw_only=True):
    """One message. The server fills ``protocol``, ``ts``, ``from``, ``seq`` and, when the
    sender left it out, ``id``.

    ``private`` (a hubbub extension) asks for a direct message, delivered only to ``to``
    and the sender; without it, ``to`` only addresses a message that everyone in its
    channel sees, as in MEW.
    """

    kind: str
    # a factory, not a default, so that it is always written: MEW clients drop envelopes
    # without ``protocol``
    protocol: str = msgspec.field(default_factory=lambda: PROTOCOL)
    id: str = ""
    ts: str = ""
    from_: str = msgspec.field(default="", name="from")
    to: list[str] | None = None
    channel: str | None = None
    seq: int | None = None
    correlation_id: list[str] | str | None = None
    context: str | None = None
    private: bool = False
    payload: dict[str, Any] = msgspec.field(default_factory=dict)

    def correlation_ids(self) -> list[str]:
        """``correlation_id`` as a list (MEW allows a bare string)."""
        cid = self.correlation_id
        if cid is None:
            return []
        return [cid] if isinstance(cid, str) else cid


_decoder = msgspec.json.Decoder(Envelope)
_encoder = msgspec.json.Encoder()


MAX_NESTING: Final = 100
"""Deepest nesting of objects/arrays accepted in a payload (the payload object is level 1).

Far below where common JSON parsers give up (Python's ``json`` near 1000 levels), so that no
participant can get a message relayed that its peers cannot parse."""


def _nests_deeper(value: object, limit: int) -> bool:
    """Whether objects/arrays in ``value`` nest more than ``limit`` levels (iteratively)."""
    stack: list[tuple[dict[str, Any] | list[Any], int]] = []
    if isinstance(value, dict | list):
        stack.append((value, 1))
    while stack:
        item, depth = stack.pop()
        for child in item.values() if isinstance(item, dict) else item:
            if isinstance(child, dict | list):
                if depth >= limit:
                    return True
                stack.append((child, depth + 1))
    return False


def _too_deep() -> ProtocolError:
    return ProtocolError(
        ErrorCode.INVALID_ENVELOPE,
        f"payload nests objects/arrays deeper than {MAX_NESTING} levels; flatten it",
    )


def check_payload_depth(payload: dict[str, Any]) -> None:
    """Raise ``ProtocolError`` when a payload nests deeper than ``MAX_NESTING`` levels."""
    if _nests_deeper(payload, MAX_NESTING):
        raise _too_deep()


def _utf8_error(data: bytes | str) -> str | None:
    """Where ``data`` is not valid UTF-8 ("byte 31 (0xff)"), or None when it is."""
    try:
        if isinstance(data, str):
            data.encode()  # a lone surrogate: a str that no UTF-8 bytes could have made
        else:
            data.decode()
    except UnicodeError as exc:
        at = exc.start if isinstance(exc, UnicodeDecodeError | UnicodeEncodeError) else 0
        bad = data[at] if isinstance(data, bytes) else ord(data[at])
        return f"byte {at} (0x{bad:02x})" if isinstance(data, bytes) else f"character {at}"
    return None


def not_json_error(data: bytes | str, exc: Exception) -> ProtocolError | None:
    """The ``invalid_json`` error for a frame that failed to parse, or None for a schema error.

    Decided by what the frame is, not by msgspec's wording or exception class of one version:
    a ``msgspec.ValidationError`` is JSON of the wrong shape (the caller says which); anything
    else is bad UTF-8 when the bytes are not UTF-8 (msgspec 0.19-0.22 raised
    ``UnicodeDecodeError``, 0.23 a ``DecodeError``), otherwise malformed JSON.
    """
    if isinstance(exc, msgspec.ValidationError):
        return None
    where = _utf8_error(data)
    if where is not None:
        return ProtocolError(
            ErrorCode.INVALID_JSON,
            f"frame is not valid UTF-8 (at {where}): send JSON text encoded as UTF-8",
        )
    return ProtocolError(ErrorCode.INVALID_JSON, f"frame is not valid JSON: {exc}")


def decode_envelope(data: bytes | str) -> Envelope:
    """Parse and type-check one envelope, raising ``ProtocolError`` naming what is wrong."""
    try:
        env = _decoder.decode(data)
    except (msgspec.DecodeError, ValueError) as exc:  # and UnicodeDecodeError before 0.23
        not_json = not_json_error(data, exc)
        if not_json is not None:
            raise not_json from None
        raise ProtocolError(
            ErrorCode.INVALID_ENVELOPE,
            f"invalid envelope: {exc} (see the envelope format in docs/protocol.md)",
        ) from None
    except RecursionError:
        raise _too_deep() from None
    # Nesting deeper than MAX_NESTING needs more opening brackets than that: a cheap pre-check.
    if isinstance(data, str):
        brackets = data.count("[") + data.count("{")
    else:
        brackets = data.count(b"[") + data.count(b"{")
    if brackets > MAX_NESTING and _nests_deeper(env.payload, MAX_NESTING):
        raise _too_deep()
    if env.protocol != PROTOCOL and PROTOCOL_RE.fullmatch(env.protocol) is None:
        shown = env.protocol if len(env.protocol) <= 40 else env.protocol[:37] + "..."
        raise ProtocolError(
            ErrorCode.INVALID_ENVELOPE,
            f"protocol {shown!r} is not supported: write {PROTOCOL!r} (any mew/v0.x is "
            "accepted) or leave 'protocol' out",
            correlation_id=env.id or None,
        )
    return env


def encode(obj: object) -> bytes:
    """Encode an envelope or any JSON-able value to compact JSON bytes."""
    return _encoder.encode(obj)


def to_builtins(env: Envelope) -> dict[str, Any]:
    """The envelope as a plain dict with wire field names (``from``, not ``from_``)."""
    out = msgspec.to_builtins(env)
    assert isinstance(out, dict)
    return out


def materialized(env: Envelope) -> Envelope:
    """``env`` as a receiver that decoded its frame would hold it: the pre-encoded parts of
    its payload (``msgspec.Raw``: stored messages, participant summaries) decoded; ``env``
    itself when it has none (it may be shared: it is never changed)."""
    payload = _decoded(env.payload)
    return env if payload is env.payload else msgspec.structs.replace(env, payload=payload)


def _decoded(value: Any) -> Any:
    """``value`` with every ``msgspec.Raw`` in it decoded (``value`` itself when none is)."""
    if isinstance(value, msgspec.Raw):
        return msgspec.json.decode(value)
    if isinstance(value, dict):
        out: dict[Any, Any] | None = None
        for k, v in value.items():
            d = _decoded(v)
            if d is not v:
                if out is None:
                    out = dict(value)
                out[k] = d
        return value if out is None else out
    if isinstance(value, list):
        items: list[Any] | None = None
        for i, v in enumerate(value):
            d = _decoded(v)
            if d is not v:
                if items is None:
                    items = list(value)
                items[i] = d
        return value if items is None else items
    return value


def content_digest(env: Envelope) -> int:
    """A 63-bit digest of what a sender decides of a message (kind, payload, ``to``, channel,
    ``private``, ``correlation_id``, ``context``): equal only for the same message, never 0."""
    fields = (
        env.kind,
        env.payload,
        env.to,
        env.channel,
        env.private,
        env.correlation_ids(),
        env.context,
    )
    digest = hashlib.blake2b(_encoder.encode(fields), digest_size=8).digest()
    return int.from_bytes(digest) >> 1 or 1  # 63 bits: a SQLite INTEGER
