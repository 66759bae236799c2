"""Tool discovery (document 003, layer 3): ``tools/list`` to every participant that is there
at the welcome or joins later, tools kept per participant and dropped when it leaves.

:class:`ToolDirectory` is the bookkeeping (pure); :class:`Discovery` wires it to a
:class:`~hubbub.sdk.Participant`: it listens to ``system/welcome`` and space-level
``system/presence`` join/leave events, and to ``notifications/tools/list_changed``.
A ``tools/list`` that times out (or is lost to a reconnect) is retried ``retries`` times with
a doubling delay; a participant that answers with an error offers no tools.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import mcp.types as mt

from hubbub.errors import (
    CapabilityDenied,
    GatewayError,
    NotConnected,
    RequestFailed,
    RequestTimeout,
)
from hubbub.llm.base import ToolSpec
from hubbub.protocol.envelope import Envelope
from hubbub.sdk.participant import Participant
from hubbub.sdk.tool_names import ToolNameMap

log = logging.getLogger("hubbub.sdk.discovery")

LIST_CHANGED = "notifications/tools/list_changed"


@dataclass(frozen=True)
class DiscoveredTool:
    """A tool another participant offers."""

    participant: str
    name: str
    description: str = ""
    input_schema: dict[str, Any] = field(default_factory=lambda: {"type": "object"})

    @property
    def qualified(self) -> str:
        """``participant/tool``: how people and the logs name it."""
        return f"{self.participant}/{self.name}"


class ToolDirectory:
    """The discovered tools, per participant, and their provider-safe names."""

    def __init__(self) -> None:
        self._tools: dict[str, dict[str, DiscoveredTool]] = {}
        self.names = ToolNameMap()

    def set(self, participant: str, tools: Iterable[DiscoveredTool]) -> None:
        """Replace what ``participant`` offers."""
        self.names.forget(participant)
        self._tools[participant] = {t.name: t for t in tools}

    def drop(self, participant: str) -> list[DiscoveredTool]:
        """Forget ``participant``'s tools; return them."""
        self.names.forget(participant)
        return list(self._tools.pop(participant, {}).values())

    def of(self, participant: str) -> list[DiscoveredTool]:
        """The tools ``participant`` offers (empty if unknown)."""
        return list(self._tools.get(participant, {}).values())

    def participants(self) -> list[str]:
        """Participants whose tools are known (some may offer none)."""
        return list(self._tools)

    def all(self) -> list[DiscoveredTool]:
        """Every discovered tool."""
        return [t for tools in self._tools.values() for t in tools.values()]

    def qualified_names(self) -> list[str]:
        """``participant/tool`` of every discovered tool."""
        return [t.qualified for t in self.all()]

    def spec(self, tool: DiscoveredTool) -> ToolSpec:
        """``tool`` as offered to a model: provider-safe name, attributed description."""
        about = tool.description.strip() or "(no description)"
        return ToolSpec(
            name=self.names.name_for(tool.participant, tool.name),
            description=f"{tool.qualified}: {about} (a tool of participant {tool.participant})",
            parameters=tool.input_schema,
            display_name=tool.qualified,
        )

    def specs(self) -> list[ToolSpec]:
        """Every discovered tool as a :class:`~hubbub.llm.ToolSpec`."""
        return [self.spec(t) for t in self.all()]

    def resolve(self, provider_name: str) -> DiscoveredTool | None:
        """The tool a model called by its provider-safe name (``None`` if unknown now)."""
        try:
            participant, name = self.names.resolve(provider_name)
        except KeyError:
            return None
        return self._tools.get(participant, {}).get(name)


class Discovery:
    """Keeps a :class:`ToolDirectory` up to date for one participant (see the module doc)."""

    def __init__(
        self,
        participant: Participant,
        directory: ToolDirectory,
        *,
        timeout: float = 5.0,
        retries: int = 3,
        retry_delay: float = 0.5,
        on_change: Callable[[str], object] | None = None,
    ) -> None:
        self.participant = participant
        self.directory = directory
        self.timeout = timeout
        self.retries = retries
        self.retry_delay = retry_delay
        self.attempts: dict[str, int] = {}
        """``tools/list`` requests sent per participant (retries included)."""
        self._on_change = on_change
        self._tasks: dict[str, asyncio.Task[None]] = {}
        participant.on("system/welcome", self._on_welcome)
        participant.on("system/presence", self._on_presence)
        participant.on("mcp/request", self._on_notification)

    # ------------------------------------------------------------------ events

    def _on_welcome(self, env: Envelope) -> None:
        present: set[str] = set()
        for entry in env.payload.get("participants", []):
            if isinstance(entry, dict) and isinstance(entry.get("id"), str):
                present.add(entry["id"])
                self._consider(entry)
        for gone in set(self.directory.participants()) - present:
            self.forget(gone, "gone while we were disconnected")

    def _on_presence(self, env: Envelope) -> None:
        payload = env.payload
        if payload.get("channel") is not None:
            return  # channel membership, not the space
        entries = payload.get("participants") or [payload.get("participant")]
        for entry in entries:
            if not isinstance(entry, dict) or not isinstance(entry.get("id"), str):
                continue
            if payload.get("event") == "join":
                self._consider(entry)
            elif payload.get("event") == "leave":
                self.forget(entry["id"], "left")

    def _on_notification(self, env: Envelope) -> None:
        if env.payload.get("method") == LIST_CHANGED and env.from_ != self.participant.id:
            log.info("%s: %s says its tools changed; listing them again", self.agent, env.from_)
            self.discover(env.from_)

    def _consider(self, entry: dict[str, Any]) -> None:
        pid = entry["id"]
        if pid == self.participant.id:
            return
        if entry.get("kind") == "human":
            log.debug("%s: not listing the tools of %s (a human)", self.agent, pid)
            return
        if pid in self._tasks:
            return  # already being listed (a coalesced presence frame can repeat a join)
        self.discover(pid)

    @property
    def agent(self) -> str:
        """The id of the participant doing the discovery (for logs)."""
        return self.participant.id

    # ------------------------------------------------------------------ discovery

    def discover(self, pid: str) -> asyncio.Task[None]:
        """(Re)start listing ``pid``'s tools in the background; return the task."""
        old = self._tasks.pop(pid, None)
        if old is not None:
            old.cancel()
        task = asyncio.get_running_loop().create_task(self._discover(pid))
        self._tasks[pid] = task
        task.add_done_callback(lambda t: self._done(pid, t))
        return task

    def _done(self, pid: str, task: asyncio.Task[None]) -> None:
        if self._tasks.get(pid) is task:
            del self._tasks[pid]

    def forget(self, pid: str, why: str) -> None:
        """Stop discovering ``pid`` and drop its tools."""
        task = self._tasks.pop(pid, None)
        if task is not None:
            task.cancel()
        dropped = self.directory.drop(pid)
        if dropped:
            names = ", ".join(t.qualified for t in dropped)
            log.info("%s: %s %s; dropped its tools: %s", self.agent, pid, why, names)
            self._changed(pid)

    def _allowed(self) -> bool:
        request = {"jsonrpc": "2.0", "id": "probe", "method": "tools/list", "params": {}}
        return self.participant.can_send({"kind": "mcp/request", "payload": request})

    async def _discover(self, pid: str) -> None:
        if not self._allowed():
            log.warning(
                "%s may not send mcp/request tools/list, so it cannot discover the tools of %s "
                "(grant it mcp/request for method tools/list)",
                self.agent,
                pid,
            )
            return
        delay = self.retry_delay
        for attempt in range(1, self.retries + 2):
            self.attempts[pid] = self.attempts.get(pid, 0) + 1
            try:
                tools = await self.participant.list_tools(pid, timeout=self.timeout)
            except (RequestTimeout, NotConnected) as exc:
                if attempt > self.retries:
                    log.warning(
                        "%s: gave up listing the tools of %s after %d attempts: %s",
                        self.agent,
                        pid,
                        attempt,
                        exc,
                    )
                    return
                log.info(
                    "%s: tools/list to %s failed (%s); retry %d/%d in %.2gs",
                    self.agent,
                    pid,
                    exc,
                    attempt,
                    self.retries,
                    delay,
                )
                await asyncio.sleep(delay)
                delay *= 2
                continue
            except CapabilityDenied as exc:
                log.warning("%s cannot list the tools of %s: %s", self.agent, pid, exc)
                return
            except (RequestFailed, GatewayError) as exc:
                log.info("%s: %s offers no tools (%s)", self.agent, pid, exc)
                self._store(pid, [])
                return
            self._store(pid, tools)
            return

    def _store(self, pid: str, tools: list[mt.Tool]) -> None:
        found = [
            DiscoveredTool(pid, t.name, t.description or "", dict(t.input_schema or {}))
            for t in tools
        ]
        self.directory.set(pid, found)
        names = ", ".join(t.qualified for t in found) or "none"
        log.info("%s: discovered the tools of %s: %s", self.agent, pid, names)
        self._changed(pid)

    def _changed(self, pid: str) -> None:
        if self._on_change is not None:
            self._on_change(pid)

    async def close(self) -> None:
        """Cancel discoveries in flight."""
        tasks = list(self._tasks.values())
        self._tasks.clear()
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task


__all__ = ["LIST_CHANGED", "DiscoveredTool", "Discovery", "ToolDirectory"]
