"""Floor fixtures: the agent fixtures (real gateway, offline-model agents), and a model whose
answers take a while (so that claims and yields meet a running inference)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Sequence

from hubbub.llm.base import Message, StreamEvent, ToolSpec
from hubbub.llm.offline import CLASSIFY_MARKER, NOVELTY_MARKER, OfflineModel, OfflineScript
from tests.agent.conftest import agent, client, participant

__all__ = ["SlowAnswers", "agent", "client", "participant"]

SCRIPT = OfflineScript.from_mapping(
    {"rules": [{"match": r"\bquestion\b", "reply": "my answer to {sender}"}]}
)


class SlowAnswers(OfflineModel):
    """The offline model, answering questions after ``delay`` seconds (classifying and judging
    drafts at once); counts the inferences it started, finished and had cancelled."""

    def __init__(self, delay: float = 0.3) -> None:
        super().__init__(SCRIPT)
        self.delay = delay
        self.started = 0
        self.finished = 0
        self.cancelled = 0

    async def stream(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec] = ()
    ) -> AsyncGenerator[StreamEvent, None]:
        """Classify and judge at once; answer after ``delay``."""
        last = next((m.content for m in reversed(messages) if m.role == "user"), "")
        if CLASSIFY_MARKER not in last and NOVELTY_MARKER not in last:
            self.started += 1
            try:
                await asyncio.sleep(self.delay)
            except asyncio.CancelledError:
                self.cancelled += 1
                raise
            self.finished += 1
        async for event in super().stream(messages, tools):
            yield event
