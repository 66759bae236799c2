"""``hubbub mcp``: hubbub's MCP server on stdio, one participant over a hubbub SDK ``Client``.

The client gives the session what a WebSocket participant has: reconnect with backoff
(across several gateway URLs of a cluster), resume by ``seq`` (nothing missed, nothing
twice, checked again by the desk) and the outbox (a ``send`` across a drop is delivered
once). The MCP client (Claude Code, Cursor, ...) starts this process and talks MCP on its
stdin/stdout; logs go to stderr.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from hubbub.errors import ConnectionFailed, NotConnected
from hubbub.mcp.cursor import ListenCursor
from hubbub.mcp.desk import Desk, DeskError
from hubbub.mcp.seat import SeatClosed
from hubbub.mcp.settings import ListenSettings
from hubbub.mcp.tools import CURRENT_DESK, build_server
from hubbub.protocol.envelope import Envelope
from hubbub.sdk.client import Client, Disconnected
from hubbub.sdk.options import ClientOptions

log = logging.getLogger("hubbub.mcp")


class ClientSeat:
    """A :class:`~hubbub.mcp.seat.Seat` over a hubbub SDK :class:`~hubbub.sdk.Client`."""

    def __init__(self, client: Client) -> None:
        self.client = client

    def new_id(self) -> str:
        """A fresh client id."""
        return self.client.new_id()

    async def send(self, env: Envelope) -> None:
        """Send through the client (kept in its outbox across a reconnect when stored)."""
        try:
            await self.client.send(env)
        except (NotConnected, ConnectionFailed) as exc:
            raise SeatClosed(str(exc)) from None

    def participants(self) -> Mapping[str, Mapping[str, Any]]:
        """Who is online, as the client tracks it."""
        return self.client.participants

    async def close(self) -> None:
        """Disconnect the client."""
        await self.client.disconnect()


async def open_desk(options: ClientOptions, settings: ListenSettings) -> tuple[Desk, Client]:
    """Connect a participant and return its desk (every envelope received goes to it),
    resumed where its last ``listen`` stopped (the cursor the gateway keeps, as for
    ``/mcp``)."""
    client = Client(options)
    desk = Desk(ClientSeat(client), options.participant_id, settings)
    client.on("message", desk.receive)

    def gone(event: Disconnected) -> None:
        if not event.will_reconnect:
            desk.closed_by(f"disconnected from the gateway ({event.code} {event.reason})")

    client.on("disconnected", gone)
    await client.connect()
    await resume(desk)
    return desk, client


async def resume(desk: Desk) -> None:
    """Read the participant's listen cursor from the gateway (``mcp/cursor``), take what its
    channels got since as news (once), and save the cursor there from now on."""

    async def save(at: ListenCursor) -> None:
        await desk.request(Envelope(kind="mcp/cursor", payload={"cursor": at.to_json()}))

    try:
        state = await desk.request(Envelope(kind="mcp/cursor"))
    except DeskError as exc:  # a gateway without mcp/cursor: no resume across restarts
        log.warning("the gateway keeps no listen cursor (%s): a restart starts afresh", exc)
        return
    saved = ListenCursor.from_json(state.payload.get("cursor"))
    if saved is not None:
        for name in desk.resume_saved(saved):
            join = {"channel": name, "after_seq": saved.channels[name]}
            await desk.seat.send(Envelope(kind="channel/join", payload=join))
        await desk.catch_up()
    desk.on_cursor = save
    if saved is None:
        await desk.checkpoint()  # a first session starts the cursor where it joined


async def run_stdio(options: ClientOptions, settings: ListenSettings | None = None) -> None:
    """Serve MCP on stdin/stdout as participant ``options.participant_id`` until stdin ends."""
    desk, client = await open_desk(options, settings or ListenSettings.from_env())
    log.info("participant %s connected to %s; serving MCP on stdio", desk.me, client.gateway_url)
    CURRENT_DESK.set(desk)
    try:
        await build_server().run_stdio_async()
    finally:
        await client.disconnect()
