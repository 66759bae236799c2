"""Private (invite-only) channels: who is invited, kept in the store across restarts.

The rule that outsiders may not use a private channel lives in
:func:`hubbub.server.admission.authorization.channel_access`; this module only changes and
remembers the invitation lists it reads (``Channel.private``, ``Channel.invited``).
"""

from __future__ import annotations

from hubbub.protocol.errors import ErrorCode, ProtocolError
from hubbub.protocol.ids import is_participant_id
from hubbub.server.state.space import Channel, SpaceState
from hubbub.store.base import Store

TABLE = "private"
"""The store's record table: channel name → ``{"invited": [ids]}``."""


class Invitations:
    """Makes channels private and invites participants into them, durably."""

    def __init__(self, store: Store) -> None:
        self.store = store

    async def load(self, space: SpaceState) -> None:
        """Mark the private channels of ``space`` and their invitations saved by an earlier run."""
        for name, record in (await self.store.records(space.id, TABLE)).items():
            ch = space.channels.get(name)
            if ch is not None and isinstance(record, dict):
                ch.private = True
                ch.invited = {str(p) for p in record.get("invited", [])}

    def make_private(self, space: SpaceState, ch: Channel, creator: str) -> None:
        """Make a new channel invite-only, with its creator invited."""
        ch.private = True
        ch.invited = {creator}
        self._save(space, ch)

    def invite(self, space: SpaceState, ch: Channel, by: str, pid: object) -> str:
        """``by`` (a member of ``ch``) invites ``pid``; the invited id."""
        if not isinstance(pid, str) or not is_participant_id(pid):
            raise ProtocolError(
                ErrorCode.INVALID_ID,
                f"cannot invite {pid!r}: name a participant id (1-32 of [A-Za-z0-9_.-])",
            )
        if by not in ch.members:
            raise ProtocolError(
                ErrorCode.NOT_INVITED,
                f"only members of {ch.name} may invite to it: join {ch.name} first",
            )
        if ch.private and pid not in ch.invited:
            ch.invited.add(pid)
            self._save(space, ch)
        return pid

    def _save(self, space: SpaceState, ch: Channel) -> None:
        self.store.put_record(space.id, TABLE, ch.name, {"invited": sorted(ch.invited)})
