"""What the pile-on benchmark's cases share: the timed offline model, the gateway, waiting
for a question to be settled, quantiles."""

from __future__ import annotations

import asyncio
import random
import sys
import time
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiohttp import web

from hubbub.llm.base import Message, StreamEvent, ToolSpec
from hubbub.llm.offline import CLASSIFY_MARKER, NOVELTY_MARKER, OfflineModel, OfflineScript
from hubbub.sdk import Agent
from hubbub.server.app import build_app, make_router
from hubbub.server.config import Limits


def log(msg: str) -> None:
    """Progress on stderr."""
    print(msg, file=sys.stderr, flush=True)


@dataclass
class Inference:
    """One answer inference of one agent (perf_counter seconds)."""

    agent: str
    started: float
    ended: float = 0.0
    cancelled: bool = False


class TimedModel(OfflineModel):
    """The offline model with a random 1-3 s (x scale) inference for answers, instrumented."""

    def __init__(
        self,
        name: str,
        scale: float,
        rng: random.Random,
        log_: list[Inference],
        script: OfflineScript | None = None,
    ):
        super().__init__(script)
        self.name, self.scale, self.rng, self.log = name, scale, rng, log_

    async def stream(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec] = ()
    ) -> AsyncGenerator[StreamEvent, None]:
        """Classify and judge drafts at once; answer after the simulated inference time."""
        last = next((m.content for m in reversed(messages) if m.role == "user"), "")
        if CLASSIFY_MARKER not in last and NOVELTY_MARKER not in last:  # not a judgment
            record = Inference(self.name, time.perf_counter())
            self.log.append(record)
            try:
                await asyncio.sleep(self.rng.uniform(1.0, 3.0) * self.scale)
            except asyncio.CancelledError:
                record.cancelled = True
                raise
            finally:
                record.ended = time.perf_counter()
        async for event in super().stream(messages, tools):
            yield event


def pct(ordered: list[float], q: float) -> float | None:
    """The q-quantile of sorted samples (nearest rank), ``None`` if there are none."""
    if not ordered:
        return None
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def start_gateway(data_dir: Path) -> tuple[web.AppRunner, str]:
    """A real gateway on 127.0.0.1 (open mode, SQLite, no rate limit)."""
    router = make_router(None, data_dir=data_dir, limits=Limits(rate_per_s=0))
    runner = web.AppRunner(build_app(router), handle_signals=False, shutdown_timeout=2.0)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    server = site._server
    assert server is not None
    port = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]
    return runner, f"ws://127.0.0.1:{port}/ws"


async def until_done(agents: list[Agent], msg_id: str, limit: float) -> None:
    """Wait until every agent decided about ``msg_id`` and none is busy any more."""
    deadline = time.perf_counter() + limit
    while time.perf_counter() < deadline:
        decided = all(any(r.envelope.id == msg_id for r in a.decisions) for a in agents)
        if decided and not any(a.busy() for a in agents):
            return
        await asyncio.sleep(0.01)
    log(f"    question {msg_id} did not complete within {limit:.0f} s")


def scaled_floor(scale: float) -> dict[str, Any]:
    """An Agent's floor settings at the defaults (CSMA 2-8 s, settle 5 s) times ``scale``,
    with no rate limit and no reasoning envelopes: what the people and situation runs use."""
    return {
        "csma_min_ms": round(2000 * scale),
        "csma_max_ms": round(8000 * scale),
        "settle_ms": round(5000 * scale),
        "rate_limit_per_minute": 0,
        "discovery_timeout": 5.0,
        "reasoning_enabled": False,
    }
