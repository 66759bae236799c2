"""Each participant's current capabilities: as grants and revokes left them, else configured."""

from __future__ import annotations

import logging
from collections import OrderedDict
from typing import Final

from hubbub.protocol.capabilities import Capability, CapabilityError, CapabilitySet
from hubbub.server.state.space import SpaceState
from hubbub.store.base import Store

log = logging.getLogger("hubbub.router")
ISSUED_MAX: Final = 10_000
"""Grants remembered by id per gateway, for revokes by ``grant_id`` (oldest forgotten)."""


class Grants:
    """The capabilities that grants and revokes set (saved; they win over space.yaml)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._saved: dict[tuple[str, str], CapabilitySet] = {}
        self._issued: OrderedDict[tuple[str, str], list[Capability]] = OrderedDict()
        """(space, grant id) → what that grant gave: MEW revokes by ``grant_id``."""

    async def load(self, space: SpaceState) -> None:
        """Read back the capabilities that grants and revokes left (they outlive restarts)."""
        for pid, saved in (await self.store.capabilities(space.id)).items():
            try:
                self._saved[(space.id, pid)] = CapabilitySet(saved)
            except CapabilityError as exc:
                log.warning("ignoring the saved capabilities of %s in %s: %s", pid, space.id, exc)

    def current(
        self, space: SpaceState, pid: str, authenticated: CapabilitySet | None = None
    ) -> CapabilitySet:
        """``pid``'s capabilities now: as grants and revokes left them; else those it
        ``authenticated`` with; else its connection's; else as space.yaml configures it (or
        an open-mode participant's defaults); always with MEW's baseline (``mcp/response``)."""
        saved = self._saved.get((space.id, pid))
        if saved is not None:
            return saved.with_baseline()
        if authenticated is not None:
            return authenticated.with_baseline()
        online = space.online.get(pid)
        if online is not None:
            return online.caps
        cfg = space.config.participants.get(pid)
        return CapabilitySet.shared(
            cfg.effective_capabilities() if cfg else space.config.open_capabilities()
        ).with_baseline()

    def issued(self, space: SpaceState, grant_id: str, caps: list[Capability]) -> None:
        """Remember what the grant ``grant_id`` gave (the latest grant of that id wins)."""
        key = (space.id, grant_id)
        self._issued.pop(key, None)
        self._issued[key] = caps
        if len(self._issued) > ISSUED_MAX:
            self._issued.popitem(last=False)

    def of_grant(self, space: SpaceState, grant_id: str) -> list[Capability] | None:
        """What the grant ``grant_id`` gave, if it is remembered."""
        return self._issued.get((space.id, grant_id))

    def set(self, space: SpaceState, pid: str, caps: CapabilitySet) -> None:
        """Replace ``pid``'s capabilities now and for good (its connection's too)."""
        self._saved[(space.id, pid)] = caps
        self.store.put_capabilities(space.id, pid, caps.capabilities)
        s = space.online.get(pid)
        if s is not None:
            s.caps = caps.with_baseline()
