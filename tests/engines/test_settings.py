"""``engine_settings_from_env``: every ``AGENTCHAT_*`` variable, defaults, parsing, errors."""

from __future__ import annotations

import msgspec
import pytest

from hubbub.server.config import ConfigError, EngineSettings, engine_settings_from_env

VARIABLES = {
    "AGENTCHAT_RESPOND_ENABLED": ("respond_enabled", True),
    "AGENTCHAT_RESPOND_TTL_MS": ("respond_ttl_ms", 45_000),
    "AGENTCHAT_CLAIM_MAX_SKEW_MS": ("claim_max_skew_ms", 2_000),
    "AGENTCHAT_CB_MAX_DURATION_S": ("cb_max_duration_s", 3_600),
    "AGENTCHAT_CB_MAX_PER_AGENT": ("cb_max_per_agent", 50),
    "AGENTCHAT_CB_MAX_PER_SPACE": ("cb_max_per_space", 10_000),
    "AGENTCHAT_CB_MAX_PAYLOAD": ("cb_max_payload", 500),
    "AGENTCHAT_CB_POLL_MS": ("cb_poll_ms", 1_000),
    "AGENTCHAT_CB_GRACE_S": ("cb_grace_s", 30),
    "AGENTCHAT_SLEEP_MAX_BUFFER": ("sleep_max_buffer", 50),
    "AGENTCHAT_UNCLAIMED_NOTICE_S": ("unclaimed_notice_s", 30),
}
"""Every variable the gateway reads, the setting it fills and its default (the documents'
defaults, and docs/engines.md's for the ones past them)."""


def test_every_variable_is_read_and_no_other() -> None:
    fields = {f.name for f in msgspec.structs.fields(EngineSettings)}
    assert fields == {name for name, _ in VARIABLES.values()}


def test_defaults_without_any_variable() -> None:
    settings = engine_settings_from_env({})
    for name, default in VARIABLES.values():
        assert getattr(settings, name) == default, name
    assert settings == EngineSettings()


def test_unrelated_variables_are_ignored() -> None:
    assert engine_settings_from_env({"AGENTCHAT_CSMA_MIN_MS": "1", "HOME": "/"}) == (
        EngineSettings()
    )


@pytest.mark.parametrize(
    ("variable", "raw", "value"),
    [
        ("AGENTCHAT_RESPOND_TTL_MS", "1500.5", 1500.5),
        ("AGENTCHAT_CLAIM_MAX_SKEW_MS", "0", 0.0),
        ("AGENTCHAT_CB_MAX_DURATION_S", "60", 60.0),
        ("AGENTCHAT_CB_MAX_PER_AGENT", "7", 7),
        ("AGENTCHAT_CB_MAX_PAYLOAD", " 64 ", 64),
        ("AGENTCHAT_CB_POLL_MS", "250", 250.0),
        ("AGENTCHAT_CB_GRACE_S", "2.5", 2.5),
        ("AGENTCHAT_SLEEP_MAX_BUFFER", "3", 3),
        ("AGENTCHAT_UNCLAIMED_NOTICE_S", "0", 0.0),
        ("AGENTCHAT_RESPOND_ENABLED", "false", False),
    ],
)
def test_each_variable_sets_its_setting(variable: str, raw: str, value: object) -> None:
    name, _ = VARIABLES[variable]
    settings = engine_settings_from_env({variable: raw})
    assert getattr(settings, name) == value
    assert type(getattr(settings, name)) is type(value)
    others = {n: d for v, (n, d) in VARIABLES.items() if v != variable}
    assert all(getattr(settings, n) == d for n, d in others.items())


@pytest.mark.parametrize(
    ("raw", "value"),
    [
        ("true", True),
        ("TRUE", True),
        (" yes ", True),
        ("on", True),
        ("1", True),
        ("false", False),
        ("False", False),
        ("no", False),
        ("off", False),
        ("0", False),
    ],
)
def test_bool_parsing(raw: str, value: bool) -> None:
    assert engine_settings_from_env({"AGENTCHAT_RESPOND_ENABLED": raw}).respond_enabled is value


@pytest.mark.parametrize("raw", ["", "maybe", "2", "t", "enabled"])
def test_bad_bool_names_the_variable(raw: str) -> None:
    with pytest.raises(ConfigError, match=r"AGENTCHAT_RESPOND_ENABLED=.* is not true or false"):
        engine_settings_from_env({"AGENTCHAT_RESPOND_ENABLED": raw})


@pytest.mark.parametrize(
    ("variable", "raw"),
    [
        ("AGENTCHAT_RESPOND_TTL_MS", "soon"),
        ("AGENTCHAT_RESPOND_TTL_MS", ""),
        ("AGENTCHAT_CB_POLL_MS", "1s"),
        ("AGENTCHAT_CB_MAX_PER_AGENT", "1.5"),
        ("AGENTCHAT_CB_MAX_PAYLOAD", "lots"),
        ("AGENTCHAT_SLEEP_MAX_BUFFER", "1e3"),
    ],
)
def test_non_numbers_name_the_variable(variable: str, raw: str) -> None:
    with pytest.raises(ConfigError, match=rf"^{variable}='.*' is not a (whole|finite) number"):
        engine_settings_from_env({variable: raw})


@pytest.mark.parametrize("raw", ["nan", "NaN", "inf", "-inf", "Infinity", "1e999"])
@pytest.mark.parametrize(
    "variable",
    [
        "AGENTCHAT_RESPOND_TTL_MS",
        "AGENTCHAT_CLAIM_MAX_SKEW_MS",
        "AGENTCHAT_CB_MAX_DURATION_S",
        "AGENTCHAT_CB_POLL_MS",
        "AGENTCHAT_CB_GRACE_S",
    ],
)
def test_nan_and_infinity_are_refused(variable: str, raw: str) -> None:
    with pytest.raises(ConfigError, match=rf"^{variable}='{raw}' is not a finite number"):
        engine_settings_from_env({variable: raw})


@pytest.mark.parametrize(
    ("variable", "raw", "words"),
    [
        ("AGENTCHAT_RESPOND_TTL_MS", "-1", "must be >= 0"),
        ("AGENTCHAT_CB_MAX_PER_AGENT", "-3", "must be >= 0"),
        ("AGENTCHAT_CB_POLL_MS", "0", "must be > 0"),
        ("AGENTCHAT_SLEEP_MAX_BUFFER", "0", "must be >= 1"),
    ],
)
def test_out_of_range_values_name_the_variable(variable: str, raw: str, words: str) -> None:
    with pytest.raises(ConfigError, match=rf"^{variable} {words}"):
        engine_settings_from_env({variable: raw})


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_validate_refuses_non_finite_settings_made_in_code(value: float) -> None:
    with pytest.raises(ConfigError, match="AGENTCHAT_RESPOND_TTL_MS must be a finite number"):
        EngineSettings(respond_ttl_ms=value).validate()


def test_reads_os_environ_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTCHAT_CB_MAX_PAYLOAD", "42")
    assert engine_settings_from_env().cb_max_payload == 42
    monkeypatch.setenv("AGENTCHAT_RESPOND_TTL_MS", "nan")
    with pytest.raises(ConfigError, match="AGENTCHAT_RESPOND_TTL_MS"):
        engine_settings_from_env()
