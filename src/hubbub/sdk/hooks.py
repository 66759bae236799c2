"""What the SDK's ``on_*`` registrations return: a callable that unregisters the handler.

Document 003: ``onMCPProposal(handler): () => void``. Every ``on_*`` method of
:class:`~hubbub.sdk.Participant` and :class:`~hubbub.sdk.Agent` returns an
:class:`Unsubscribe`; calling it removes the handler (once; later calls do nothing)::

    stop = participant.on_mcp_proposal(print)
    ...
    stop()                       # no more proposals printed

Used as a decorator, the decorated name is bound to the :class:`Unsubscribe`, and the
function stays reachable as its :attr:`~Unsubscribe.handler`::

    @agent.on_wake
    def woke(note: Wake) -> None: ...

    woke()                       # unregisters it; woke.handler is the function
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any, Generic, TypeVar

H = TypeVar("H", bound=Callable[..., Any])


class Unsubscribe(Generic[H]):
    """Call it to remove :attr:`handler` from where it was registered (idempotent)."""

    __slots__ = ("_remove", "handler")

    def __init__(self, handler: H, remove: Callable[[], None]) -> None:
        self.handler = handler
        """The registered handler (the decorated function)."""
        self._remove: Callable[[], None] | None = remove

    def __call__(self) -> None:
        """Unregister the handler; nothing happens the second time."""
        remove, self._remove = self._remove, None
        if remove is not None:
            remove()

    @property
    def active(self) -> bool:
        """Whether the handler is still registered through this object."""
        return self._remove is not None

    def __repr__(self) -> str:
        """``<Unsubscribe woke (active)>``."""
        name = getattr(self.handler, "__qualname__", repr(self.handler))
        return f"<Unsubscribe {name} ({'active' if self.active else 'removed'})>"


def register(handlers: list[Any], handler: H) -> Unsubscribe[H]:
    """Append ``handler`` to ``handlers``; the result removes it again."""
    handlers.append(handler)

    def remove() -> None:
        with contextlib.suppress(ValueError):
            handlers.remove(handler)

    return Unsubscribe(handler, remove)


__all__ = ["Unsubscribe", "register"]
