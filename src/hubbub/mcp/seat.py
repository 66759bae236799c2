"""The seat: what the MCP tools need of one participant connection, whatever carries it.

Two adapters implement it: :mod:`hubbub.mcp.stdio` (a hubbub SDK ``Client`` on a WebSocket,
with reconnect, resume and outbox; ``hubbub mcp``) and :mod:`hubbub.server.http.mcp_http` (a
session attached inside the gateway, for ``/mcp``). Each hands every envelope the gateway
sends to the participant to :meth:`hubbub.mcp.desk.Desk.receive`, in order; the tools only
ever send envelopes through :meth:`Seat.send` and read the desk.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from hubbub.protocol.envelope import Envelope


class SeatClosed(ConnectionError):
    """The participant's connection is gone; the message names what to do."""


class Seat(Protocol):
    """One participant connection to a gateway."""

    def new_id(self) -> str:
        """A fresh client id for an envelope (kept by the gateway end to end)."""

    async def send(self, env: Envelope) -> None:
        """Send ``env`` as this participant; raises :class:`SeatClosed` when it cannot."""

    def participants(self) -> Mapping[str, Mapping[str, Any]]:
        """Who is online in the space: id → summary (``kind``, ``presence``, ``wake_at``).

        The connection keeps this already (the SDK client from the welcome and presence; the
        gateway its sessions), so a desk holds no copy of its own."""

    async def close(self) -> None:
        """Disconnect (the participant goes offline, as when a WebSocket closes)."""
