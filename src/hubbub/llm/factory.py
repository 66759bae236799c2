"""Pick and build the model provider from settings and the environment.

``provider: auto`` (the default) chooses, in order: an explicit ``base_url`` or
``OPENAI_BASE_URL`` / ``OPENAI_API_KEY`` → openai-compatible; ``ANTHROPIC_API_KEY`` →
anthropic; otherwise the offline scripted model, so that everything runs with no network.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal, get_args

from hubbub.extras import extra_needed
from hubbub.llm.base import ChatModel

Provider = Literal["auto", "openai", "anthropic", "offline"]
PROVIDERS: Final[tuple[str, ...]] = get_args(Provider)


@dataclass(frozen=True, kw_only=True)
class ModelSettings:
    """Which model to talk to and how (``None`` fields fall back to the environment)."""

    provider: Provider = "auto"
    model: str | None = None
    base_url: str | None = None
    api_key: str | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    offline_script: str | None = None
    """Path of the offline model's script file (YAML)."""
    offline_latency_s: float = 0.0
    offline_tokens_per_s: float = 0.0


def pick_provider(settings: ModelSettings, env: Mapping[str, str] | None = None) -> str:
    """The provider ``create_model`` would use: ``openai``, ``anthropic`` or ``offline``."""
    if settings.provider != "auto":
        return settings.provider
    source = os.environ if env is None else env
    if settings.base_url or source.get("OPENAI_BASE_URL") or source.get("OPENAI_API_KEY"):
        return "openai"
    if source.get("ANTHROPIC_API_KEY"):
        return "anthropic"
    return "offline"


def create_model(
    settings: ModelSettings | None = None, env: Mapping[str, str] | None = None
) -> ChatModel:
    """Build the chat model ``settings`` describe (see the module docstring for ``auto``)."""
    settings = settings or ModelSettings()
    source = os.environ if env is None else env
    provider = pick_provider(settings, source)
    if provider == "openai":
        with extra_needed("agents"):
            from hubbub.llm.openai_compat import DEFAULT_OPENAI_MODEL, OpenAICompatible

        return OpenAICompatible(
            settings.model or DEFAULT_OPENAI_MODEL,
            base_url=settings.base_url or source.get("OPENAI_BASE_URL"),
            api_key=settings.api_key or source.get("OPENAI_API_KEY"),
            temperature=settings.temperature,
            max_tokens=settings.max_tokens,
        )
    if provider == "anthropic":
        with extra_needed("agents"):
            from hubbub.llm.anthropic import DEFAULT_ANTHROPIC_MODEL, AnthropicModel

        return AnthropicModel(
            settings.model or DEFAULT_ANTHROPIC_MODEL,
            api_key=settings.api_key or source.get("ANTHROPIC_API_KEY"),
            base_url=settings.base_url or source.get("ANTHROPIC_BASE_URL"),
            temperature=settings.temperature,
            max_tokens=settings.max_tokens or 1024,
        )
    if provider == "offline":
        from hubbub.llm.offline import OfflineModel, OfflineScript

        script = OfflineScript.load(settings.offline_script) if settings.offline_script else None
        return OfflineModel(
            script,
            latency_s=settings.offline_latency_s,
            tokens_per_s=settings.offline_tokens_per_s,
            model=settings.model or "offline-scripted",
        )
    raise ValueError(f"unknown provider {provider!r}: use one of {', '.join(PROVIDERS)}")


__all__ = ["PROVIDERS", "ModelSettings", "Provider", "create_model", "pick_provider"]
