"""Server limits and space configuration (``space.yaml``), loaded with errors that name the key."""

from __future__ import annotations

import hashlib
import hmac
import logging
import math
import os
import re
import secrets
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, TypeVar

import msgspec
import yaml

from hubbub.hints import did_you_mean
from hubbub.protocol.capabilities import CapabilityError, validate_capabilities
from hubbub.protocol.errors import ProtocolError
from hubbub.protocol.ids import SPACE_ID_RE, is_channel, is_participant_id, reserved_id_error
from hubbub.protocol.keys import load_pubkey
from hubbub.server.mew_space import MewSpaceError, is_mew_space, translate
from hubbub.server.web_guard import canonical_origin, host_setting

_T = TypeVar("_T")
log = logging.getLogger("hubbub.config")
ParticipantKind = Literal["human", "agent", "service"]
Role = Literal["participant", "observer", "admin"]

AGENT_DEFAULT_CAPABILITIES: list[dict[str, Any]] = [
    {"kind": "chat"},
    {"kind": "chat/*"},
    {"kind": "mcp/*"},
    {"kind": "reasoning/*"},
    {"kind": "participant/status"},
    {"kind": "participant/request-status"},
    {"kind": "participant/compact-done"},
    {"kind": "capability/grant-ack"},
    {"kind": "system/heartbeat"},
    {"kind": "channel/join"},
    {"kind": "channel/leave"},
    {"kind": "channel/invite"},
    {"kind": "channel/list"},
    {"kind": "admin/*"},
    {"kind": "identity/*"},
    {"kind": "channel/members"},
    {"kind": "history/request"},
    {"kind": "floor/*"},
]
"""What an agent or service may send when the space config gives it no capabilities."""

HUMAN_DEFAULT_CAPABILITIES: list[dict[str, Any]] = [
    {"kind": "!capability/*"},
    {"kind": "capability/grant-ack"},
]
"""What a human may send when the space config gives them no capabilities: everything but
``capability/grant`` and ``capability/revoke`` (changing capabilities is for admins)."""

ADMIN_DEFAULT_CAPABILITIES: list[dict[str, Any]] = [{"kind": "**"}]
"""What a participant with ``role: admin`` may send when the space config gives it none."""

OPEN_MODE_CAPABILITIES: list[dict[str, Any]] = [{"kind": "**"}]
"""Open mode (local use, loopback only) lets everyone send everything unless they ask for less."""


AGENTCHAT_CHANNELS = (
    "#general",
    "#engineering",
    "#pull-requests",
    "#help",
    "#love",
    "#agents",
    "#discovery",
    "#bounties",
)
"""The public channels agentchat's server starts with (``agentchat_channels: true``); its
verified-only ``#ops`` is left out."""

AUTO_JOIN_MAX = 32
"""At most this many channels are joined automatically on connect (``agentchat_auto_join``)."""


class ConfigError(ValueError):
    """A configuration file or value is wrong; the message names the key and the fix."""


class Limits(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Per-server limits; each violation answers a clear error frame."""

    max_frame_bytes: int = 256 * 1024
    max_payload_bytes: int = 64 * 1024
    rate_per_s: float = 20.0
    """Messages/s per participant id, and per HTTP connection whatever ids it posts as
    (0: every rate limit off)."""
    rate_burst: int = 40
    rate_per_address_s: float = 200.0
    """Messages/s from one source address, all its ids, connections and HTTP posts together
    (0: off)."""
    rate_per_address_burst: int = 400
    stream_rate_per_s: float = 500.0
    """MEW stream data frames (``#<stream_id>#<data>``)/s per participant id, an allowance
    apart from ``rate_per_s``: stream frames neither spend nor are refused by the message
    rate (0: off). ``MEWAgent`` sends two frames per model token (progress, then the token)."""
    stream_rate_burst: int = 1000
    stream_bytes_per_s: float = 128 * 1024
    """Bytes/s of stream data frames per participant id: what bounds a writer's share of
    the space whatever its frames' size (0: off)."""
    stream_bytes_burst: int = 512 * 1024
    """Burst of ``stream_bytes_per_s``; never less than ``max_frame_bytes`` (a frame of the
    largest size passes a full allowance)."""
    send_buffer_bytes: int = 1024 * 1024
    history_on_join: int = 50
    history_page_max: int = 1000
    resume_max: int = 10_000
    max_pending_proposals_per_participant: int = 50
    """Open proposals (pending or approved, not yet answered) one participant may have; more
    are refused (``rate_limited``) until some are settled."""
    max_pending_proposals: int = 500
    """Open proposals a space may have; more are refused (``rate_limited``)."""
    allow_lookalike_names: bool = False
    """Accept new participant ids and channel names that differ from an existing one only by
    case or by I/l/1, O/0 (``Alice`` next to ``alice``); refused by default."""
    history_page_bytes: int = 256 * 1024
    """Most bytes of stored messages in one answer (``channel/joined``, ``history/response``,
    ``GET /channels/{name}/messages``); past it the answer says ``has_more`` (at least one
    message is always sent)."""
    handshake_timeout_s: float = 10.0
    presence_coalesce_ms: float = 20.0
    ping_interval_s: float = 30.0
    """WebSocket ping period; a peer that does not answer within half of it is dropped (0: off)."""
    idempotency_ids: int = 200_000
    """Message ids remembered per space for idempotent resends (also: ``idempotency_window_s``,
    10,000 per sender); the store's copy is pruned to the same window while running."""
    idempotency_window_s: float = 86_400.0
    """How long a message id is remembered for idempotent resends (24 h)."""
    max_channels: int = 1000
    """Most channels a space may have; ``channel/create`` past it answers ``channel_limit``."""
    welcome_channels: int = 100
    """Most channels listed in ``system/welcome`` (the rest: ``channel/list``)."""
    header_timeout_s: float = 10.0
    """A new connection must send a complete HTTP request head within this long, or is closed."""
    max_connections: int = 0
    """Connections served at once; more are answered 503 (0: derived from the open-file limit)."""
    max_connections_per_ip: int = 0
    """Connections one address may hold at once (0: half of max_connections)."""
    key_bindings_max: int = 10_000
    """Most names agentchat keys may bind on first use per space (``bind: tofu``; a space's
    ``agentchat_keys.max_bindings`` overrides it; 0: no bound)."""
    key_bindings_per_address_per_hour: int = 60
    """New names one client address may bind per space and hour (a bucket of this many that
    refills over an hour; ``agentchat_keys.bindings_per_address_per_hour`` overrides it; 0,
    or ``rate_per_s`` 0: no bound)."""
    allowed_origins: list[str] = msgspec.field(default_factory=list)
    """Browser origins besides the gateway's own that may open /ws and send state-changing
    requests (``scheme://host[:port]``)."""
    allowed_hosts: list[str] = msgspec.field(default_factory=list)
    """Names besides ``localhost`` and IP addresses that requests may be addressed to (their
    ``Host``): ``chat.example.com``, ``.example.com`` (it and its subdomains), ``*`` (any)."""

    def validate(self) -> None:
        """Raise ConfigError for a nonsensical limit."""
        for name in (
            "max_frame_bytes",
            "max_payload_bytes",
            "send_buffer_bytes",
            "history_page_bytes",
        ):
            if getattr(self, name) < 1024:
                raise ConfigError(f"limits.{name} must be at least 1024 bytes")
        if self.rate_per_s < 0 or self.rate_burst < 0:
            raise ConfigError("limits.rate_per_s and limits.rate_burst must be >= 0 (0 disables)")
        if self.rate_per_address_s < 0 or self.rate_per_address_burst < 0:
            raise ConfigError(
                "limits.rate_per_address_s and limits.rate_per_address_burst must be >= 0 "
                "(0 disables)"
            )
        if (
            min(
                self.stream_rate_per_s,
                self.stream_rate_burst,
                self.stream_bytes_per_s,
                self.stream_bytes_burst,
            )
            < 0
        ):
            raise ConfigError(
                "limits.stream_rate_per_s, stream_rate_burst, stream_bytes_per_s and "
                "stream_bytes_burst must be >= 0 (a rate of 0 turns that stream limit off)"
            )
        if self.history_on_join < 0 or self.history_page_max < 1:
            raise ConfigError("limits.history_on_join must be >= 0, history_page_max >= 1")
        if self.max_pending_proposals_per_participant < 1 or self.max_pending_proposals < 1:
            raise ConfigError(
                "limits.max_pending_proposals_per_participant and limits.max_pending_proposals "
                "must be >= 1"
            )
        if self.idempotency_ids < 1000:
            raise ConfigError("limits.idempotency_ids must be at least 1000")
        if not self.idempotency_window_s >= 60:
            raise ConfigError(
                "limits.idempotency_window_s must be at least 60 seconds (the SDK resends "
                "unacknowledged messages after a reconnect; 86400 is the default)"
            )
        if self.max_channels < 1 or self.welcome_channels < 1:
            raise ConfigError("limits.max_channels and limits.welcome_channels must be >= 1")
        if not self.header_timeout_s > 0:
            raise ConfigError("limits.header_timeout_s must be > 0 seconds")
        if self.max_connections < 0 or self.max_connections_per_ip < 0:
            raise ConfigError(
                "limits.max_connections and limits.max_connections_per_ip must be >= 0 "
                "(0: derived from the open-file limit)"
            )
        if self.key_bindings_max < 0 or self.key_bindings_per_address_per_hour < 0:
            raise ConfigError(
                "limits.key_bindings_max and limits.key_bindings_per_address_per_hour must be "
                ">= 0 (0: no bound)"
            )
        if self.max_connections and self.max_connections_per_ip > self.max_connections:
            raise ConfigError(
                f"limits.max_connections_per_ip ({self.max_connections_per_ip}) must not exceed "
                f"limits.max_connections ({self.max_connections})"
            )
        self.allowed_origins = [_origin_setting(o) for o in self.allowed_origins]
        self.allowed_hosts = [_host_setting(h) for h in self.allowed_hosts]


def _host_setting(text: str) -> str:
    """One ``limits.allowed_hosts`` entry in canonical form, or ConfigError saying why not."""
    host = host_setting(text)
    if host is None:
        raise ConfigError(
            f"--allowed-hosts / limits.allowed_hosts: {text!r} is not a host name; write a "
            "name without scheme or port (chat.example.com), .example.com for a name and its "
            "subdomains, or * to answer any name (no DNS-rebinding protection)"
        )
    return host


def _origin_setting(text: str) -> str:
    """One ``limits.allowed_origins`` entry in canonical form, or ConfigError saying why not."""
    origin = canonical_origin(text)
    if origin is None:
        raise ConfigError(
            f"--allow-origin / limits.allowed_origins: {text!r} is not an origin; write "
            "scheme://host[:port] with scheme http or https and no path, e.g. "
            "http://localhost:5173"
        )
    return origin


class ParticipantConfig(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """One configured participant of a space."""

    kind: ParticipantKind = "agent"
    token_hash: str | None = None
    token_hashes: list[str] = msgspec.field(default_factory=list)
    """Further tokens that authenticate as this participant (MEW's ``tokens:`` list)."""
    capabilities: list[dict[str, Any]] | None = None
    role: Role = "participant"
    pubkeys: list[str] = msgspec.field(default_factory=list)
    """Ed25519 public keys (SPKI PEM) that authenticate as this participant on the agentchat
    dialect, as its token does (``verified`` on that dialect)."""

    def all_token_hashes(self) -> list[str]:
        """Every stored token hash of this participant, ``token_hash`` first."""
        return ([self.token_hash] if self.token_hash else []) + self.token_hashes

    def effective_capabilities(self) -> list[dict[str, Any]]:
        """The configured capabilities, or the defaults for this participant's role and kind."""
        if self.capabilities is not None:
            return self.capabilities
        if self.role == "admin":
            return ADMIN_DEFAULT_CAPABILITIES
        return HUMAN_DEFAULT_CAPABILITIES if self.kind == "human" else AGENT_DEFAULT_CAPABILITIES


class AgentchatKeys(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """How agentchat clients' public keys bind to identities (docs/configuration.md)."""

    bind: Literal["tofu", "config", "off"] = "tofu"
    """tofu: configured keys, and the first key seen for a name owns that name (stored);
    config: only configured keys own names; off: keys own no names (ids only)."""
    ephemeral: Literal["allow", "read_only", "deny"] = "allow"
    """What an open space lets a keyless agentchat client do."""
    allowlist: Literal["off", "strict"] = "off"
    """strict: only configured keys (and tokens) may connect; others get NOT_ALLOWED."""
    max_bindings: int | None = None
    """Most names bound on first use in the space (None: ``limits.key_bindings_max``;
    0: no bound); a new binding past it is refused with NOT_ALLOWED."""
    bindings_per_address_per_hour: int | None = None
    """New names one client address may bind in the space per hour (None:
    ``limits.key_bindings_per_address_per_hour``; 0: no bound); past it RATE_LIMITED."""


class SpaceDefaults(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Defaults for participants that connect in open mode."""

    kind: ParticipantKind = "agent"
    capabilities: list[dict[str, Any]] | None = None


class SpaceConfig(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """A tenant: its channels, participants (with token hashes) and defaults."""

    space: str = "default"
    open: bool = False
    channels: list[str] = msgspec.field(default_factory=lambda: ["#general"])
    participants: dict[str, ParticipantConfig] = msgspec.field(default_factory=dict)
    defaults: SpaceDefaults = msgspec.field(default_factory=SpaceDefaults)
    grant_roles: list[Role] = msgspec.field(default_factory=lambda: ["admin"])
    """Roles whose participants may send ``capability/grant`` and ``capability/revoke``."""
    agentchat_auto_join: list[str] | None = None
    """Channels an agentchat client (IDENTIFY without ``channels``) joins on connect, of those
    its capabilities allow; None: every channel it may join, up to ``AUTO_JOIN_MAX``."""
    agentchat_channels: bool = False
    """Also create agentchat's default channel set (:data:`AGENTCHAT_CHANNELS`)."""
    agentchat_keys: AgentchatKeys = msgspec.field(default_factory=AgentchatKeys)
    health_status: Literal["healthy", "ok"] = "healthy"
    """The word ``GET /health`` answers while all is well: agentchat's ``healthy``, or MEW's
    ``ok`` (MEW's CLI waits for it; a space read from MEW's ``space.yaml`` sets it)."""
    """The public-key policy of agentchat clients (``IDENTIFY {pubkey}``)."""

    def validate(self, source: str = "space config") -> None:
        """Check ids, channel names and capabilities; raise ConfigError naming the bad key."""
        if not SPACE_ID_RE.fullmatch(self.space):
            hint = (
                "; a MEW template's placeholder must be filled in first"
                if "{{" in self.space
                else ""
            )
            raise ConfigError(
                f"{source}: space {self.space!r}: a space id is 1-64 of [A-Za-z0-9_.-] "
                f"(letters, digits, _ . -){hint}, e.g. 'my-space'"
            )
        for ch in self.channels:
            if not is_channel(ch):
                raise ConfigError(
                    f"{source}: channels: {ch!r} is not a channel name "
                    "(write '#name' with 1-31 of [A-Za-z0-9_-], quoted in YAML)"
                )
        if "#general" not in self.channels:
            self.channels.insert(0, "#general")
        if self.agentchat_channels:
            self.channels.extend(c for c in AGENTCHAT_CHANNELS if c not in self.channels)
        for ch in self.agentchat_auto_join or []:
            if not is_channel(ch):
                raise ConfigError(
                    f"{source}: agentchat_auto_join: {ch!r} is not a channel name "
                    "(write '#name' with 1-31 of [A-Za-z0-9_-], quoted in YAML)"
                )
        if len(self.agentchat_auto_join or []) > AUTO_JOIN_MAX:
            raise ConfigError(
                f"{source}: agentchat_auto_join lists more than {AUTO_JOIN_MAX} channels; "
                "list fewer (clients JOIN the others themselves)"
            )
        for pid, p in self.participants.items():
            if not is_participant_id(pid):
                raise ConfigError(
                    f"{source}: participants: {pid!r} is not a legal id (1-32 of [A-Za-z0-9_.-])"
                )
            reserved = reserved_id_error(pid)
            if reserved is not None:
                raise ConfigError(f"{source}: participants: {reserved}")
            for h in p.all_token_hashes():
                if not h.startswith("sha256:"):
                    raise ConfigError(
                        f"{source}: participants.{pid}.token_hash(es) must look like "
                        "'sha256:<hex>'; create one with `hubbub token create`"
                    )
            for n, pem in enumerate(p.pubkeys):
                try:
                    load_pubkey(pem)
                except ProtocolError:
                    raise ConfigError(
                        f"{source}: participants.{pid}.pubkeys[{n}] is not an Ed25519 public "
                        "key in SPKI PEM ('-----BEGIN PUBLIC KEY-----' …; agentchat keeps it "
                        "in .agentchat/identity.json as 'pubkey')"
                    ) from None
            if p.capabilities is not None:
                try:
                    p.capabilities = validate_capabilities(p.capabilities)
                except CapabilityError as exc:
                    raise ConfigError(f"{source}: participants.{pid}.capabilities: {exc}") from None
        for name in ("max_bindings", "bindings_per_address_per_hour"):
            value = getattr(self.agentchat_keys, name)
            if value is not None and value < 0:
                raise ConfigError(
                    f"{source}: agentchat_keys.{name} must be >= 0 (0: no bound; leave it out "
                    "for the server's limit)"
                )
        if self.defaults.capabilities is not None:
            try:
                self.defaults.capabilities = validate_capabilities(self.defaults.capabilities)
            except CapabilityError as exc:
                raise ConfigError(f"{source}: defaults.capabilities: {exc}") from None

    def open_capabilities(self) -> list[dict[str, Any]]:
        """Capabilities for an unconfigured participant in open mode."""
        if self.defaults.capabilities is not None:
            return self.defaults.capabilities
        return OPEN_MODE_CAPABILITIES


def open_space(space: str = "default") -> SpaceConfig:
    """The explicit open-mode space that `hubbub serve` without a config runs."""
    cfg = SpaceConfig(space=space, open=True)
    cfg.validate("open mode")
    return cfg


def load_space(path: str | os.PathLike[str]) -> SpaceConfig:
    """Read and validate a ``space.yaml``, hubbub's or MEW's (what MEW's format sets that
    hubbub does not use is logged, a warning a line)."""
    cfg, notes = read_space(path)
    for note in notes:
        log.warning("%s", note)
    return cfg


def read_space(path: str | os.PathLike[str]) -> tuple[SpaceConfig, list[str]]:
    """Read and validate a ``space.yaml`` in hubbub's format or MEW's; with the config, one
    line for each MEW setting that hubbub does not use (none for hubbub's format)."""
    p = Path(path)
    try:
        raw = yaml.safe_load(p.read_text(encoding="utf-8")) or {}
    except FileNotFoundError:
        raise ConfigError(
            f"space config {p} does not exist; create it with "
            f"`hubbub token create --space-config {p} --id <id>`"
        ) from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{p} is not valid YAML: {exc}") from None
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{p}: the top level must be a mapping (space:, channels:, ...)")
    notes: list[str] = []
    if is_mew_space(raw):
        try:
            mew = translate(raw, p, hash_token)
        except MewSpaceError as exc:
            raise ConfigError(str(exc)) from None
        raw, notes = mew.config, mew.notes
    raw = dict(raw)
    people = raw.pop("participants", None) or {}
    if not isinstance(people, Mapping):
        raise ConfigError(f"{p}: participants must be a mapping of id -> settings")
    cfg = _convert(raw, SpaceConfig, p, "")
    for pid, entry in people.items():
        cfg.participants[str(pid)] = _convert(
            entry or {}, ParticipantConfig, p, f"participants.{pid}."
        )
    cfg.validate(str(p))
    return cfg, notes


_UNKNOWN_FIELD = re.compile(r"Object contains unknown field `(.+)`")


def _convert(raw: object, typ: type[_T], path: Path, prefix: str) -> _T:
    """msgspec.convert with the error's location written as a dotted key (a misspelt key
    with the known key it is closest to)."""
    try:
        return msgspec.convert(raw, typ)
    except msgspec.ValidationError as exc:
        text = str(exc)
        loc = ""
        if " - at `$." in text:
            text, _, loc = text.partition(" - at `$.")
            loc = loc.rstrip("`")
        unknown = _UNKNOWN_FIELD.fullmatch(text)
        if unknown is not None:
            known = _field_names(typ, loc)
            hint = did_you_mean(unknown[1], known) if known else ""
            where = f"{prefix}{loc}".rstrip(".")
            raise ConfigError(
                f"{path}: {where + ': ' if where else ''}unknown key {unknown[1]!r}{hint}"
            ) from None
        where = f" (at {prefix}{loc})" if loc else f" (at {prefix.rstrip('.')})" if prefix else ""
        raise ConfigError(f"{path}: {text}{where}") from None


def _field_names(typ: type[Any], loc: str) -> list[str]:
    """The keys of the struct at dotted ``loc`` inside struct ``typ`` ([] if none is there)."""
    for part in filter(None, loc.split(".")):
        fields = {f.name: f.type for f in msgspec.structs.fields(typ)}
        inner = fields.get(part.partition("[")[0])
        if not (isinstance(inner, type) and issubclass(inner, msgspec.Struct)):
            return []
        typ = inner
    return [f.name for f in msgspec.structs.fields(typ)]


def space_yaml(cfg: SpaceConfig) -> str:
    """A space config as the YAML text of hubbub's format."""
    return yaml.safe_dump(msgspec.to_builtins(cfg), sort_keys=False)


def save_space(cfg: SpaceConfig, path: str | os.PathLike[str]) -> None:
    """Write a space config back as YAML (refused for a MEW space file, which hubbub reads but
    never rewrites)."""
    p = Path(path)
    if p.exists() and is_mew_file(p):
        raise ConfigError(
            f"{p} is a MEW space file; hubbub does not rewrite it: put the token in "
            f".mew/tokens/<id>.token or the participant's tokens: list (MEW's places), or run "
            f"`hubbub space import {p} -o hubbub-space.yaml` and use that file"
        )
    p.write_text(space_yaml(cfg), encoding="utf-8")


def is_mew_file(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` holds a space config in MEW's format (``space: {id: ...}``)."""
    try:
        raw = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return False
    return isinstance(raw, Mapping) and is_mew_space(raw)


def hash_token(token: str) -> str:
    """The stored form of a token: ``sha256:<hex>`` (tokens are random, so no salt is needed)."""
    return "sha256:" + hashlib.sha256(token.encode()).hexdigest()


def new_token() -> str:
    """A new random bearer token."""
    return "hb_" + secrets.token_urlsafe(32)


def token_matches(token: str, stored_hash: str) -> bool:
    """Constant-time comparison of a presented token with a stored hash."""
    return hmac.compare_digest(hash_token(token), stored_hash)


def limits_from_env(base: Limits | None = None) -> Limits:
    """Limits with ``HUBBUB_<NAME>`` environment overrides applied (e.g. HUBBUB_RATE_PER_S)."""
    lim = base or Limits()
    for field in msgspec.structs.fields(Limits):
        env = os.environ.get("HUBBUB_" + field.name.upper())
        if env is None:
            continue
        if field.type == list[str]:
            setattr(lim, field.name, [part.strip() for part in env.split(",") if part.strip()])
            continue
        if field.type is bool:
            flag = env.strip().lower()
            if flag not in ("1", "true", "yes", "on", "0", "false", "no", "off"):
                raise ConfigError(f"HUBBUB_{field.name.upper()}={env!r} is not true or false")
            setattr(lim, field.name, flag in ("1", "true", "yes", "on"))
            continue
        try:
            value: Any = float(env) if field.type is float else int(env)
        except ValueError:
            raise ConfigError(f"HUBBUB_{field.name.upper()}={env!r} is not a number") from None
        setattr(lim, field.name, value)
    lim.validate()
    return lim


class EngineSettings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """The coordination engines' settings; each reads ``AGENTCHAT_<NAME>`` from the environment."""

    respond_enabled: bool = True
    respond_ttl_ms: float = 45_000
    claim_max_skew_ms: float = 2_000
    cb_max_duration_s: float = 3_600
    cb_max_per_agent: int = 50
    cb_max_per_space: int = 10_000
    cb_max_payload: int = 500
    cb_poll_ms: float = 1_000
    cb_grace_s: float = 30
    sleep_max_buffer: int = 50
    unclaimed_notice_s: float = 30
    """An open question from a person that no agent claims or answers within this long gets
    its asker a ``system/notice`` (``notice: unclaimed``, "no agent took this"); 0: never."""

    def validate(self) -> None:
        """Raise ConfigError for a setting that cannot work."""
        for name in msgspec.structs.fields(self):
            value = getattr(self, name.name)
            if isinstance(value, bool):
                continue
            if not math.isfinite(value):
                raise ConfigError(
                    f"AGENTCHAT_{name.name.upper()} must be a finite number (got {value})"
                )
            if value < 0:
                raise ConfigError(f"AGENTCHAT_{name.name.upper()} must be >= 0 (got {value})")
        if self.cb_poll_ms <= 0:
            raise ConfigError("AGENTCHAT_CB_POLL_MS must be > 0 (it bounds the timer sleep)")
        if self.sleep_max_buffer < 1:
            raise ConfigError("AGENTCHAT_SLEEP_MAX_BUFFER must be >= 1")


_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def engine_settings_from_env(environ: Mapping[str, str] | None = None) -> EngineSettings:
    """Engine settings with ``AGENTCHAT_*`` environment overrides applied."""
    env = os.environ if environ is None else environ
    settings = EngineSettings()
    for field in msgspec.structs.fields(EngineSettings):
        name = "AGENTCHAT_" + field.name.upper()
        raw = env.get(name)
        if raw is None:
            continue
        value: Any
        try:
            if field.type is bool:
                low = raw.strip().lower()
                if low not in _TRUE | _FALSE:
                    raise ValueError
                value = low in _TRUE
            elif field.type is int:
                value = int(raw)
            else:
                value = float(raw)
                if not math.isfinite(value):
                    raise ValueError
        except ValueError:
            kind = (
                "true or false"
                if field.type is bool
                else "a whole number"
                if field.type is int
                else "a finite number"
            )
            raise ConfigError(f"{name}={raw!r} is not {kind}") from None
        setattr(settings, field.name, value)
    settings.validate()
    return settings
