"""What a benchmark client says to each server: the join handshake and the chat frame.

Every chat message's text is ``~bench~<sender>~<seq>~<send monotonic ns>~<filler>``. Receivers
count frames containing :data:`MARKER` (presence, welcome and other frames never contain it);
a sender recognises its own echo by ``~bench~<sender>~``; latency samplers parse the timestamp.
"""

from __future__ import annotations

import asyncio
from typing import Any

from _fanout.rawws import Expect, WSClient

MARKER = b"~bench~"
FILLER = b"the quick brown fox jumps over the lazy dog"
ERROR_MARKERS = (b'"system/error"', b'"ERROR"', b'"kind":"error"')
DIALECTS = ("mew", "agentchat")


def tag(sender: str) -> bytes:
    """The bytes that identify a sender's own messages in any frame."""
    return MARKER + sender.encode() + b"~"


def chat_parts(dialect: str, sender: str) -> tuple[bytes, bytes]:
    """``(prefix, suffix)``: a chat frame payload is ``prefix + b"%d~%d" % (seq, ns) + suffix``."""
    text_head = tag(sender)
    text_tail = b"~" + FILLER
    if dialect == "mew":
        return (
            b'{"kind":"chat","channel":"#general","payload":{"text":"' + text_head,
            text_tail + b'"}}',
        )
    if dialect == "agentchat":
        return b'{"type":"MSG","to":"#general","content":"' + text_head, text_tail + b'"}'
    if dialect == "bare":
        # The ceiling server forwards what it receives, so send what hubbub would deliver:
        # a MEW envelope of the same shape and size.
        return (
            b'{"protocol":"mew/v0.4","id":"01JC0000000000000000000000","ts":'
            b'"2025-01-01T00:00:00.000Z","from":"' + sender.encode() + b'","kind":"chat",'
            b'"channel":"#general","seq":1,"payload":{"text":"' + text_head,
            text_tail + b'"}}',
        )
    raise ValueError(f"unknown dialect {dialect!r}")


def chat_text(dialect: str, msg: Any) -> str | None:
    """The text of a decoded chat frame of ``dialect`` sent to #general; None for other frames."""
    if not isinstance(msg, dict):
        return None
    if dialect == "agentchat":
        if msg.get("type") != "MSG" or msg.get("to") != "#general":
            return None
        text = msg.get("content")
    else:  # MEW envelope (the bare server forwards MEW-shaped envelopes too)
        payload = msg.get("payload")
        if msg.get("kind") != "chat" or msg.get("channel") != "#general":
            return None
        text = payload.get("text") if isinstance(payload, dict) else None
    if isinstance(text, str) and text.startswith(MARKER.decode()):
        return text
    return None


async def _reply(client: WSClient, fut: asyncio.Future[bytes]) -> bytes:
    """Wait for ``fut`` unless the connection closes first."""

    def closed(_: asyncio.Future[None]) -> None:
        if not fut.done():
            fut.set_exception(
                ConnectionError(f"connection closed during join: {client.close_reason}")
            )

    client.closed.add_done_callback(closed)
    try:
        return await fut
    finally:
        client.closed.remove_done_callback(closed)


async def join(
    client: WSClient,
    dialect: str,
    participant: str,
    timeout: float = 30.0,
    keep: Expect | None = None,
    space: str = "default",
) -> None:
    """Identify and join ``#general`` of ``space`` (MEW; agentchat joins the default space);
    afterwards the client only counts marker frames, or keeps handing every frame to ``keep``
    (whose waiters may be set before the join)."""
    if dialect != "bare":
        expect = keep if keep is not None else Expect(ERROR_MARKERS)
        client.handler = expect
        try:
            async with asyncio.timeout(timeout):
                if dialect == "mew":
                    joined = expect.expect(b"channel/joined")
                    client.send_text(
                        b'{"type":"join","participantId":"%s","space":"%s","token":""}'
                        % (participant.encode(), space.encode())
                    )
                    await _reply(client, joined)
                elif dialect == "agentchat":  # IDENTIFY joins #general (silent auto-join)
                    welcome = expect.expect(b'"WELCOME"')
                    client.send_text(b'{"type":"IDENTIFY","name":"%s"}' % participant.encode())
                    await _reply(client, welcome)
                else:
                    raise ValueError(f"unknown dialect {dialect!r}")
        except TimeoutError:
            raise TimeoutError(
                f"{participant}: no join reply within {timeout:.0f} s "
                f"(close: {client.close_reason or '-'}; last frames: {list(expect.recent)!r})"
            ) from None
        finally:
            client.handler = keep
    client.counting = True
