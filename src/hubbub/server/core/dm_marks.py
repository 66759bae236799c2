"""Where each participant's direct messages stopped: the DM stream's per-reader mark."""

from __future__ import annotations

from hubbub.server.state.space import Session, SpaceState
from hubbub.store.base import Store


class DmMarks:
    """Each participant's mark: the last DM ``seq`` written to its connection (saved in the
    store, so DMs after it are replayed when it comes back without a ``resume``)."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def advance(self, s: Session, seq: int) -> None:
        """Note that ``s`` has been written every DM of its own up to ``seq``."""
        space = s.space
        if space.dm_marks.get(s.id, -1) < seq:
            space.dm_marks[s.id] = seq
            self.store.put_dm_mark(space.id, s.id, seq)

    async def load(self, space: SpaceState) -> None:
        """Read back where each offline participant's DMs stopped (those participants stay
        known, so DMs to them are accepted); a configured participant with no mark yet (never
        connected) gets the DMs sent from now on at its first connect."""
        space.dm_marks = await self.store.dm_marks(space.id)
        space.known.update(space.dm_marks)  # seen before the restart: DMs to them are accepted
        for pid in space.config.participants:
            if pid not in space.dm_marks:
                space.dm_marks[pid] = space.dm_seq
                self.store.put_dm_mark(space.id, pid, space.dm_seq)
