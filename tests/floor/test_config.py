"""The floor settings of AgentConfig: keys, AGENTCHAT_* variables, and clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from hubbub.sdk import AgentConfig
from hubbub.sdk.agent_config import AgentConfigError


def test_defaults_follow_the_documents() -> None:
    cfg = AgentConfig(participant_id="a")
    assert cfg.coordination == "both" and cfg.csma_timer == "local"
    assert (cfg.csma_min_ms, cfg.csma_max_ms, cfg.settle_ms) == (2000, 8000, 5000)
    assert cfg.jitter_percent == 0.5 and cfg.idle_nudge_s is None
    assert cfg.skills == () and cfg.humans == "coordinate"
    fs = cfg.floor_settings()
    assert (fs.csma_min_ms, fs.csma_max_ms, fs.settle_ms) == (2000, 8000, 5000)


def test_coordination_humans_in_a_file_and_as_an_argument(tmp_path: Path) -> None:
    path = tmp_path / "agent.yaml"
    path.write_text("participant_id: a\ncoordination:\n  mode: csma\n  humans: EXEMPT\n")
    cfg = AgentConfig.load(path, env={})
    assert (cfg.coordination, cfg.humans) == ("csma", "exempt")
    path.write_text("participant_id: a\ncoordination: {humans: coordinate}\n")
    assert AgentConfig.load(path, env={}).coordination == "both"
    assert AgentConfig(participant_id="a", humans="exempt").humans == "exempt"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("coordination: {humans: always}", "humans must be one of coordinate, exempt"),
        ("coordination: {people: exempt}", "coordination: unknown key 'people'"),
        ("exempt_humans: true", "write coordination.humans: exempt"),
    ],
)
def test_coordination_humans_errors_name_the_fix(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "agent.yaml"
    path.write_text(f"participant_id: a\n{text}\n")
    with pytest.raises(AgentConfigError, match=message):
        AgentConfig.load(path, env={})


def test_keys_in_a_file_and_as_arguments(tmp_path: Path) -> None:
    path = tmp_path / "agent.yaml"
    path.write_text(
        "participant_id: a\ncoordination: CSMA\ncsmaMinMs: 100\ncsma_max_ms: 300\n"
        "skills: [python, Machine Learning]\nsettle_ms: 0\nidle_nudge_s: 60\n"
        "jitter_percent: 0.25\ncsma_timer: server\n"
    )
    cfg = AgentConfig.load(path, env={})
    assert cfg.coordination == "csma" and cfg.csma_timer == "server"
    assert (cfg.csma_min_ms, cfg.csma_max_ms, cfg.settle_ms) == (100, 300, 0)
    assert cfg.skills == ("python", "Machine Learning")
    assert cfg.idle_nudge_s == 60 and cfg.jitter_percent == 0.25
    assert AgentConfig(participant_id="a", skills="rust").skills == ("rust",)  # type: ignore[arg-type]


def test_the_environment_variables_override_the_file(tmp_path: Path) -> None:
    path = tmp_path / "agent.yaml"
    path.write_text("participant_id: a\ncsma_min_ms: 100\ncsma_max_ms: 300\n")
    env = {
        "AGENTCHAT_CSMA_MIN_MS": "50",
        "AGENTCHAT_CSMA_MAX_MS": "60",
        "AGENTCHAT_SETTLE_MS": "700",
        "AGENTCHAT_JITTER_PERCENT": "0.1",
    }
    cfg = AgentConfig.load(path, env=env)
    assert (cfg.csma_min_ms, cfg.csma_max_ms, cfg.settle_ms) == (50, 60, 700)
    assert cfg.jitter_percent == 0.1
    assert AgentConfig.load(path, env=env, csma_max_ms=90).csma_max_ms == 90  # arguments win


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"AGENTCHAT_CSMA_MIN_MS": "soon"}, "AGENTCHAT_CSMA_MIN_MS must be a whole number"),
        ({"AGENTCHAT_CSMA_MAX_MS": "-1"}, "AGENTCHAT_CSMA_MAX_MS must be >= 0"),
        (
            {"AGENTCHAT_CSMA_MIN_MS": "9000", "AGENTCHAT_CSMA_MAX_MS": "100"},
            r"AGENTCHAT_CSMA_MIN_MS \(9000\) must not exceed AGENTCHAT_CSMA_MAX_MS \(100\)",
        ),
        ({"AGENTCHAT_CSMA_MIN_MS": "9000"}, r"csma_min_ms \(9000\) must not exceed"),
        ({"AGENTCHAT_SETTLE_MS": "1.5"}, "AGENTCHAT_SETTLE_MS must be a whole number"),
        ({"AGENTCHAT_JITTER_PERCENT": "1.5"}, "AGENTCHAT_JITTER_PERCENT must be below 1"),
        ({"AGENTCHAT_JITTER_PERCENT": "lots"}, "AGENTCHAT_JITTER_PERCENT must be a number"),
    ],
)
def test_bad_environment_values_are_named(env: dict[str, str], message: str) -> None:
    with pytest.raises(AgentConfigError, match=message):
        AgentConfig.load(env={"MEW_PARTICIPANT_ID": "a", **env})


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"csma_min_ms": 10, "csma_max_ms": 5}, r"csma_min_ms \(10\) must not exceed"),
        ({"csma_min_ms": -1}, "csma_min_ms must be >= 0"),
        ({"settle_ms": -5}, "settle_ms must be >= 0"),
        ({"jitter_percent": 1.0}, r"jitter_percent must be in \[0, 1\)"),
        ({"idle_nudge_s": 0}, "idle_nudge_s must be > 0"),
        ({"coordination": "loud"}, "coordination must be one of both, csma, claims, none"),
        ({"skills": [1, 2]}, "skills must be a list of skill tags"),
    ],
)
def test_bad_values_are_refused_clearly(fields: dict[str, object], message: str) -> None:
    with pytest.raises(AgentConfigError, match=message):
        AgentConfig.from_mapping({"participant_id": "a", **fields}, "agent.yaml")


def test_agents_built_in_code_follow_the_agentchat_variables(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from hubbub.llm.offline import OfflineModel, OfflineScript
    from hubbub.sdk import Agent

    model = OfflineModel(OfflineScript.from_mapping({"rules": []}, "test"))
    monkeypatch.setenv("AGENTCHAT_CSMA_MIN_MS", "100")
    monkeypatch.setenv("AGENTCHAT_CSMA_MAX_MS", "300")
    monkeypatch.setenv("AGENTCHAT_SETTLE_MS", "0")
    bot = Agent(participant_id="bot", model=model)
    assert (bot.config.csma_min_ms, bot.config.csma_max_ms, bot.config.settle_ms) == (100, 300, 0)
    bot = Agent(participant_id="bot", model=model, csma_max_ms=500)  # a keyword wins
    assert (bot.config.csma_min_ms, bot.config.csma_max_ms) == (100, 500)
    monkeypatch.setenv("AGENTCHAT_CSMA_MIN_MS", "soon")
    with pytest.raises(AgentConfigError, match="AGENTCHAT_CSMA_MIN_MS must be a whole number"):
        Agent(participant_id="bot", model=model)
