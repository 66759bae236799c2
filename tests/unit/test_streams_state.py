"""The rules of a space's streams (``server/state/streams.py``), as properties."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hubbub.protocol.errors import ErrorCode, ProtocolError
from hubbub.server.state.streams import (
    MAX_STREAMS_PER_PARTICIPANT,
    SERVER_FIELDS,
    SpaceStreams,
)

PEOPLE = ["a", "b", "c"]
OPS = st.lists(
    st.tuples(
        st.sampled_from(["open", "close", "grant", "revoke", "transfer", "leave"]),
        st.sampled_from(PEOPLE),
        st.sampled_from(PEOPLE),
        st.integers(0, 5),
    ),
    max_size=60,
)


def _apply(streams: SpaceStreams, op: str, who: str, other: str, n: int) -> None:
    """One participant's operation, as the gateway's stage calls it (refusals are raised)."""
    sid = f"stream-{n}"
    if op == "open":
        streams.open(who, f"req-{n}", "2026-01-01T00:00:00Z", {"direction": "upload"}, None, 20)
    elif op == "close":
        streams.close(streams.owned(sid, who, "close it"))
    elif op == "grant":
        streams.grant(streams.owned(sid, who, "grant"), other)
    elif op == "revoke":
        streams.revoke(streams.owned(sid, who, "revoke"), other)
    elif op == "transfer":
        streams.transfer(streams.owned(sid, who, "transfer"), other)
    else:  # who leaves the space (core/streams.py Streams.left)
        for s in streams.owned_by(who):
            streams.close(s)
        for s in streams.written_by(who):
            streams.revoke(s, who)


def _described(streams: SpaceStreams) -> list[dict[str, Any]]:
    """The open streams as a welcome describes them."""
    return [s.describe() for s in streams.open_streams()]


@settings(max_examples=300)
@given(OPS)
def test_an_owner_always_writes_and_only_owners_change_streams(ops: list[Any]) -> None:
    streams = SpaceStreams()
    for op, who, other, n in ops:
        before = {d["stream_id"]: d for d in _described(streams)}
        try:
            _apply(streams, op, who, other, n)
        except ProtocolError as exc:
            assert exc.code in (
                ErrorCode.STREAM_NOT_FOUND,
                ErrorCode.UNAUTHORIZED,
                ErrorCode.INVALID_OPERATION,
                ErrorCode.STREAM_LIMIT,
            )
            assert {
                d["stream_id"]: d for d in [s.describe() for s in streams.open_streams()]
            } == before  # nothing changed
        for d in _described(streams):
            writers = d["authorized_writers"]
            assert d["owner"] in writers and len(writers) == len(set(writers))
        for pid in PEOPLE:
            assert len(streams.owned_by(pid)) <= MAX_STREAMS_PER_PARTICIPANT


@given(st.dictionaries(st.sampled_from([*SERVER_FIELDS, "format", "x"]), st.text(max_size=5)))
def test_a_request_never_sets_the_gateways_fields(payload: dict[str, str]) -> None:
    streams = SpaceStreams()
    stream = streams.open("a", "req", "2026-01-01T00:00:00Z", payload, None, 20)
    [listed] = _described(streams)
    assert listed["owner"] == "a" and listed["authorized_writers"] == ["a"]
    assert listed["stream_id"] == stream.stream_id and listed["created"].startswith("2026")
    for key in payload.keys() - SERVER_FIELDS:
        assert listed[key] == payload[key]


def test_closed_ids_are_not_reused() -> None:
    streams = SpaceStreams()
    first = streams.open("a", "r1", "t", {}, None, 2)
    streams.close(first)
    second = streams.open("a", "r2", "t", {}, None, 2)
    assert second.stream_id != first.stream_id
    with pytest.raises(ProtocolError) as exc:
        streams.owned(first.stream_id, "a", "close it")
    assert exc.value.code is ErrorCode.STREAM_NOT_FOUND
