"""Agent configuration: keyword arguments, YAML/JSON files, the environment, ${VAR}, errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hubbub.sdk import AgentConfig
from hubbub.sdk.agent_config import AgentConfigError, Prompts, expand_vars


def write(tmp_path: Path, text: str, name: str = "agent.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_defaults_and_keyword_arguments() -> None:
    cfg = AgentConfig(participant_id="helper")
    assert cfg.name == "helper" and cfg.reasoning_enabled and cfg.auto_respond
    assert cfg.max_iterations == 5 and cfg.confidence_threshold == 0.5
    assert cfg.context_window == 10 and cfg.provider == "auto"
    assert cfg.participant_options().participant_id == "helper"
    assert AgentConfig(name="bob").participant_id == "bob"
    assert cfg.replace(max_iterations=2).max_iterations == 2


def test_a_yaml_file_with_camel_case_keys_and_nested_sections(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
gateway: ws://127.0.0.1:9000/ws
participant_id: assistant-1
systemPrompt: "You are helpful"
thinkingEnabled: false
maxIterations: 10
logLevel: warn
prompts:
  reason: "Think: {input}"
offline:
  latency_s: 0.2
  tokensPerS: 30
""",
    )
    cfg = AgentConfig.from_file(path, env={})
    assert cfg.gateway == "ws://127.0.0.1:9000/ws" and cfg.participant_id == "assistant-1"
    assert cfg.system_prompt == "You are helpful" and cfg.reasoning_enabled is False
    assert cfg.max_iterations == 10 and cfg.log_level == "warning"
    assert cfg.prompts.reason == "Think: {input}" and cfg.prompts.act == Prompts().act
    assert cfg.offline.latency_s == 0.2 and cfg.offline.tokens_per_s == 30
    settings = cfg.model_settings()
    assert settings.offline_latency_s == 0.2 and settings.provider == "auto"


def test_a_json_file(tmp_path: Path) -> None:
    path = write(tmp_path, json.dumps({"participant_id": "j", "auto_respond": False}), "a.json")
    assert AgentConfig.load(path, env={}).auto_respond is False


def test_unknown_key_names_the_file_and_suggests(tmp_path: Path) -> None:
    path = write(tmp_path, "participant_id: a\nmax_iteration: 3\n")
    with pytest.raises(AgentConfigError) as info:
        AgentConfig.load(path, env={})
    assert str(info.value) == (
        f"{path}: unknown key 'max_iteration' (did you mean 'max_iterations'?)"
    )
    with pytest.raises(AgentConfigError, match=r"prompts: unknown key 'reasn' \(did you mean "):
        AgentConfig.from_mapping({"participant_id": "a", "prompts": {"reasn": "x"}})
    with pytest.raises(AgentConfigError, match=r"unknown key 'colour' \(known keys: particip"):
        AgentConfig.from_mapping({"participant_id": "a", "colour": "red"})


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"max_iterations": "ten"}, "max_iterations must be an integer, got 'ten'"),
        ({"max_iterations": 0}, "max_iterations must be >= 1"),
        ({"confidence_threshold": 2}, "confidence_threshold must be in 0..1"),
        ({"auto_respond": "maybe"}, "auto_respond must be true or false, got 'maybe'"),
        ({"provider": "gemini"}, "provider must be one of auto, openai, anthropic, offline"),
        ({"log_level": "loud"}, "log_level must be one of debug, info, warning, error"),
        ({"gateway": "http://x"}, "must be a WebSocket URL"),
        ({"participant_id": "no/slash"}, "participant_id 'no/slash' is not legal"),
        ({"prompts": "x"}, "prompts must be a mapping"),
    ],
)
def test_bad_values_name_the_key(data: dict[str, object], message: str) -> None:
    with pytest.raises(AgentConfigError, match="^agent.yaml: .*" + message.replace("(", r"\(")):
        AgentConfig.from_mapping({"participant_id": "a", **data}, "agent.yaml")


def test_participant_id_is_required() -> None:
    with pytest.raises(AgentConfigError, match="participant_id is required"):
        AgentConfig.load(env={})


def test_precedence_file_then_mew_agent_config_then_env_then_arguments(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "participant_id: from-file\nspace: file-space\nmax_iterations: 2\ntoken: file-token\n"
        "prompts: {reason: file-reason, act: file-act}\n",
    )
    env = {
        "MEW_AGENT_CONFIG": json.dumps({"maxIterations": 3, "prompts": {"act": "env-act"}}),
        "MEW_TOKEN": "env-token",
        "MEW_GATEWAY": "ws://gw:1/ws",
        "MEW_SPACE": "",  # empty: ignored
    }
    cfg = AgentConfig.load(path, env=env, participant_id="from-args")
    assert cfg.participant_id == "from-args" and cfg.space == "file-space"
    assert cfg.max_iterations == 3 and cfg.token == "env-token" and cfg.gateway == "ws://gw:1/ws"
    assert cfg.prompts.reason == "file-reason" and cfg.prompts.act == "env-act"


def test_mew_agent_config_may_name_a_file(tmp_path: Path) -> None:
    path = write(tmp_path, "participant_id: x\nmax_iterations: 7\n")
    assert AgentConfig.load(env={"MEW_AGENT_CONFIG": str(path)}).max_iterations == 7
    with pytest.raises(AgentConfigError, match="MEW_AGENT_CONFIG: not valid JSON"):
        AgentConfig.load(env={"MEW_AGENT_CONFIG": "{nope"})


def test_variables_are_expanded_in_files(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "participant_id: ${AGENT_ID}\ntoken: ${AGENT_TOKEN}\nspace: ${SPACE:-default-space}\n"
        "max_iterations: ${ITERATIONS}\nsystem_prompt: costs $$5\n",
    )
    env = {"AGENT_ID": "bot", "AGENT_TOKEN": "hb_secret", "ITERATIONS": "4"}
    cfg = AgentConfig.load(path, env=env)
    assert (cfg.participant_id, cfg.token, cfg.space) == ("bot", "hb_secret", "default-space")
    assert cfg.max_iterations == 4 and cfg.system_prompt == "costs $5"
    with pytest.raises(AgentConfigError) as info:
        AgentConfig.load(path, env={"AGENT_ID": "bot", "ITERATIONS": "4"})
    assert str(info.value) == (
        f"{path}: token: ${{AGENT_TOKEN}} is not set (export AGENT_TOKEN, or write "
        "${AGENT_TOKEN:-default})"
    )


def test_keyword_arguments_are_not_expanded() -> None:
    assert AgentConfig(participant_id="a", system_prompt="${HOME}").system_prompt == "${HOME}"


names = st.from_regex(r"[A-Z_][A-Z0-9_]{0,8}", fullmatch=True)
plain = st.text(alphabet=st.characters(blacklist_characters="$"), max_size=30)


@given(plain)
def test_text_without_dollars_is_unchanged(text: str) -> None:
    assert expand_vars(text, {}) == text


@given(st.lists(st.tuples(plain, names, plain), max_size=5))
def test_expansion_substitutes_each_variable(parts: list[tuple[str, str, str]]) -> None:
    env = {name: value for _, name, value in parts}
    template = "".join(f"{before}${{{name}}}" for before, name, _ in parts)
    expected = "".join(f"{before}{env[name]}" for before, name, _ in parts)
    assert expand_vars(template, env) == expected


@given(names, plain)
def test_defaults_apply_only_when_unset_or_empty(name: str, default: str) -> None:
    default = default.replace("}", "")
    template = f"${{{name}:-{default}}}"
    assert expand_vars(template, {}) == default
    assert expand_vars(template, {name: ""}) == default
    assert expand_vars(template, {name: "set"}) == "set"


@given(plain)
def test_double_dollar_is_a_literal_dollar(text: str) -> None:
    assert expand_vars(text.replace("x", "$$"), {}) == text.replace("x", "$")


def test_the_example_config_loads_and_its_script_path_is_relative_to_it() -> None:
    path = Path(__file__).parents[2] / "examples" / "agent.yaml"
    cfg = AgentConfig.load(path, env={})
    assert cfg.participant_id == "assistant" and cfg.name == "Assistant"
    assert cfg.gateway == "ws://127.0.0.1:8080/ws" and cfg.token == ""
    assert cfg.offline.script == str(path.parent / "offline-script.yaml")
    assert Path(cfg.offline.script).is_file()
