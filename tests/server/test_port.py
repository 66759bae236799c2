"""The Port on its own (no event loop, no socket): byte accounting, the bound, drop-oldest
with a gap, the close policy."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hubbub.protocol.envelope import Envelope
from hubbub.server.state.port import Gap, Overflow, Port


def env(n: int) -> Envelope:
    return Envelope(kind="chat", id=f"m{n}", seq=n, channel="#general")


def test_bytes_are_counted_as_queued_drained_and_held() -> None:
    port = Port(100, envelopes=True)
    assert port.put(b"abc", env(1)) and port.put(b"defgh", (env(2), env(3)))
    assert (port.queued, port.held, port.pending, len(port)) == (8, 0, 8, 2)
    items = port.drain()
    assert [d for d, _ in items] == [b"abc", b"defgh"]
    assert items[0][1] == env(1) and items[1][1] == (env(2), env(3))
    assert (port.queued, len(port)) == (0, 0)
    assert port.settle(8)  # the driver keeps them (a socket's buffer, an unread inbox)
    assert (port.held, port.pending) == (8, 8)
    port.put(b"xy")
    assert port.drain_bytes() == b"xy" and port.queued == 0


def test_drain_bytes_joins_a_turns_frames_in_order() -> None:
    port = Port(100)
    for frame in (b"one", b"two", b"three"):
        port.put(frame)
    assert port.drain_bytes() == b"onetwothree"
    assert port.drain() == [] and port.drain_bytes() == b""


def test_a_close_port_is_judged_when_its_driver_settles() -> None:
    """A burst past the bound that the receiver takes at once is no slow consumer; what it
    still holds after the drain is."""
    port = Port(10, Overflow.CLOSE)
    assert port.put(b"x" * 25)  # over the bound while queued: not judged yet
    port.drain()
    assert port.settle(0) and port.closed is None  # the receiver took it all
    port.put(b"y" * 4)
    port.drain()
    assert not port.settle(11)  # it holds 11 of the bytes written: over the bound
    assert port.closed is not None and "slow consumer" in port.closed and "10" in port.closed
    assert not port.put(b"z") and len(port) == 0 and port.queued == 0
    assert not port.settle(0) and not port.close("again")


def test_settling_at_the_bound_keeps_the_port_open() -> None:
    port = Port(10)
    port.put(b"x" * 4)
    assert port.settle(6) and port.closed is None  # 4 queued + 6 held: exactly the bound


def test_drop_oldest_keeps_the_newest_and_reports_the_gap() -> None:
    port = Port(10, Overflow.DROP_OLDEST, envelopes=True)
    for n in range(1, 6):
        assert port.put(b"abcd", env(n))  # 4 bytes each: at most two fit
    assert port.closed is None and port.queued == 8
    assert [e.seq for _, e in port.drain()] == [4, 5]  # type: ignore[union-attr]
    gap = port.take_gap()
    assert gap == Gap(items=3, bytes=12, first=env(1), last=env(3))
    assert port.take_gap() is None  # told once


def test_drop_oldest_counts_what_the_driver_holds() -> None:
    port = Port(10, Overflow.DROP_OLDEST, envelopes=True)
    port.put(b"abcd", env(1))
    port.put(b"efgh", (env(2), env(3)))
    assert port.settle(6)  # the receiver still holds 6: only one frame of 4 fits beside it
    assert [d for d, _ in port.drain()] == [b"efgh"]
    gap = port.take_gap()
    assert gap is not None and (gap.items, gap.first, gap.last) == (1, env(1), env(1))


def test_a_frame_without_envelopes_is_counted_in_the_gap_by_bytes() -> None:
    port = Port(3, Overflow.DROP_OLDEST)
    port.put(b"#s#raw")  # over the bound alone: dropped too
    gap = port.take_gap()
    assert gap == Gap(items=1, bytes=6, first=None, last=None)
    assert len(port) == 0


def test_a_byte_port_keeps_no_envelopes_and_counts_its_frames() -> None:
    """A WebSocket's port: frames appended as they come, counted when asked."""
    port = Port(100)
    assert port.plain and port.sent is None
    port.frames.append(b"abc")  # what Connection.send does for a plain port
    port.put(b"de", env(1))
    assert port.queued == 5 and port.drain() == [(b"abc", None), (b"de", None)]


def test_a_bound_must_be_positive() -> None:
    with pytest.raises(ValueError, match="bound must be > 0"):
        Port(0)


_op = st.one_of(
    st.tuples(st.just("put"), st.binary(max_size=40)),
    st.tuples(st.just("drain"), st.none()),
    st.tuples(st.just("settle"), st.integers(0, 60)),
)


@settings(max_examples=300, deadline=None)
@given(
    policy=st.sampled_from(list(Overflow)),
    envelopes=st.booleans(),
    bound=st.integers(1, 120),
    ops=st.lists(_op, max_size=60),
)
def test_bytes_accounted_equal_bytes_queued_minus_drained(
    policy: Overflow, envelopes: bool, bound: int, ops: list[tuple[str, object]]
) -> None:
    """Whatever the sequence: queued = put − drained − dropped − cut at a close, and equals
    the bytes of the items in the port; a drop-oldest port never holds more than its bound
    after a put; a closed port takes nothing."""
    port = Port(bound, policy, envelopes=envelopes)
    put = drained = dropped = cut = 0
    for op, arg in ops:
        if op == "put":
            assert isinstance(arg, bytes)
            before = port.queued
            if port.put(arg, env(put)):
                put += len(arg)
                if policy is Overflow.DROP_OLDEST:
                    assert port.pending <= bound or not port.frames
            else:
                assert port.closed is not None and port.queued == before == 0
        elif op == "drain":
            drained += sum(len(d) for d, _ in port.drain())
        else:
            assert isinstance(arg, int)
            queued = port.queued
            if not port.settle(arg) and queued:
                cut += queued
        gap = port.take_gap()
        if gap is not None:
            dropped += gap.bytes
        assert port.queued == sum(len(d) for d in port.frames)
        if port.sent is not None:
            assert len(port.sent) == len(port.frames)
        assert port.queued == put - drained - dropped - cut
