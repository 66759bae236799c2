"""Who may connect: tokens checked against the space configs, open mode made explicit."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from hubbub.protocol.capabilities import Capability, CapabilityError, CapabilitySet, narrowed
from hubbub.protocol.errors import ErrorCode, ProtocolError
from hubbub.protocol.hello import Hello
from hubbub.protocol.ids import is_participant_id
from hubbub.server.config import SpaceConfig, hash_token

log = logging.getLogger("hubbub.auth")
_NOTED_MAX = 10_000
"""Bound on the (space, id) pairs whose ignored token was logged (cleared when reached)."""


@dataclass(frozen=True)
class Identity:
    """An authenticated participant: where it belongs and what it may send."""

    space: str
    id: str
    kind: str
    role: str
    capabilities: tuple[dict[str, Any], ...]
    by_token: bool = False
    """Authenticated by a configured token or a public key (keeps its id: a second
    connection displaces the first instead of getting another id)."""
    name: str | None = None
    """The display name asked for (agentchat's IDENTIFY ``name``)."""
    verified: bool | None = None
    """agentchat clients with a key: True when an admin configured the key; None: no key."""
    pubkey: str | None = None
    """The public key the client proved (agentchat clients with a key)."""

    def capability_set(self) -> CapabilitySet:
        """The capabilities compiled for matching (one object for equal lists)."""
        return CapabilitySet.shared(self.capabilities)


@dataclass(frozen=True)
class Caller:
    """Who makes an HTTP request: a space and the participant its token names (``id`` None:
    no token, in an open space)."""

    space: str
    id: str | None


class Authenticator:
    """Maps token hashes to participants across all spaces of the server."""

    def __init__(self, spaces: dict[str, SpaceConfig]) -> None:
        self.spaces = spaces
        self._by_hash: dict[str, tuple[str, str]] = {}
        self._noted: set[tuple[str, str]] = set()
        for sid, cfg in spaces.items():
            for pid, p in cfg.participants.items():
                for h in p.all_token_hashes():
                    self._by_hash[h] = (sid, pid)

    def register(self, space: str, pid: str, token_hash: str) -> None:
        """A participant added to ``space`` at runtime (an invite) authenticates with the
        token of ``token_hash`` from now on."""
        self._by_hash[token_hash] = (space, pid)

    def unregister(self, token_hash: str) -> None:
        """The token of ``token_hash`` authenticates nobody from now on (a revoked invite)."""
        self._by_hash.pop(token_hash, None)

    def addressed_space(self, wanted: str | None) -> str:
        """The space a request addresses: the one it names, else the only one, else
        ``default``."""
        return wanted or ("default" if len(self.spaces) != 1 else next(iter(self.spaces)))

    def lookup_token(self, token: str) -> tuple[str, str] | None:
        """The (space, participant) a token belongs to, if any."""
        return self._by_hash.get(hash_token(token))

    def ignores_unknown_token(self, space: str, who: str) -> bool:
        """Whether a token no participant owns may be ignored: only in an open space, where
        clients that always send a token (MEW's CLI and templates) join as open-mode
        participants. Logged once per ``(space, who)``."""
        cfg = self.spaces.get(space)
        if cfg is None or not cfg.open:
            return False
        key = (space, who)
        if key not in self._noted:
            if len(self._noted) >= _NOTED_MAX:
                self._noted.clear()
            self._noted.add(key)
            log.info(
                "space %r is open: ignoring a token that no configured participant owns (%r)",
                space,
                who,
            )
        return True

    def resolve(
        self,
        token: str | None,
        space: str | None,
        who: str = "an HTTP client",
        *,
        open_ok: bool = True,
    ) -> Caller:
        """The caller of an HTTP request with ``token`` addressed to ``space`` (``?space=``);
        raise ProtocolError: ``auth_failed`` (a token nobody owns — ignored in an open space
        when ``open_ok`` — or none for a space that needs one), ``wrong_space``,
        ``unknown_space``. Every HTTP surface asks this (bans are the surface's to check)."""
        owner = self.lookup_token(token) if token else None
        if token and owner is None:
            sid = self.addressed_space(space)
            if not (open_ok and self.ignores_unknown_token(sid, who)):  # open mode ignores it
                raise ProtocolError(ErrorCode.AUTH_FAILED, "unknown token")
        if owner is not None:
            sid, pid = owner
            if space and space != sid:
                raise ProtocolError(
                    ErrorCode.WRONG_SPACE, f"this token belongs to space {sid!r}, not {space!r}"
                )
            return Caller(sid, pid)
        sid = self.addressed_space(space)
        cfg = self.spaces.get(sid)
        if cfg is None:
            raise ProtocolError(
                ErrorCode.UNKNOWN_SPACE,
                f"space {sid!r} does not exist on this server; "
                f"known spaces: {', '.join(sorted(self.spaces))}",
            )
        if not cfg.open:
            raise ProtocolError(ErrorCode.AUTH_FAILED, f"space {sid!r} needs a token")
        return Caller(sid, None)

    def identity(self, caller: Caller) -> Identity | None:
        """The configured identity of a caller with a token (None without one)."""
        if caller.id is None:
            return None
        p = self.spaces[caller.space].participants[caller.id]
        return Identity(caller.space, caller.id, p.kind, p.role, tuple(p.effective_capabilities()))

    def authenticate(self, hello: Hello) -> Identity:
        """Check a hello against the configs; raise ProtocolError with a fix-it message."""
        cfg = self.spaces.get(hello.space)
        if cfg is None:
            raise ProtocolError(
                ErrorCode.UNKNOWN_SPACE,
                f"space {hello.space!r} does not exist on this server; "
                f"known spaces: {', '.join(sorted(self.spaces))}",
            )
        owner = self.lookup_token(hello.token) if hello.token else None
        if (
            hello.token
            and owner is None
            and not self.ignores_unknown_token(cfg.space, hello.participant_id)  # open mode
        ):
            raise ProtocolError(
                ErrorCode.AUTH_FAILED,
                "unknown token: check MEW_TOKEN / --token, or create one with "
                "`hubbub token create --space-config space.yaml --id <id>`",
            )
        if owner is not None:
            sid, pid = owner
            if sid != hello.space:
                raise ProtocolError(
                    ErrorCode.WRONG_SPACE,
                    f"this token belongs to space {sid!r}, not {hello.space!r}; "
                    f"join space {sid!r} or use a token of {hello.space!r}",
                )
            if hello.participant_id and hello.participant_id != pid and not hello.unique_name:
                raise ProtocolError(
                    ErrorCode.AUTH_FAILED,
                    f"this token belongs to participant {pid!r}, not {hello.participant_id!r}",
                )
            p = cfg.participants[pid]
            return Identity(
                sid, pid, p.kind, p.role, tuple(p.effective_capabilities()), by_token=True
            )
        if not cfg.open:
            raise ProtocolError(
                ErrorCode.AUTH_FAILED,
                f"space {cfg.space!r} requires a token; pass one in the join frame "
                "('token') or IDENTIFY ('token')",
            )
        pid = check_open_id(hello.participant_id)
        configured = cfg.participants.get(pid)
        if configured is not None and configured.all_token_hashes():
            raise ProtocolError(
                ErrorCode.AUTH_FAILED,
                f"participant {pid!r} is configured with a token in space {cfg.space!r}; "
                + ("the token presented is not its token" if hello.token else "present its token"),
            )
        kind = hello.kind or cfg.defaults.kind
        if kind not in ("human", "agent", "service"):
            raise ProtocolError(
                ErrorCode.INVALID_ENVELOPE,
                f"kind {kind!r} must be one of human, agent, service",
            )
        return Identity(
            cfg.space, pid, kind, "participant", tuple(_open_capabilities(cfg, hello.capabilities))
        )


def check_open_id(pid: object) -> str:
    """``pid`` as an open-mode participant's id (a join, an IDENTIFY, an HTTP post); raise
    ``invalid_id`` when it is not legal (a name that reads as the gateway's own is refused
    later, by ``Admission.check_name``, as every name taken)."""
    if not isinstance(pid, str) or not is_participant_id(pid):
        raise ProtocolError(
            ErrorCode.INVALID_ID,
            f"participant id {pid!r} is not legal: use 1-32 of [A-Za-z0-9_.-]",
        )
    return pid


def _open_capabilities(cfg: SpaceConfig, asked: list[dict[str, Any]] | None) -> list[Capability]:
    """An open-mode participant's capabilities: the space's defaults when it asks for none
    (MEW clients send ``[]``), else what it asks for within the defaults."""
    defaults = cfg.open_capabilities()
    if not asked:
        return defaults
    try:
        caps = narrowed(asked, defaults)
    except CapabilityError as exc:
        raise ProtocolError(ErrorCode.INVALID_ENVELOPE, f"capabilities: {exc}") from None
    if not caps:
        raise ProtocolError(
            ErrorCode.CAPABILITY_VIOLATION,
            f"none of the requested capabilities is within what space {cfg.space!r} allows "
            f"({defaults}); ask for some of those, or send 'capabilities': [] for all of them",
        )
    return caps
