"""Participants invited at runtime (MEW v0.4 §3.6.5 ``space/invite``), kept in the store.

An invite registers a new participant of the space with a fresh token and the capabilities
the invite names, as if ``space.yaml`` listed it; the token is stored only as its hash (the
inviter alone is told the token). Sending ``space/invite`` needs the admin role or a
capability that names it (``authorization.check_guarded``), and an invitee never gets more
than its inviter holds (``authorization.check_within``, as for a grant). An open space — every
space read from MEW's ``space.yaml`` is one — follows MEW instead: the ``space/invite``
capability is the authority, and its holder may give an invitee any capabilities (only a
participant with a token may invite there).

Banning a participant revokes every invite it made (:meth:`SpaceInvites.revoke`: the token
authenticates nobody from then on, across restarts; the id stays known) and bans the
invitees (``core/moderation.py``), and so on down the line of invites.
"""

from __future__ import annotations

from typing import Any, Final, NamedTuple

from hubbub.protocol.capabilities import CapabilityError, CapabilitySet, validate_capabilities
from hubbub.protocol.errors import ErrorCode, ProtocolError
from hubbub.protocol.ids import is_participant_id, reserved_id_error
from hubbub.server.admission.auth import Authenticator
from hubbub.server.admission.authorization import INVITE_KIND, check_within
from hubbub.server.admission.names import NameGuard
from hubbub.server.config import ParticipantConfig, hash_token, new_token
from hubbub.server.state.space import SpaceState
from hubbub.store.base import Store

TABLE: Final = "space_invites"
"""The store's record table: participant id → ``{token_hash, capabilities, kind, invited_by}``
(``token_hash`` None once the invite was revoked)."""
KINDS: Final = ("agent", "human", "service")
MAX_INVITED_PER_SPACE: Final = 1000
"""Participants that invites may add to one space (each is kept in memory and the store)."""


class Invited(NamedTuple):
    """What an invite did: ``created`` (with the new ``token``) or ``already_exists``."""

    status: str
    participant_id: str
    token: str | None = None
    capabilities: list[dict[str, Any]] | None = None


class SpaceInvites:
    """Registers invited participants, durably."""

    def __init__(self, store: Store, auth: Authenticator, names: NameGuard) -> None:
        self.store = store
        self.auth = auth
        self.names = names
        self._invited: dict[str, int] = {}
        """Space id → how many participants invites added to it."""
        self._records: dict[str, dict[str, dict[str, Any]]] = {}
        """Space id → invited participant id → its record."""

    async def load(self, space: SpaceState) -> None:
        """Register the participants invited to ``space`` by an earlier run."""
        for pid, record in (await self.store.records(space.id, TABLE)).items():
            if isinstance(record, dict) and pid not in space.config.participants:
                self._register(space, pid, record)

    def invite(
        self, space: SpaceState, by: str, payload: dict[str, Any], caps: CapabilitySet
    ) -> Invited:
        """``by`` (holding ``caps``) invites ``payload.participant_id`` with
        ``payload.initial_capabilities``, which ``caps`` must cover."""
        pid = payload.get("participant_id")
        if not isinstance(pid, str) or not pid:
            raise ProtocolError(
                ErrorCode.INVALID_ENVELOPE,
                "space/invite requires participant_id in payload (the new participant's id)",
            )
        if not is_participant_id(pid):
            raise ProtocolError(
                ErrorCode.INVALID_ID,
                f"participant_id {pid[:40]!r} contains invalid characters: an id is 1-32 of "
                "[A-Za-z0-9_.-]",
            )
        reserved = reserved_id_error(pid)
        if reserved is not None:
            raise ProtocolError(ErrorCode.INVALID_ID, reserved)
        if pid in space.known or pid in space.config.participants:
            return Invited("already_exists", pid)
        if space.config.open and by not in space.config.participants:
            raise ProtocolError(
                ErrorCode.CAPABILITY_VIOLATION,
                f"space {space.id!r} is open: only a participant with a token (of space.yaml, "
                "or invited) may invite, as anyone else could claim ids for itself; connect "
                "with a token",
                extra={"attempted_kind": "space/invite"},
            )
        if self._invited.get(space.id, 0) >= MAX_INVITED_PER_SPACE:
            raise ProtocolError(
                ErrorCode.INVITE_LIMIT,
                f"space {space.id!r} already has {MAX_INVITED_PER_SPACE} invited participants, "
                "the most invites may add: list participants in space.yaml instead",
            )
        self.names.check_id(space.id, space.known, pid)
        initial = payload.get("initial_capabilities")
        given: list[dict[str, Any]] | None = None
        if initial is not None:
            try:
                given = [dict(c) for c in validate_capabilities(initial)]
            except CapabilityError as exc:
                raise ProtocolError(
                    ErrorCode.INVALID_ENVELOPE, f"space/invite initial_capabilities: {exc}"
                ) from None
        kind = payload.get("kind", "agent")
        if kind not in KINDS:
            raise ProtocolError(
                ErrorCode.INVALID_ENVELOPE, f"space/invite kind must be one of {', '.join(KINDS)}"
            )
        if not space.config.open:  # an open space (MEW's space.yaml) follows MEW: see above
            note = (
                ""
                if given is not None
                else f" (left out, the invitee gets the defaults of its kind, {kind})"
            )
            effective = ParticipantConfig(kind=kind, capabilities=given).effective_capabilities()
            check_within(caps, effective, INVITE_KIND, note)
        token = new_token()
        record = {
            "token_hash": hash_token(token),
            "capabilities": given,
            "kind": kind,
            "invited_by": by,
        }
        self._register(space, pid, record)
        self.store.put_record(space.id, TABLE, pid, record)
        effective = space.config.participants[pid].effective_capabilities()
        return Invited("created", pid, token, effective)

    def invitees(self, space: str, by: str) -> list[str]:
        """The participants ``by`` invited into ``space`` whose invite is not revoked."""
        records = self._records.get(space, {})
        return [
            pid
            for pid, r in records.items()
            if r.get("invited_by") == by and r.get("token_hash") is not None
        ]

    def revoke(self, space: SpaceState, pid: str) -> bool:
        """Revoke ``pid``'s invite: its token authenticates nobody from now on (the id stays
        known, for its history); False when ``pid`` was not invited or is revoked already."""
        record = self._records.get(space.id, {}).get(pid)
        if record is None or record.get("token_hash") is None:
            return False
        self.auth.unregister(str(record["token_hash"]))
        record["token_hash"] = None
        space.config.participants[pid].token_hash = None
        self.store.put_record(space.id, TABLE, pid, record)
        return True

    def _register(self, space: SpaceState, pid: str, record: dict[str, Any]) -> None:
        """Make ``pid`` a participant of ``space`` as ``record`` says."""
        caps = record.get("capabilities")
        token_hash = record.get("token_hash")
        p = ParticipantConfig(
            kind=record.get("kind", "agent"),
            token_hash=str(token_hash) if token_hash is not None else None,
            capabilities=list(caps) if isinstance(caps, list) else None,
        )
        space.config.participants[pid] = p
        space.known.add(pid)
        self._invited[space.id] = self._invited.get(space.id, 0) + 1
        self._records.setdefault(space.id, {})[pid] = record
        if p.token_hash is not None:
            self.auth.register(space.id, pid, p.token_hash)
