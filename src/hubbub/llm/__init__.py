"""Model providers behind one small async interface (:class:`ChatModel`).

- :class:`~hubbub.llm.openai_compat.OpenAICompatible`: OpenAI, Ollama, vLLM, llama.cpp, LM Studio;
- :class:`~hubbub.llm.anthropic.AnthropicModel`: Claude through the Messages API;
- :class:`~hubbub.llm.offline.OfflineModel`: deterministic rules and a script, no network
  (the default).

:func:`create_model` picks one from settings and the environment. The provider modules import
their SDK only when used.
"""

from hubbub.llm.base import (
    ChatModel,
    Completion,
    Done,
    LLMError,
    Message,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolCallEvent,
    ToolSpec,
    Usage,
)
from hubbub.llm.factory import ModelSettings, create_model, pick_provider
from hubbub.llm.offline import OfflineModel, OfflineScript

__all__ = [
    "ChatModel",
    "Completion",
    "Done",
    "LLMError",
    "Message",
    "ModelSettings",
    "OfflineModel",
    "OfflineScript",
    "StreamEvent",
    "TextDelta",
    "ToolCall",
    "ToolCallEvent",
    "ToolSpec",
    "Usage",
    "create_model",
    "pick_provider",
]
