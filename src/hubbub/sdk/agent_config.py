"""Agent configuration (document 003 ``AgentConfig``): keyword arguments, a YAML/JSON file, and
the environment.

Precedence, lowest first: defaults < the file < ``MEW_AGENT_CONFIG`` (a JSON object, or a path
to a file) < ``MEW_GATEWAY`` / ``MEW_SPACE`` / ``MEW_TOKEN`` / ``MEW_PARTICIPANT_ID`` < keyword
arguments. Keys are snake_case; the camelCase spellings of document 003 (``systemPrompt``,
``reasoningEnabled``, ``thinkingEnabled``...) are accepted too. String values of files and of
``MEW_AGENT_CONFIG`` expand ``${VAR}`` and ``${VAR:-default}`` from the environment (``$$`` is
a literal ``$``). A wrong key or value is an :class:`AgentConfigError` naming it::

    agent.yaml: unknown key 'max_iteration' (did you mean 'max_iterations'?)
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import types
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal, Union, get_args, get_origin, get_type_hints

import yaml

from hubbub.errors import HubbubError
from hubbub.hints import did_you_mean
from hubbub.llm.factory import ModelSettings, Provider
from hubbub.protocol.ids import is_participant_id
from hubbub.sdk.floor import Coordination, FloorSettings, HumanPolicy
from hubbub.sdk.options import DEFAULT_GATEWAY, ParticipantOptions

LogLevel = Literal["debug", "info", "warning", "error"]

DEFAULT_SYSTEM_PROMPT: Final = (
    "You are {name}, an agent in a shared chat channel with people and other agents. "
    "Answer briefly and to the point. The tools you are offered belong to other participants; "
    "use them when they help."
)
DEFAULT_REASON_PROMPT: Final = (
    "Think about this request: {input}\n"
    "Available tools: {tools}\n"
    "Say in one or two sentences how you will approach it, then call the tools you need, "
    "or answer directly if no tool is needed."
)
DEFAULT_ACT_PROMPT: Final = (
    "Observations so far:\n{observation}\n"
    "Call further tools if they are still needed for: {objective}\n"
    "Otherwise give the final answer."
)
DEFAULT_RESPOND_PROMPT: Final = (
    "Based on these results:\n{observation}\nWrite the final answer to: {objective}"
)
DEFAULT_CLASSIFY_PROMPT: Final = (
    "You are {name}, an agent in a shared chat channel.\n"
    "Your skills: {skills}\n"
    "Your tools: {tools}\n"
    "Recent conversation:\n{history}\n"
    "New message from {sender}: {text}\n\n"
    "Should you respond to this new message? Consider: is it a question you can answer, "
    "is it about your skills (when you have any, answer only what they cover: other agents "
    "cover the rest), can you add something nobody else will?\n"
    'Answer with only a JSON object: {"should_respond": true or false, '
    '"confidence": a number from 0 to 1, "reason": "a short reason"}'
)
DEFAULT_COVERED_PROMPT: Final = (
    "You are {name}, an agent in a shared chat channel. You drafted an answer to this "
    "message, but others answered while you waited for your turn.\n"
    "Question: {input}\n"
    "Already said:\n{replies}\n"
    "Your draft: {draft}\n\n"
    "Does your draft add something substantially new to what was already said, or does it "
    "make substantially the same point?\n"
    'Answer with only a JSON object: {"adds_new": true or false, "reason": "a short reason"}'
)

_ENV_FIELDS: Final = (
    ("MEW_GATEWAY", "gateway"),
    ("MEW_SPACE", "space"),
    ("MEW_TOKEN", "token"),
    ("MEW_PARTICIPANT_ID", "participant_id"),
)
FLOOR_ENV: Final[dict[str, tuple[str, type[Any]]]] = {
    "AGENTCHAT_CSMA_MIN_MS": ("csma_min_ms", int),
    "AGENTCHAT_CSMA_MAX_MS": ("csma_max_ms", int),
    "AGENTCHAT_SETTLE_MS": ("settle_ms", int),
    "AGENTCHAT_JITTER_PERCENT": ("jitter_percent", float),
}
"""The environment variables of documents 000/001 that :meth:`AgentConfig.load` reads."""
DEFAULT_CSMA_MIN_MS: Final = 2000
DEFAULT_CSMA_MAX_MS: Final = 8000
DEFAULT_SETTLE_MS: Final = 5000
DEFAULT_CONTINUITY_S: Final = 180.0
DEFAULT_JITTER_PERCENT: Final = 0.5
CsmaTimer = Literal["local", "server"]
_ALIASES: Final = {
    "thinking_enabled": "reasoning_enabled",
    "id": "participant_id",
    "participant": "participant_id",
    "log": "log_level",
}
_VAR = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


class AgentConfigError(HubbubError, ValueError):
    """A wrong agent configuration; the message names the source, the key and the fix."""


@dataclass(frozen=True, kw_only=True)
class Prompts:
    """Prompt templates of the ReAct phases (placeholders: ``{input}``, ``{tools}``,
    ``{objective}``, ``{observation}``, ``{name}``; the classifier also ``{history}``,
    ``{sender}``, ``{text}``, ``{skills}``; ``covered``: ``{name}``, ``{input}``, ``{replies}``,
    ``{draft}``)."""

    system: str | None = None
    """Replaces ``system_prompt`` (and the default system prompt) when set."""
    reason: str = DEFAULT_REASON_PROMPT
    act: str = DEFAULT_ACT_PROMPT
    respond: str = DEFAULT_RESPOND_PROMPT
    classify: str = DEFAULT_CLASSIFY_PROMPT
    covered: str = DEFAULT_COVERED_PROMPT
    """Asks whether a draft adds anything to answers others gave meanwhile (CSMA)."""


@dataclass(frozen=True, kw_only=True)
class OfflineSettings:
    """Settings of the offline scripted model."""

    script: str | None = None
    """Path of a script file (see ``examples/offline-script.yaml``)."""
    latency_s: float = 0.0
    tokens_per_s: float = 0.0


@dataclass(frozen=True, kw_only=True)
class AgentConfig:
    """Everything an :class:`~hubbub.sdk.Agent` needs; defaults run against ``hubbub serve``."""

    # --- the participant
    participant_id: str = ""
    """Defaults to ``name`` when that is a legal id."""
    gateway: str = DEFAULT_GATEWAY
    space: str = "default"
    token: str | None = None
    channels: tuple[str, ...] = ("#general",)
    kind: str = "agent"
    capabilities: list[dict[str, Any]] | None = None
    request_timeout: float = 30.0
    # --- the agent (document 003)
    name: str = ""
    """How people address the agent in text; defaults to ``participant_id``."""
    system_prompt: str | None = None
    model: str | None = None
    """Model name (``gpt-4o-mini``, ``llama3.2``...); the provider's default if unset."""
    provider: Provider = "auto"
    base_url: str | None = None
    api_key: str | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    reasoning_enabled: bool = True
    """ReAct loop with ``reasoning/*`` events; ``False`` for models that reason internally."""
    auto_respond: bool = True
    max_iterations: int = 5
    prompts: Prompts = field(default_factory=Prompts)
    log_level: LogLevel = "info"
    offline: OfflineSettings = field(default_factory=OfflineSettings)
    # --- when to answer (document 003, "Chat Message Response Strategy")
    respond_to_questions: bool = True
    """Ask the model whether to answer messages that neither address nor mention the agent."""
    respond_to_mentions: bool = True
    respond_to_direct: bool = True
    confidence_threshold: float = 0.5
    context_window: int = 10
    rate_limit_per_minute: int = 10
    """Unprompted answers per conversation (a channel, or the DMs with one peer) per minute;
    messages addressed to the agent are always answered and do not count; 0 turns it off."""
    # --- tools and history
    tool_timeout: float = 30.0
    proposal_timeout: float = 300.0
    """How long a tool call that became a proposal waits for a human."""
    discovery_timeout: float = 5.0
    discovery_retries: int = 3
    discovery_retry_delay: float = 0.5
    history_limit: int = 60
    queue_limit: int = 100
    """Messages waiting for the agent (while it answers) before new ones are rejected."""
    # --- good citizenship: floor claims, CSMA, settle window, idle nudges (documents 000, 001)
    coordination: Coordination = "both"
    """``both`` (CSMA delay and floor claims), ``csma``, ``claims`` or ``none`` (in a file
    also ``coordination: {mode: both, humans: coordinate}``)."""
    csma_min_ms: int = DEFAULT_CSMA_MIN_MS
    csma_max_ms: int = DEFAULT_CSMA_MAX_MS
    csma_timer: CsmaTimer = "local"
    """``local``: the agent's own timer; ``server``: a ``@@cb`` CSMA check callback."""
    skills: tuple[str, ...] = ()
    """Skill tags: the CSMA band is ranked by how much of a message's topics they cover
    (by topic vocabulary) times the classifier's confidence (:mod:`hubbub.sdk.csma`)."""
    settle_ms: int = DEFAULT_SETTLE_MS
    """Channel messages within this window of a waiting one are answered in one turn."""
    continuity_s: float = DEFAULT_CONTINUITY_S
    """For this long after the agent answered someone in a channel, that person's next
    unaddressed message there goes first to it (the shortest CSMA band, so it claims first);
    another agent's answer there makes this one defer (0: no continuity)."""
    humans: HumanPolicy = "coordinate"
    """``coordination.humans`` in a file: ``coordinate`` (a person's unaddressed channel
    message goes through CSMA and floor control, so one agent answers it) or ``exempt``
    (every agent that judges it relevant answers at once). Addressed messages are answered
    at once either way, and a person is never yielded nor blocked by a claim."""
    idle_nudge_s: float | None = None
    """Self-prompting: after this long without messages, a turn with a short system note."""
    jitter_percent: float = DEFAULT_JITTER_PERCENT
    """The idle nudge period varies by up to ± this fraction (0.5 = 50-150 %)."""

    def __post_init__(self) -> None:
        if not self.participant_id:
            if self.name and is_participant_id(self.name):
                object.__setattr__(self, "participant_id", self.name)
            else:
                raise AgentConfigError(
                    "participant_id is required: set it in the config file, MEW_PARTICIPANT_ID "
                    "or --id"
                )
        if not is_participant_id(self.participant_id):
            raise AgentConfigError(
                f"participant_id {self.participant_id!r} is not legal: use 1-32 of [A-Za-z0-9_.-]"
            )
        if not self.name:
            object.__setattr__(self, "name", self.participant_id)
        if isinstance(self.channels, str):
            object.__setattr__(self, "channels", (self.channels,))
        object.__setattr__(self, "channels", tuple(self.channels))
        if isinstance(self.skills, str):
            object.__setattr__(self, "skills", (self.skills,))
        object.__setattr__(self, "skills", tuple(self.skills))
        checks: list[tuple[bool, str]] = [
            (self.max_iterations >= 1, "max_iterations must be >= 1"),
            (0.0 <= self.confidence_threshold <= 1.0, "confidence_threshold must be in 0..1"),
            (self.context_window >= 1, "context_window must be >= 1"),
            (self.rate_limit_per_minute >= 0, "rate_limit_per_minute must be >= 0 (0 = off)"),
            (self.discovery_retries >= 0, "discovery_retries must be >= 0"),
            (self.history_limit >= 4, "history_limit must be >= 4"),
            (self.queue_limit >= 1, "queue_limit must be >= 1"),
            (self.csma_min_ms >= 0, "csma_min_ms must be >= 0 (milliseconds)"),
            (self.csma_max_ms >= 0, "csma_max_ms must be >= 0 (milliseconds)"),
            (
                self.csma_min_ms <= self.csma_max_ms,
                f"csma_min_ms ({self.csma_min_ms}) must not exceed csma_max_ms "
                f"({self.csma_max_ms}); AGENTCHAT_CSMA_MIN_MS/AGENTCHAT_CSMA_MAX_MS set them too",
            ),
            (self.settle_ms >= 0, "settle_ms must be >= 0 (milliseconds; 0 = no batching)"),
            (
                self.continuity_s >= 0,
                "continuity_s must be >= 0 seconds (0 = a follow-up goes to anyone)",
            ),
            (
                0 <= self.jitter_percent < 1,
                "jitter_percent must be in [0, 1) (0.5 = the period varies by +-50 %)",
            ),
            (
                self.idle_nudge_s is None or self.idle_nudge_s > 0,
                "idle_nudge_s must be > 0 seconds (or unset for no nudges)",
            ),
        ]
        for name in (
            "request_timeout",
            "tool_timeout",
            "proposal_timeout",
            "discovery_timeout",
            "discovery_retry_delay",
        ):
            checks.append((getattr(self, name) > 0, f"{name} must be > 0 (seconds)"))
        for ok, message in checks:
            if not ok:
                raise AgentConfigError(message)
        try:
            self.participant_options()
        except ValueError as exc:
            raise AgentConfigError(str(exc)) from None

    # ------------------------------------------------------------------ derived options

    def participant_options(self) -> ParticipantOptions:
        """The :class:`~hubbub.sdk.ParticipantOptions` of the agent's participant."""
        return ParticipantOptions(
            participant_id=self.participant_id,
            gateway=self.gateway,
            space=self.space,
            token=self.token,
            channels=self.channels,
            kind=self.kind,
            name=self.name if self.name != self.participant_id else None,
            capabilities=self.capabilities,
            request_timeout=self.request_timeout,
        )

    def model_settings(self) -> ModelSettings:
        """The :class:`~hubbub.llm.ModelSettings` for :func:`~hubbub.llm.create_model`."""
        return ModelSettings(
            provider=self.provider,
            model=self.model,
            base_url=self.base_url,
            api_key=self.api_key,
            temperature=self.temperature,
            max_tokens=self.max_tokens,
            offline_script=self.offline.script,
            offline_latency_s=self.offline.latency_s,
            offline_tokens_per_s=self.offline.tokens_per_s,
        )

    def floor_settings(self) -> FloorSettings:
        """The :class:`~hubbub.sdk.floor.FloorSettings` of the agent's floor coordinator."""
        return FloorSettings(
            coordination=self.coordination,
            csma_min_ms=self.csma_min_ms,
            csma_max_ms=self.csma_max_ms,
            settle_ms=self.settle_ms,
            skills=self.skills,
            continuity_ms=self.continuity_s * 1000,
        )

    def replace(self, **changes: Any) -> AgentConfig:
        """A copy with some fields changed (validated like keyword arguments)."""
        return AgentConfig.from_mapping(changes, "arguments", base=self, expand=False)

    # ------------------------------------------------------------------ loading

    @classmethod
    def from_mapping(
        cls,
        data: Mapping[str, Any],
        source: str = "config",
        *,
        base: AgentConfig | None = None,
        env: Mapping[str, str] | None = None,
        expand: bool = True,
    ) -> AgentConfig:
        """A config from parsed YAML/JSON (over ``base``); ``${VAR}`` is expanded from ``env``."""
        values = _as_dict(base) if base is not None else {}
        _merge(values, _normalize(data, source, env, expand))
        return _build(values, source)

    @classmethod
    def from_file(cls, path: str | Path, *, env: Mapping[str, str] | None = None) -> AgentConfig:
        """A config from a YAML or JSON file."""
        return _build(_read_file(Path(path), env), str(path))

    @classmethod
    def load(
        cls,
        path: str | Path | None = None,
        *,
        env: Mapping[str, str] | None = None,
        **overrides: Any,
    ) -> AgentConfig:
        """File, then ``MEW_AGENT_CONFIG``, then ``MEW_*`` variables, then ``overrides``."""
        source_env = os.environ if env is None else env
        values: dict[str, Any] = {}
        sources: list[str] = []
        if path is not None:
            _merge(values, _read_file(Path(path), source_env))
            sources.append(str(path))
        extra = source_env.get("MEW_AGENT_CONFIG", "").strip()
        if extra:
            if extra.startswith("{"):
                try:
                    data = json.loads(extra)
                except json.JSONDecodeError as exc:
                    raise AgentConfigError(f"MEW_AGENT_CONFIG: not valid JSON: {exc}") from None
                if not isinstance(data, dict):
                    raise AgentConfigError("MEW_AGENT_CONFIG: must be a JSON object")
                _merge(values, _normalize(data, "MEW_AGENT_CONFIG", source_env, True))
            else:
                _merge(values, _read_file(Path(extra), source_env))
            sources.append("MEW_AGENT_CONFIG")
        for var, key in _ENV_FIELDS:
            if source_env.get(var):
                values[key] = source_env[var]
        values.update(floor_env(source_env))
        _merge(values, _normalize(overrides, "arguments", source_env, False))
        return _build(values, " + ".join(sources) or "config")


# ---------------------------------------------------------------------- helpers


def floor_env(env: Mapping[str, str]) -> dict[str, Any]:
    """The ``AGENTCHAT_*`` floor settings set in ``env``, checked (errors name the variable)."""
    out: dict[str, Any] = {}
    for var, (key, kind) in FLOOR_ENV.items():
        raw = env.get(var, "").strip()
        if not raw:
            continue
        try:
            value: float = int(raw) if kind is int else float(raw)
        except ValueError:
            what = "a whole number of milliseconds" if kind is int else "a number"
            raise AgentConfigError(f"{var} must be {what}, got {raw!r}") from None
        if value < 0:
            raise AgentConfigError(f"{var} must be >= 0, got {raw!r}")
        if key == "jitter_percent" and value >= 1:
            raise AgentConfigError(
                f"{var} must be below 1 (0.5 = the period varies by +-50 %), got {raw!r}"
            )
        out[key] = value
    lo, hi = out.get("csma_min_ms"), out.get("csma_max_ms")
    if lo is not None and hi is not None and lo > hi:
        raise AgentConfigError(
            f"AGENTCHAT_CSMA_MIN_MS ({lo}) must not exceed AGENTCHAT_CSMA_MAX_MS ({hi})"
        )
    return out


def expand_vars(text: str, env: Mapping[str, str], where: str = "") -> str:
    """Expand ``${VAR}`` and ``${VAR:-default}`` from ``env``; ``$$`` is a literal ``$``."""

    def sub(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        name, default = m.group(1), m.group(2)
        value = env.get(name)
        if value is None or (value == "" and default is not None):
            if default is not None:
                return default
            at = f"{where}: " if where else ""
            raise AgentConfigError(
                f"{at}${{{name}}} is not set (export {name}, or write ${{{name}:-default}})"
            )
        return value

    return _VAR.sub(sub, text)


def _expand(value: Any, env: Mapping[str, str], where: str) -> Any:
    if isinstance(value, str):
        return expand_vars(value, env, where)
    if isinstance(value, list):
        return [_expand(v, env, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, dict):
        return {k: _expand(v, env, f"{where}.{k}") for k, v in value.items()}
    return value


def _snake(key: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", key).lower().replace("-", "_")


def _nested_types() -> dict[str, type[Any]]:
    return {"prompts": Prompts, "offline": OfflineSettings}


def _normalize(
    data: Mapping[str, Any], source: str, env: Mapping[str, str] | None, expand: bool
) -> dict[str, Any]:
    """Canonical keys, unknown ones refused with a suggestion, ``${VAR}`` expanded."""
    env = os.environ if env is None else env
    known = [f.name for f in dataclasses.fields(AgentConfig)]
    out: dict[str, Any] = {}
    for raw_key, value in data.items():
        key = _ALIASES.get(_snake(str(raw_key)), _snake(str(raw_key)))
        if key == "exempt_humans":
            raise AgentConfigError(
                f"{source}: 'exempt_humans' is gone: write coordination.humans: exempt "
                "(every agent answers a person at once) or coordinate (the default: one does)"
            )
        if key == "coordination" and isinstance(value, Mapping):
            out.update(_coordination_section(value, source, env, expand))
            continue
        if key not in known:
            raise AgentConfigError(f"{source}: unknown key {raw_key!r}{_hint(str(raw_key), known)}")
        if expand:
            value = _expand(value, env, f"{source}: {key}")
        nested = _nested_types().get(key)
        if nested is not None and isinstance(value, Mapping):
            value = _normalize_nested(value, nested, f"{source}: {key}")
        out[key] = value
    return out


def _coordination_section(
    data: Mapping[str, Any], source: str, env: Mapping[str, str], expand: bool
) -> dict[str, Any]:
    """``coordination: {mode: both, humans: coordinate}`` as the flat fields ``coordination``
    and ``humans``."""
    where = f"{source}: coordination"
    out: dict[str, Any] = {}
    for raw_key, value in data.items():
        key = _snake(str(raw_key))
        if key not in ("mode", "humans"):
            raise AgentConfigError(
                f"{where}: unknown key {raw_key!r}{_hint(str(raw_key), ['mode', 'humans'])}"
            )
        if expand:
            value = _expand(value, env, f"{where}.{key}")
        out["coordination" if key == "mode" else "humans"] = value
    return out


def _normalize_nested(data: Mapping[str, Any], cls: type[Any], where: str) -> dict[str, Any]:
    known = [f.name for f in dataclasses.fields(cls)]
    out: dict[str, Any] = {}
    for raw_key, value in data.items():
        key = _snake(str(raw_key))
        if key not in known:
            raise AgentConfigError(f"{where}: unknown key {raw_key!r}{_hint(str(raw_key), known)}")
        out[key] = value
    return out


def _hint(key: str, known: list[str]) -> str:
    return did_you_mean(_snake(key), known)


def _merge(into: dict[str, Any], new: Mapping[str, Any]) -> None:
    """Merge ``new`` over ``into``; nested sections (``prompts``, ``offline``) merge by key."""
    for key, value in new.items():
        old = into.get(key)
        if key in _nested_types() and isinstance(old, dict) and isinstance(value, dict):
            into[key] = {**old, **value}
        else:
            into[key] = value


def _as_dict(config: AgentConfig) -> dict[str, Any]:
    out = {f.name: getattr(config, f.name) for f in dataclasses.fields(config)}
    for key in _nested_types():
        out[key] = dataclasses.asdict(out[key])
    return out


def _read_file(path: Path, env: Mapping[str, str] | None) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise AgentConfigError(f"{path}: cannot read the agent config: {exc.strerror}") from None
    try:
        data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        raise AgentConfigError(f"{path}: not valid {path.suffix[1:] or 'YAML'}: {exc}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise AgentConfigError(f"{path}: the agent config must be a mapping of keys to values")
    values = _normalize(data, str(path), env, True)
    offline = values.get("offline")
    script = offline.get("script") if isinstance(offline, dict) else None
    if isinstance(script, str) and script and not Path(script).is_absolute():
        # a relative script path is relative to the config file that names it
        offline["script"] = str(path.parent / script)  # type: ignore[index]
    return values


def _build(values: Mapping[str, Any], source: str) -> AgentConfig:
    hints = get_type_hints(AgentConfig)
    kwargs: dict[str, Any] = {}
    for key, value in values.items():
        kwargs[key] = _coerce(value, hints[key], f"{source}: {key}")
    try:
        return AgentConfig(**kwargs)
    except AgentConfigError as exc:
        raise AgentConfigError(f"{source}: {exc}") from None


_BOOLS: Final = {"true": True, "yes": True, "on": True, "1": True}
_BOOLS_FALSE: Final = {"false": False, "no": False, "off": False, "0": False}


def _coerce(value: Any, hint: Any, where: str) -> Any:
    """Check ``value`` against the field type ``hint``; strings may spell numbers/booleans."""
    origin = get_origin(hint)
    args = get_args(hint)
    if origin in (Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        return _coerce(value, inner[0], where)
    if origin is Literal:
        text = value.lower() if isinstance(value, str) else value
        if text == "warn":
            text = "warning"
        if text not in args:
            raise AgentConfigError(
                f"{where} must be one of {', '.join(map(str, args))}, got {value!r}"
            )
        return text
    if hint in (Prompts, OfflineSettings):
        if isinstance(value, hint):
            return value
        if not isinstance(value, Mapping):
            raise AgentConfigError(f"{where} must be a mapping")
        nested = get_type_hints(hint)
        data = _normalize_nested(value, hint, where)
        return hint(**{k: _coerce(v, nested[k], f"{where}.{k}") for k, v in data.items()})
    if hint is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in {**_BOOLS, **_BOOLS_FALSE}:
            return {**_BOOLS, **_BOOLS_FALSE}[value.lower()]
        raise AgentConfigError(f"{where} must be true or false, got {value!r}")
    if hint is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, str) and re.fullmatch(r"-?\d+", value.strip()):
            return int(value)
        raise AgentConfigError(f"{where} must be an integer, got {value!r}")
    if hint is float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                pass
        raise AgentConfigError(f"{where} must be a number, got {value!r}")
    if hint is str:
        if isinstance(value, str):
            return value
        raise AgentConfigError(f"{where} must be a string, got {value!r}")
    if origin is tuple:  # channels, skills
        items = [value] if isinstance(value, str) else value
        if not isinstance(items, list | tuple) or not all(isinstance(i, str) for i in items):
            what = "skill tags" if where.endswith("skills") else "channel names"
            raise AgentConfigError(f"{where} must be a list of {what}")
        return tuple(items)
    if origin is list:  # capabilities
        if not isinstance(value, list) or not all(isinstance(i, dict) for i in value):
            raise AgentConfigError(f"{where} must be a list of capability mappings")
        return value
    return value


__all__ = [
    "DEFAULT_SYSTEM_PROMPT",
    "FLOOR_ENV",
    "AgentConfig",
    "AgentConfigError",
    "CsmaTimer",
    "LogLevel",
    "OfflineSettings",
    "Prompts",
    "expand_vars",
    "floor_env",
]
