"""Who proposed what: enforces document 003's proposal rules and shows an outcome to its proposer.

MEW proposals are fulfilled by someone else (a human or trusted service) sending the real
``mcp/request`` with ``correlation_id = [proposal id]``; the target answers the fulfiller. The
ledger remembers proposal → (proposer, targets) and fulfilment → proposer, so the gateway

- refuses a proposal without ``to`` (document 003: proposals MUST name their targets),
- refuses a fulfilment whose ``to`` is not the proposal's ``to``,
- refuses a withdrawal by anyone but the proposer,
- and also delivers the response (and any ``mcp/reject``) to the proposer.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import TypeVar

from hubbub.protocol.envelope import Envelope
from hubbub.protocol.errors import ErrorCode, ProtocolError

_V = TypeVar("_V")


class ProposalLedger:
    """Bounded maps of recent proposals and fulfilments (oldest forgotten first)."""

    def __init__(self, capacity: int = 10_000) -> None:
        self.capacity = capacity
        self._proposals: OrderedDict[str, tuple[str, frozenset[str]]] = OrderedDict()
        """Proposal id → (proposer, the ids in its ``to``)."""
        self._fulfilment: OrderedDict[str, str] = OrderedDict()

    def _remember(self, table: OrderedDict[str, _V], key: str, value: _V) -> None:
        table[key] = value
        if len(table) > self.capacity:
            table.popitem(last=False)

    def check(self, env: Envelope, sender: str) -> None:
        """Refuse a proposal without ``to``, a fulfilment sent elsewhere than its proposal's
        ``to``, and an ``mcp/withdraw`` of a proposal the sender did not make."""
        kind = env.kind
        if kind == "mcp/proposal":
            if not env.to:
                raise ProtocolError(
                    ErrorCode.INVALID_ENVELOPE,
                    "mcp/proposal needs 'to' naming the participant(s) that would run it "
                    '(e.g. "to": ["calculator"]); a fulfiller sends the request there',
                    correlation_id=env.id or None,
                    extra={"attempted_kind": kind},
                )
            return
        if kind not in ("mcp/request", "mcp/withdraw"):
            return
        for cid in env.correlation_ids():
            known = self._proposals.get(cid)
            if known is None:
                continue
            proposer, targets = known
            if kind == "mcp/withdraw" and proposer != sender:
                raise ProtocolError(
                    ErrorCode.CAPABILITY_VIOLATION,
                    f"only the proposer ({proposer}) may withdraw proposal {cid}",
                    correlation_id=env.id or None,
                    extra={"attempted_kind": kind},
                )
            if kind == "mcp/request" and frozenset(env.to or ()) != targets:
                raise ProtocolError(
                    ErrorCode.INVALID_ENVELOPE,
                    f"this request fulfils proposal {cid}, so its 'to' must be the "
                    f"proposal's: {sorted(targets)} (got {env.to or []}); send it there, "
                    "or drop the correlation_id for an unrelated request",
                    correlation_id=env.id or None,
                    extra={"attempted_kind": kind},
                )

    def observe(self, env: Envelope) -> list[str]:
        """Record a routed MCP envelope; return extra recipients (the proposer) if any."""
        kind = env.kind
        if kind == "mcp/proposal":
            self._remember(self._proposals, env.id, (env.from_, frozenset(env.to or ())))
            return []
        extra: list[str] = []
        for cid in env.correlation_ids():
            known = self._proposals.get(cid)
            if kind == "mcp/request" and known is not None:
                self._remember(self._fulfilment, env.id, known[0])
            elif kind == "mcp/response" and cid in self._fulfilment:
                extra.append(self._fulfilment[cid])
            elif kind == "mcp/reject" and known is not None:
                extra.append(known[0])
            elif kind == "mcp/withdraw":
                self._proposals.pop(cid, None)
        return extra
