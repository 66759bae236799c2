"""Runtime fixtures: the agent fixtures (real gateway, offline-model agents) for integration."""

from __future__ import annotations

from tests.agent.conftest import agent, client, participant

__all__ = ["agent", "client", "participant"]
