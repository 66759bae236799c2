"""Configuration objects of the SDK, with defaults that run against ``hubbub serve``."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hubbub.defaults import DEFAULT_GATEWAY as DEFAULT_GATEWAY
from hubbub.protocol.capabilities import CapabilityError, validate_capabilities
from hubbub.protocol.ids import is_channel, is_participant_id
from hubbub.sdk.gateways import join_gateways, parse_gateways


@dataclass(frozen=True, kw_only=True)
class ClientOptions:
    """How a :class:`~hubbub.sdk.Client` connects (MEW SDK ``ClientOptions``; times in seconds)."""

    participant_id: str
    gateway: str | Sequence[str] = DEFAULT_GATEWAY
    """One WebSocket URL, or several (a sequence, or one string of comma-separated URLs) for
    failover; kept as one string (URLs joined by commas), the list is :attr:`gateways`."""
    space: str = "default"
    token: str | None = None
    kind: str | None = None
    """``human`` | ``agent`` | ``service``; honoured in open mode only."""
    name: str | None = None
    """Display name, sent in the join as ``name`` (others may write ``@name`` to address the
    participant); unique in the space: a join with a name another participant has is refused."""
    capabilities: list[dict[str, Any]] | None = None
    """Capabilities to ask for; honoured in open mode only (configured spaces decide)."""
    channels: tuple[str, ...] = ("#general",)
    """Channels joined at connect (and re-joined, with resume, after a reconnect)."""
    reconnect: bool = True
    max_reconnect_attempts: int | None = None
    """Consecutive failed attempts before giving up; ``None`` retries forever."""
    reconnect_delay: float = 0.5
    """Delay before the first reconnect attempt; doubled per attempt up to the maximum."""
    max_reconnect_delay: float = 30.0
    reconnect_jitter: float = 0.5
    """Fraction (0..1) of each delay that is randomised, so clients do not reconnect in step."""
    heartbeat_interval: float | None = 30.0
    """Seconds between ``system/heartbeat`` envelopes (and WebSocket pings); ``None`` = off."""
    connect_timeout: float = 10.0
    """Limit for opening the socket and receiving the welcome."""

    def __post_init__(self) -> None:
        if not is_participant_id(self.participant_id):
            raise ValueError(
                f"participant_id {self.participant_id!r} is not legal: use 1-32 of [A-Za-z0-9_.-]"
            )
        object.__setattr__(self, "gateway", join_gateways(parse_gateways(self.gateway)))
        if isinstance(self.channels, str):
            raise ValueError("channels must be a list of channel names, not one string")
        object.__setattr__(self, "channels", tuple(self.channels))
        for ch in self.channels:
            if not is_channel(ch):
                raise ValueError(f"channel {ch!r} is not legal: write '#' then 1-31 [A-Za-z0-9_-]")
        if self.capabilities is not None:
            try:
                validate_capabilities(self.capabilities)
            except CapabilityError as exc:
                raise ValueError(f"capabilities: {exc}") from None
        if self.reconnect_delay <= 0 or self.max_reconnect_delay < self.reconnect_delay:
            raise ValueError("need 0 < reconnect_delay <= max_reconnect_delay")
        if not 0.0 <= self.reconnect_jitter <= 1.0:
            raise ValueError("reconnect_jitter must be between 0 and 1")
        if self.max_reconnect_attempts is not None and self.max_reconnect_attempts < 0:
            raise ValueError("max_reconnect_attempts must be >= 0 (or None for no limit)")
        if self.heartbeat_interval is not None and self.heartbeat_interval <= 0:
            raise ValueError("heartbeat_interval must be > 0 (or None to turn heartbeats off)")
        if self.connect_timeout <= 0:
            raise ValueError("connect_timeout must be > 0")

    @property
    def gateways(self) -> tuple[str, ...]:
        """The gateway URLs, in the order they are tried (see ``docs/sdk.md``)."""
        return parse_gateways(self.gateway)

    def replace(self, **changes: Any) -> ClientOptions:
        """A copy with some fields changed."""
        return dataclasses.replace(self, **changes)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> ClientOptions:
        """Options from ``MEW_GATEWAY``, ``MEW_SPACE``, ``MEW_TOKEN``, ``MEW_PARTICIPANT_ID``."""
        return cls(**{**_env_fields(env), **overrides})


@dataclass(frozen=True, kw_only=True)
class ParticipantOptions(ClientOptions):
    """Client options plus what a :class:`~hubbub.sdk.Participant` adds."""

    request_timeout: float = 30.0
    """Default timeout of ``mcp_request`` (and of waiting for a proposal's fulfilment)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.request_timeout <= 0:
            raise ValueError("request_timeout must be > 0")

    def client_options(self) -> ClientOptions:
        """The :class:`ClientOptions` part."""
        names = {f.name for f in dataclasses.fields(ClientOptions)}
        return ClientOptions(**{n: getattr(self, n) for n in names})

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> ParticipantOptions:
        """Options from ``MEW_GATEWAY``, ``MEW_SPACE``, ``MEW_TOKEN``, ``MEW_PARTICIPANT_ID``."""
        return cls(**{**_env_fields(env), **overrides})


def _env_fields(env: Mapping[str, str] | None) -> dict[str, Any]:
    source = os.environ if env is None else env
    out: dict[str, Any] = {}
    for var, name in (
        ("MEW_GATEWAY", "gateway"),
        ("MEW_SPACE", "space"),
        ("MEW_TOKEN", "token"),
        ("MEW_PARTICIPANT_ID", "participant_id"),
    ):
        if source.get(var):
            out[name] = source[var]
    return out
