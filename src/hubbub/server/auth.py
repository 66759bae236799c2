"""Who may connect: tokens checked against the space configs, open mode made explicit."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hubbub.protocol.capabilities import CapabilityError, CapabilitySet, validate_capabilities
from hubbub.protocol.errors import ErrorCode, ProtocolError
from hubbub.protocol.hello import Hello
from hubbub.protocol.ids import is_participant_id
from hubbub.server.config import SpaceConfig, hash_token


@dataclass(frozen=True)
class Identity:
    """An authenticated participant: where it belongs and what it may send."""

    space: str
    id: str
    kind: str
    role: str
    capabilities: tuple[dict[str, Any], ...]

    def capability_set(self) -> CapabilitySet:
        """The capabilities compiled for matching."""
        return CapabilitySet(self.capabilities)


class Authenticator:
    """Maps token hashes to participants across all spaces of the server."""

    def __init__(self, spaces: dict[str, SpaceConfig]) -> None:
        self.spaces = spaces
        self._by_hash: dict[str, tuple[str, str]] = {}
        for sid, cfg in spaces.items():
            for pid, p in cfg.participants.items():
                if p.token_hash:
                    self._by_hash[p.token_hash] = (sid, pid)

    def lookup_token(self, token: str) -> tuple[str, str] | None:
        """The (space, participant) a token belongs to, if any."""
        return self._by_hash.get(hash_token(token))

    def authenticate(self, hello: Hello) -> Identity:
        """Check a hello against the configs; raise ProtocolError with a fix-it message."""
        cfg = self.spaces.get(hello.space)
        if cfg is None:
            raise ProtocolError(
                ErrorCode.UNKNOWN_SPACE,
                f"space {hello.space!r} does not exist on this server; "
                f"known spaces: {', '.join(sorted(self.spaces))}",
            )
        if hello.token:
            owner = self.lookup_token(hello.token)
            if owner is None:
                raise ProtocolError(
                    ErrorCode.AUTH_FAILED,
                    "unknown token: check MEW_TOKEN / --token, or create one with "
                    "`hubbub token create --space space.yaml --id <id>`",
                )
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
            return Identity(sid, pid, p.kind, p.role, tuple(p.effective_capabilities()))
        if not cfg.open:
            raise ProtocolError(
                ErrorCode.AUTH_FAILED,
                f"space {cfg.space!r} requires a token; pass one in the join frame "
                "('token') or IDENTIFY ('token')",
            )
        pid = hello.participant_id
        if not is_participant_id(pid):
            raise ProtocolError(
                ErrorCode.INVALID_ID,
                f"participant id {pid!r} is not legal: use 1-32 of [A-Za-z0-9_.-]",
            )
        configured = cfg.participants.get(pid)
        if configured is not None and configured.token_hash:
            raise ProtocolError(
                ErrorCode.AUTH_FAILED,
                f"participant {pid!r} is configured with a token in space {cfg.space!r}; "
                "present its token",
            )
        kind = hello.kind or cfg.defaults.kind
        if kind not in ("human", "agent", "service"):
            raise ProtocolError(
                ErrorCode.INVALID_ENVELOPE,
                f"kind {kind!r} must be one of human, agent, service",
            )
        caps = cfg.open_capabilities()
        if hello.capabilities is not None:
            try:
                caps = validate_capabilities(hello.capabilities)
            except CapabilityError as exc:
                raise ProtocolError(ErrorCode.INVALID_ENVELOPE, f"capabilities: {exc}") from None
        return Identity(cfg.space, pid, kind, "participant", tuple(caps))
