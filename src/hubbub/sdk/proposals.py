"""The fulfiller's view of proposals: :class:`Proposal` and the observable
:class:`ProposalInbox` of those still pending (MEW ``mcp/proposal``)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

from hubbub.errors import RequestTimeout
from hubbub.protocol.envelope import Envelope

log = logging.getLogger("hubbub.sdk.proposals")

ProposalStatus = Literal["pending", "approved", "rejected", "withdrawn", "fulfilled"]
ProposalListener = Callable[[str, "Proposal"], object]
"""Called with ``(event, proposal)``; events: ``added``, ``approved``, ``rejected``,
``withdrawn``, ``fulfilled``."""


@dataclass
class Proposal:
    """An ``mcp/proposal`` someone made: what they want done, by whom, and where it stands."""

    envelope: Envelope
    status: ProposalStatus = "pending"

    @property
    def id(self) -> str:
        """The proposal's envelope id (the gateway's)."""
        return self.envelope.id

    @property
    def proposer(self) -> str:
        """Who proposed it."""
        return self.envelope.from_

    @property
    def to(self) -> list[str]:
        """The participants that would run it (the fulfilment goes to them)."""
        return list(self.envelope.to or [])

    @property
    def channel(self) -> str | None:
        """Where it was proposed (``None`` for a DM proposal)."""
        return self.envelope.channel

    @property
    def payload(self) -> dict[str, Any]:
        """The proposed JSON-RPC request (``method``, ``params``, ``id``)."""
        return self.envelope.payload

    @property
    def method(self) -> str:
        """The proposed MCP method, e.g. ``tools/call``."""
        return str(self.payload.get("method", ""))

    @property
    def params(self) -> dict[str, Any]:
        """The proposed method's params."""
        params = self.payload.get("params")
        return params if isinstance(params, dict) else {}

    def describe(self) -> str:
        """One line for a human: who wants what run where."""
        what = self.method
        if what == "tools/call":
            what = f"tools/call {self.params.get('name')} {self.params.get('arguments') or {}}"
        return f"{self.proposer} proposes {what} on {', '.join(self.to) or '?'}"


class ProposalInbox:
    """Pending proposals seen by this participant, in arrival order; observable.

    Iterate it (or ``len()``) for the current pending ones, ``await inbox.next()`` for the
    next arrival, or :meth:`subscribe` for every change.
    """

    def __init__(self) -> None:
        self._pending: dict[str, Proposal] = {}
        self._arrivals: asyncio.Queue[Proposal] = asyncio.Queue()
        self._listeners: list[ProposalListener] = []

    def __len__(self) -> int:
        """Number of pending proposals."""
        return len(self._pending)

    def __iter__(self) -> Iterator[Proposal]:
        """The pending proposals, oldest first."""
        return iter(list(self._pending.values()))

    def __contains__(self, item: object) -> bool:
        """Whether a proposal (or proposal id) is pending."""
        key = item.id if isinstance(item, Proposal) else item
        return key in self._pending

    def get(self, proposal_id: str) -> Proposal | None:
        """The pending proposal with this id, if any."""
        return self._pending.get(proposal_id)

    async def next(self, timeout: float | None = None) -> Proposal:  # noqa: ASYNC109
        """The next proposal to arrive that is still pending (raises RequestTimeout)."""
        try:
            async with asyncio.timeout(timeout):
                while True:
                    proposal = await self._arrivals.get()
                    if proposal.status == "pending":
                        return proposal
        except TimeoutError:
            raise RequestTimeout(f"no proposal arrived within {timeout}s") from None

    def subscribe(self, listener: ProposalListener) -> Callable[[], None]:
        """Call ``listener(event, proposal)`` on every change; returns an unsubscribe function."""
        self._listeners.append(listener)

        def unsubscribe() -> None:
            with contextlib.suppress(ValueError):
                self._listeners.remove(listener)

        return unsubscribe

    def _notify(self, event: str, proposal: Proposal) -> None:
        for listener in list(self._listeners):
            try:
                listener(event, proposal)
            except Exception:
                log.exception("proposal listener failed on %s", event)

    def add(self, envelope: Envelope) -> Proposal:
        """Record a proposal that arrived."""
        proposal = Proposal(envelope)
        self._pending[proposal.id] = proposal
        self._arrivals.put_nowait(proposal)
        self._notify("added", proposal)
        return proposal

    def settle(self, proposal_id: str, status: ProposalStatus) -> Proposal | None:
        """Mark a pending proposal approved/rejected/withdrawn/fulfilled and drop it."""
        proposal = self._pending.pop(proposal_id, None)
        if proposal is not None:
            proposal.status = status
            self._notify(status, proposal)
        return proposal


__all__ = ["Proposal", "ProposalInbox", "ProposalListener", "ProposalStatus"]
