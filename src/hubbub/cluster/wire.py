"""The node link's messages: batches of small msgpack arrays, one WebSocket frame per batch.

Edge → leader: ``["open", sid, dialect, hello, peer]`` (a client's first frame),
``["in", sid, data]`` (each later frame), ``["gone", sid]`` (the client went away).
Leader → edge: ``["out", frame, [sid, ...]]`` (WebSocket frame bytes, written as they are to
each listed client), ``["close", sid, code, reason]``.
"""

from __future__ import annotations

from typing import Any

import msgspec

OPEN = "open"
IN = "in"
GONE = "gone"
OUT = "out"
CLOSE = "close"

SECRET_HEADER = "X-Hubbub-Cluster-Secret"
"""Carries the cluster's shared secret on every request between nodes."""
NODE_HEADER = "X-Hubbub-Node"
"""Names the node that opens a link."""
LINK_PATH = "/cluster/link"

_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(list[list[Any]])
_ids_decoder = msgspec.msgpack.Decoder(list[int])


def encode_batch(batch: list[list[Any]]) -> bytes:
    """One link frame carrying ``batch``."""
    return _encoder.encode(batch)


def packed_ids(ids: list[int]) -> msgspec.Raw:
    """``ids`` encoded once, to be placed in any number of batches as they are."""
    return msgspec.Raw(_encoder.encode(ids))


def unpacked_ids(packed: msgspec.Raw) -> list[int]:
    """The ids of :func:`packed_ids`."""
    return _ids_decoder.decode(packed)


def decode_batch(data: bytes) -> list[list[Any]]:
    """The messages of one link frame (msgspec.DecodeError on garbage)."""
    return _decoder.decode(data)
