"""Which response answers which request of ours, sans-I/O.

:class:`OpenRequests` holds a participant's requests, proposals and fulfilments that wait for
an answer, and says which one an arriving ``mcp/response``, ``mcp/reject`` or ``system/error``
answers. It neither sends nor waits: :class:`~hubbub.sdk.Participant` opens an entry when it
sends, feeds it what arrives and completes its own future with the outcome, so the rules are
tested without a gateway (``tests/sdk/test_correlation.py``).

The rules (docs/sdk.md, "How requests and responses are correlated"):

- Every request, proposal or fulfilment is sent with a client-chosen id ``T`` as the envelope
  ``id`` and, for requests and proposals, as the JSON-RPC ``payload.id``. The gateway keeps an
  envelope's ``id`` end to end (docs/protocol.md), so a responder's ``correlation_id: [T]``
  and a refusal's (``system/error``) name ``T`` itself; no echo has to be waited for.
- A proposal of ours is answered by the response to its *fulfilment*: a request by someone
  else that quotes the proposal (``correlation_id: [T]``) under an id of its own ``F``. Seeing
  that request makes ``F`` stand for ``T`` (once); failing that, a response from one of the
  proposal's targets with ``payload.id == T`` answers it (fulfilments keep the payload).
- A response counts only from a participant the request was addressed to (for a proposal:
  its ``to``, the targets of its fulfilment); one from anybody else is ignored, however it
  is correlated. A reject counts only from an addressee of the proposal or from a
  participant who may fulfil it (the caller says who: ``may_fulfil``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from hubbub.protocol.envelope import Envelope

Kind = Literal["request", "proposal", "fulfilment"]


@dataclass(eq=False)
class Pending:
    """A request, proposal or fulfilment of ours waiting for its answer."""

    token: str
    """The id it was sent with (envelope ``id``; JSON-RPC ``id`` of a request or proposal)."""
    kind: Kind
    targets: list[str]
    method: str
    channel: str | None = None
    """Where a proposal was posted (a withdrawal goes there too)."""
    proposal: str | None = None
    """The proposal a fulfilment carries out."""
    aliases: set[str] = field(default_factory=set)
    """Ids of others' fulfilments of this proposal (their responses answer it)."""
    payload: dict[str, Any] | None = None
    """What was sent (a proposal's JSON-RPC request: what a fulfiller would send)."""


MayFulfil = Callable[[str, Pending], bool]
"""Whether a participant may fulfil a pending proposal (may reject it too)."""


class OpenRequests:
    """What of ours waits for an answer, by the id it was sent with."""

    def __init__(self) -> None:
        self._open: dict[str, Pending] = {}
        self._aliases: dict[str, str] = {}

    def __len__(self) -> int:
        """How many are waiting."""
        return len(self._open)

    def open(self, pending: Pending) -> Pending:
        """Start waiting for ``pending``'s answer."""
        self._open[pending.token] = pending
        return pending

    def close(self, token: str) -> Pending | None:
        """Stop waiting for ``token`` (answered, refused, timed out or withdrawn)."""
        pending = self._open.pop(token, None)
        if pending is not None:
            for alias in pending.aliases:
                self._aliases.pop(alias, None)
        return pending

    def get(self, token: str) -> Pending | None:
        """The open entry sent with ``token``, if any."""
        return self._open.get(token)

    def all(self) -> list[Pending]:
        """Every open entry, oldest first."""
        return list(self._open.values())

    def proposals(self) -> list[str]:
        """The ids of our proposals still waiting for a fulfilment."""
        return [p.token for p in self._open.values() if p.kind == "proposal"]

    def fulfilling(self, proposal_id: str) -> bool:
        """Whether a fulfilment of ``proposal_id`` by us is under way."""
        return any(
            p.kind == "fulfilment" and p.proposal == proposal_id for p in self._open.values()
        )

    def request_seen(self, env: Envelope) -> None:
        """An ``mcp/request`` went by: if it fulfils a proposal of ours, its response will
        answer that proposal."""
        for cid in env.correlation_ids():
            mine = self._open.get(cid)
            if mine is not None and mine.kind == "proposal" and env.id and env.id != cid:
                mine.aliases.add(env.id)
                self._aliases.setdefault(env.id, cid)

    def response(self, env: Envelope, me: str) -> Pending | None:
        """The entry an ``mcp/response`` answers (closed now), or None if it is not ours."""
        pending = self._by_correlation(env)
        addressed = me in (env.to or ())
        if pending is None:
            candidate = self._open.get(str(env.payload.get("id")))
            if (
                candidate is not None
                and env.from_ in candidate.targets
                and (candidate.kind == "proposal" or addressed)
            ):
                pending = candidate
        if pending is None and env.channel is None and not addressed:
            # A DM response addressed to someone else reaches us only because we proposed
            # what it answers (the gateway shows a fulfilment's outcome to the proposer). If
            # the fulfiller changed the payload id, attribute it when that is unambiguous.
            waiting = [
                p for p in self._open.values() if p.kind == "proposal" and env.from_ in p.targets
            ]
            if len(waiting) == 1:
                pending = waiting[0]
        if pending is not None:
            self.close(pending.token)
        return pending

    def rejected(self, env: Envelope, may_fulfil: MayFulfil) -> list[Pending]:
        """Our proposals that an ``mcp/reject`` declines (closed now): only an addressee of a
        proposal, or one who may fulfil it, declines it."""
        out: list[Pending] = []
        for cid in env.correlation_ids():
            pending = self._open.get(cid)
            if (
                pending is not None
                and pending.kind == "proposal"
                and (env.from_ in pending.targets or may_fulfil(env.from_, pending))
            ):
                self.close(cid)
                out.append(pending)
        return out

    def refused(self, env: Envelope) -> list[Pending]:
        """What of ours a ``system/error`` refuses (closed now)."""
        out: list[Pending] = []
        for cid in env.correlation_ids():
            pending = self.close(cid)
            if pending is not None:
                out.append(pending)
        return out

    def _by_correlation(self, env: Envelope) -> Pending | None:
        """The entry a response's ``correlation_id`` names, if the responder is one of its
        targets."""
        for cid in env.correlation_ids():
            pending = self._open.get(cid)
            if pending is not None:
                if env.from_ in pending.targets:
                    return pending
                continue
            token = self._aliases.get(cid)  # a fulfilment's id answers once
            if token is not None and token not in self._open:
                del self._aliases[cid]
            elif token is not None:
                if env.from_ not in self._open[token].targets:
                    continue
                del self._aliases[cid]
                self._open[token].aliases.discard(cid)
                return self._open[token]
        return None


__all__ = ["Kind", "MayFulfil", "OpenRequests", "Pending"]
