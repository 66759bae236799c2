"""The set of agents that are actively processing a message (``_activeProcessingAgents``)."""

from __future__ import annotations

from collections.abc import Iterator


class ActiveSet:
    """Agent ids with a processing sequence running; at most one sequence per agent."""

    def __init__(self) -> None:
        self._ids: set[str] = set()

    def add(self, agent_id: str) -> bool:
        """Mark ``agent_id`` active; ``False`` if it already was (no second sequence)."""
        if agent_id in self._ids:
            return False
        self._ids.add(agent_id)
        return True

    def discard(self, agent_id: str) -> None:
        """Mark ``agent_id`` inactive."""
        self._ids.discard(agent_id)

    def __contains__(self, agent_id: object) -> bool:
        return agent_id in self._ids

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._ids))

    def __len__(self) -> int:
        return len(self._ids)


__all__ = ["ActiveSet"]
