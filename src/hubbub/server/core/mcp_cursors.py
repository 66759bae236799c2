"""Where each MCP participant's ``listen`` stopped, kept in the gateway's store.

The desk of a session hands its :class:`~hubbub.mcp.cursor.ListenCursor` over each time
``listen`` returns messages; :class:`ListenCursors` stores it (record table
:data:`CURSOR_TABLE`, one record per participant and space) and answers only once it is
durable, and gives it back when the participant's next session opens (docs/mcp.md). An
``/mcp`` session's desk calls it in the gateway's process; ``hubbub mcp`` (stdio, over a
WebSocket) through the ``mcp/cursor`` request (:meth:`Requests._cursor
<hubbub.server.core.requests.Requests._cursor>`) — the same records either way, so a
participant resumes where it stopped whichever door it comes back through.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hubbub.mcp.cursor import ListenCursor
    from hubbub.store.base import Store

CURSOR_TABLE = "mcp_listen"
"""The store's record table of listen cursors: participant id → :class:`ListenCursor`."""
SAVE_TIMEOUT_S = 10.0
"""How long a save may wait for its commit before ``listen`` answers that it could not."""


class ListenCursors:
    """Each participant's listen cursor, kept in the store (one record per participant and
    space, read once per space and then served from memory)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._spaces: dict[str, dict[str, Any]] = {}

    async def get(self, space: str, participant: str) -> ListenCursor | None:
        """Where ``participant``'s listen stopped in ``space`` (None: it never listened)."""
        from hubbub.mcp.cursor import ListenCursor

        saved = self._spaces.get(space)
        if saved is None:
            saved = self._spaces[space] = await self.store.records(space, CURSOR_TABLE)
        return ListenCursor.from_json(saved.get(participant))

    async def save(self, space: str, participant: str, cursor: ListenCursor) -> None:
        """Store ``cursor``; returns once it is durable."""
        from hubbub.mcp.desk import DeskError

        record = cursor.to_json()
        self._spaces.setdefault(space, {})[participant] = record
        self.store.put_record(space, CURSOR_TABLE, participant, record)
        durable: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def stored() -> None:
            if not durable.done():
                durable.set_result(None)

        self.store.after_commit(stored)
        try:
            async with asyncio.timeout(SAVE_TIMEOUT_S):
                await durable
        except TimeoutError:
            raise DeskError(
                "the gateway could not store where this listen stopped (its store is "
                "unavailable); the messages stay queued: call listen again in a moment"
            ) from None
