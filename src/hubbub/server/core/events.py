"""What the message pipeline tells its observers: messages delivered, presence changes.

The pipeline never imports an observer (the dashboard's feed subscribes at wiring time, see
:mod:`hubbub.server.gateway`); it asks :meth:`Events.wants` before doing any work for them.
"""

from __future__ import annotations

from typing import Any, Protocol

from hubbub.protocol.envelope import Envelope
from hubbub.server.state.space import SpaceState


class Watcher(Protocol):
    """An observer of the pipeline (the dashboard's activity feed implements it)."""

    def wants(self, env: Envelope) -> bool:
        """Whether :meth:`routed` should be called for ``env`` once it is delivered."""
        ...

    def routed(self, space: SpaceState, env: Envelope) -> None:
        """``env`` was delivered in ``space``."""
        ...

    def presence(self, space: str, event: str, entry: dict[str, Any], channel: str | None) -> None:
        """A presence change is announced (``join``, ``leave``, ``update``)."""
        ...


class Events:
    """The pipeline's observers, told in the order they subscribed."""

    def __init__(self) -> None:
        self._watchers: list[Watcher] = []

    def subscribe(self, watcher: Watcher) -> None:
        """Tell ``watcher`` of every delivery and presence change from now on."""
        self._watchers.append(watcher)

    def wants(self, env: Envelope) -> bool:
        """Whether any observer wants to hear of ``env``'s delivery."""
        for w in self._watchers:  # noqa: SIM110 (the hot path: no generator per message)
            if w.wants(env):
                return True
        return False

    def routed(self, space: SpaceState, env: Envelope) -> None:
        """``env`` was delivered in ``space``."""
        for w in self._watchers:
            if w.wants(env):
                w.routed(space, env)

    def presence(self, space: str, event: str, entry: dict[str, Any], channel: str | None) -> None:
        """A presence change is announced."""
        for w in self._watchers:
            w.presence(space, event, entry, channel)
