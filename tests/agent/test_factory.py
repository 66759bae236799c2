"""Choosing the provider from settings and the environment."""

from __future__ import annotations

from pathlib import Path

import pytest

from hubbub.llm import ModelSettings, OfflineModel, create_model, pick_provider
from hubbub.llm.anthropic import AnthropicModel
from hubbub.llm.offline import ScriptError
from hubbub.llm.openai_compat import OpenAICompatible


@pytest.mark.parametrize(
    ("settings", "env", "provider"),
    [
        (ModelSettings(), {}, "offline"),
        (ModelSettings(), {"OPENAI_API_KEY": "sk"}, "openai"),
        (ModelSettings(), {"OPENAI_BASE_URL": "http://localhost:11434/v1"}, "openai"),
        (ModelSettings(), {"ANTHROPIC_API_KEY": "k"}, "anthropic"),
        (ModelSettings(), {"ANTHROPIC_API_KEY": "k", "OPENAI_API_KEY": "sk"}, "openai"),
        (ModelSettings(base_url="http://localhost:1234/v1"), {}, "openai"),
        (ModelSettings(provider="offline"), {"OPENAI_API_KEY": "sk"}, "offline"),
        (ModelSettings(provider="anthropic"), {}, "anthropic"),
    ],
)
def test_pick_provider(settings: ModelSettings, env: dict[str, str], provider: str) -> None:
    assert pick_provider(settings, env) == provider


async def test_create_model_builds_each_provider() -> None:
    offline = create_model(ModelSettings(offline_latency_s=0.5), env={})
    assert isinstance(offline, OfflineModel) and offline.latency_s == 0.5
    assert offline.describe() == "offline:offline-scripted"
    ollama = create_model(
        ModelSettings(model="llama3.2"), env={"OPENAI_BASE_URL": "http://localhost:11434/v1"}
    )
    assert isinstance(ollama, OpenAICompatible)
    assert ollama.describe() == "openai:llama3.2" and ollama.base_url == "http://localhost:11434/v1"
    claude = create_model(ModelSettings(), env={"ANTHROPIC_API_KEY": "k"})
    assert isinstance(claude, AnthropicModel) and claude.model == "claude-sonnet-4-5"
    for model in (offline, ollama, claude):
        await model.aclose()


def test_a_missing_script_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ScriptError, match=r"nope\.yaml: cannot read the offline script"):
        create_model(ModelSettings(offline_script=str(tmp_path / "nope.yaml")), env={})
