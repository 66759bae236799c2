"""A stream's own allowance (issue 24 item 9): MEW stream data frames ``#<stream_id>#<data>``
spend ``limits.stream_rate_per_s`` / ``stream_bytes_per_s``, never the message rate.

``MEWAgent`` sends two frames per model token, so a reasoning stream passes hundreds of
frames a second; raw frames in MEW's shapes over real sockets to a real gateway. The small
allowances below refill at a thousandth of a frame (or byte) a second: what a test spends
stays spent for its whole run, so nothing here depends on how fast it runs.
"""

from __future__ import annotations

from collections.abc import Callable

from hubbub.server.config import Limits
from tests.conftest import MakeGateway
from tests.interop.test_mew_client import MewPeer
from tests.interop.test_mew_streams import _error, _open

SLOW = 0.001
"""A refill rate low enough that a spent allowance stays spent for the whole test."""


def _is_error_or(text: str) -> Callable[[dict[str, object]], bool]:
    """A predicate: a ``system/error``, or the chat whose text is ``text``."""
    return lambda f: (
        f["kind"] == "system/error" or (f["kind"] == "chat" and f["payload"] == {"text": text})
    )


async def test_300_frames_back_to_back_all_arrive_and_chat_keeps_its_burst(
    gateways: MakeGateway,
) -> None:
    """At the defaults: a token-by-token burst of 300 frames is relayed whole, then the
    writer's chats are accepted up to the chat burst (40, the stream request being the
    first of them) — the frames spent none of it."""
    gw = await gateways()
    writer, reader = await MewPeer.join(gw, "agent"), await MewPeer.join(gw, "human")
    try:
        sid = (await _open(writer, reader, description="reasoning:agent"))["stream_id"]
        frames = [f'#{sid}#{{"type":"token","value":"t{n}"}}' for n in range(300)]
        for frame in frames:
            await writer.ws.send(frame)
        assert [await reader.stream_frame() for _ in frames] == frames
        burst = Limits().rate_burst - 1  # the stream/request was a message
        for n in range(1, burst + 1):
            await writer.send({"kind": "chat", "payload": {"text": f"chat {n}"}})
        last = f"chat {burst}"
        first = await writer.next_where(_is_error_or(last))
        assert first["kind"] == "chat", f"refused: {first['payload']}"
        for n in range(1, burst + 1):
            got = await reader.expect("chat")
            assert got["payload"]["text"] == f"chat {n}"
    finally:
        await writer.ws.close()
        await reader.ws.close()


async def test_over_the_stream_allowance_a_frame_is_refused(gateways: MakeGateway) -> None:
    """Past ``stream_rate_burst`` the next frame gets ``rate_limited`` naming the setting
    and reaches nobody; the writer's chat is still accepted."""
    gw = await gateways(limits=Limits(stream_rate_per_s=SLOW, stream_rate_burst=5))
    writer, reader = await MewPeer.join(gw, "agent"), await MewPeer.join(gw, "human")
    try:
        sid = (await _open(writer, reader))["stream_id"]
        for n in range(6):
            await writer.ws.send(f"#{sid}#frame-{n}")
        refused = await _error(writer, "rate_limited")
        assert "limits.stream_rate_per_s" in refused["message"]
        assert "burst 5" in refused["message"]
        await writer.send({"kind": "chat", "payload": {"text": "still heard"}})
        assert (await reader.expect("chat"))["payload"]["text"] == "still heard"
        # relayed in order before the chat: the five allowed frames, not the sixth
        assert reader.stream_frames == [f"#{sid}#frame-{n}" for n in range(5)]
    finally:
        await writer.ws.close()
        await reader.ws.close()


async def test_over_the_stream_bytes_allowance_a_frame_is_refused(
    gateways: MakeGateway,
) -> None:
    """``stream_bytes_per_s`` bounds a writer whatever its frames' size: four frames of
    1,000 bytes fit a burst of 4,096 bytes, the fifth is refused naming the setting."""
    limits = Limits(max_frame_bytes=4096, stream_bytes_per_s=SLOW, stream_bytes_burst=4096)
    gw = await gateways(limits=limits)
    writer, reader = await MewPeer.join(gw, "agent"), await MewPeer.join(gw, "human")
    try:
        sid = (await _open(writer, reader))["stream_id"]
        prefix = f"#{sid}#"
        frames = [prefix + str(n) * (1000 - len(prefix)) for n in range(5)]
        for frame in frames:
            await writer.ws.send(frame)
        refused = await _error(writer, "rate_limited")
        assert "limits.stream_bytes_per_s" in refused["message"]
        assert "frame of 1000 bytes" in refused["message"]
        await writer.send({"kind": "chat", "payload": {"text": "after"}})
        await reader.expect("chat")
        assert reader.stream_frames == frames[:4]
    finally:
        await writer.ws.close()
        await reader.ws.close()


async def test_a_spent_chat_allowance_does_not_stop_a_stream(gateways: MakeGateway) -> None:
    """The other way round: a writer over its message rate, and its address over the
    address rate, still streams (stream frames spend neither)."""
    limits = Limits(
        rate_per_s=SLOW, rate_burst=2, rate_per_address_s=SLOW, rate_per_address_burst=2
    )
    gw = await gateways(limits=limits)
    writer, reader = await MewPeer.join(gw, "agent"), await MewPeer.join(gw, "human")
    try:
        sid = (await _open(writer, reader))["stream_id"]  # one message
        await writer.send({"kind": "chat", "payload": {"text": "second"}})
        await writer.send({"kind": "chat", "payload": {"text": "third"}})
        await _error(writer, "rate_limited")  # the third message: over both rates
        frames = [f"#{sid}#after the chat allowance {n}" for n in range(50)]
        for frame in frames:
            await writer.ws.send(frame)
        assert [await reader.stream_frame() for _ in frames] == frames
    finally:
        await writer.ws.close()
        await reader.ws.close()
