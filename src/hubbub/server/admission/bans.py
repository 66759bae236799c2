"""Banned participants per space: refused at connect and on every post, until unbanned.

Bans are saved in the store (the SQLite file by default), so a restart keeps them; only an
unban lifts one (with ``--store memory`` they last as long as the process). The admin kill
switch (:mod:`hubbub.server.http.admin`) bans and unbans; admission (``Sessions.authenticate``,
:func:`hubbub.server.admission.authorization.channel_access`, the HTTP API) checks.
"""

from __future__ import annotations

from hubbub.protocol.errors import ErrorCode, ProtocolError
from hubbub.store.base import Store


class BanList:
    """Banned participant ids per space, kept in the store so that a restart keeps them."""

    def __init__(self, store: Store) -> None:
        self._banned: dict[str, set[str]] = {}
        self._store = store

    async def load(self, space: str) -> None:
        """Read the bans of ``space`` saved by an earlier run."""
        self._banned[space] = set(await self._store.bans(space))

    def is_banned(self, space: str, pid: str) -> bool:
        """Whether ``pid`` is banned from ``space``."""
        banned = self._banned.get(space)
        return banned is not None and pid in banned

    def check(self, space: str, pid: str) -> None:
        """Raise ``banned`` if ``pid`` may not connect to or post in ``space``."""
        if self.is_banned(space, pid):
            raise ProtocolError(
                ErrorCode.BANNED,
                f"participant {pid!r} is banned from space {space!r} by an admin; "
                f"ask an admin of the space to unban it (POST /admin/participants/{pid}/unban)",
            )

    def ban(self, space: str, pid: str) -> bool:
        """Ban ``pid``; False when it already was."""
        banned = self._banned.setdefault(space, set())
        if pid in banned:
            return False
        banned.add(pid)
        self._store.put_ban(space, pid, True)
        return True

    def unban(self, space: str, pid: str) -> bool:
        """Lift a ban; False when there was none."""
        banned = self._banned.get(space)
        if banned is None or pid not in banned:
            return False
        banned.discard(pid)
        self._store.put_ban(space, pid, False)
        return True

    def banned(self, space: str) -> list[str]:
        """The banned ids of ``space``, sorted."""
        return sorted(self._banned.get(space, ()))
