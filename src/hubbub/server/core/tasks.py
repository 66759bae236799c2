"""The gateway's background tasks: history reads and joins that wait on the store."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

from hubbub.protocol.errors import ErrorCode, ProtocolError
from hubbub.server.core.delivery import Delivery
from hubbub.server.state.space import Session

log = logging.getLogger("hubbub.router")


class Tasks:
    """Runs coroutines in the background; a failure is answered to its session, never lost."""

    def __init__(self, delivery: Delivery) -> None:
        self.delivery = delivery
        self._tasks: set[asyncio.Task[Any]] = set()

    @property
    def running(self) -> int:
        """How many background tasks have not finished yet."""
        return len(self._tasks)

    def spawn(self, coro: Coroutine[Any, Any, Any], answer: Session | None = None) -> None:
        """Run ``coro`` in the background; its failure is answered to ``answer``."""

        async def guarded() -> None:
            try:
                await coro
            except ProtocolError as exc:
                if answer is not None:
                    self.delivery.error(answer, exc)
            except Exception:
                log.exception("background task failed")
                if answer is not None:
                    self.delivery.error(
                        answer,
                        ProtocolError(ErrorCode.INTERNAL, "internal error; the request failed"),
                    )

        task = asyncio.get_running_loop().create_task(guarded())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def cancel_all(self) -> None:
        """Cancel every task still running (the gateway is stopping)."""
        for t in list(self._tasks):
            t.cancel()
