"""Who proposed what: lets the gateway show a proposal's outcome to its proposer.

MEW proposals are fulfilled by someone else (a human or trusted service) sending the real
``mcp/request`` with ``correlation_id = [proposal id]``; the target answers the fulfiller. The
ledger remembers proposal → proposer and fulfilment → proposer, so the gateway also delivers
the response (and any ``mcp/reject``) to the proposer, and refuses a withdrawal by anyone but
the proposer.
"""

from __future__ import annotations

from collections import OrderedDict

from hubbub.protocol.envelope import Envelope
from hubbub.protocol.errors import ErrorCode, ProtocolError


class ProposalLedger:
    """Bounded maps of recent proposals and fulfilments (oldest forgotten first)."""

    def __init__(self, capacity: int = 10_000) -> None:
        self.capacity = capacity
        self._proposer: OrderedDict[str, str] = OrderedDict()
        self._fulfilment: OrderedDict[str, str] = OrderedDict()

    def _remember(self, table: OrderedDict[str, str], key: str, value: str) -> None:
        table[key] = value
        if len(table) > self.capacity:
            table.popitem(last=False)

    def check(self, env: Envelope, sender: str) -> None:
        """Refuse an ``mcp/withdraw`` of a proposal the sender did not make."""
        if env.kind != "mcp/withdraw":
            return
        for cid in env.correlation_ids():
            owner = self._proposer.get(cid)
            if owner is not None and owner != sender:
                raise ProtocolError(
                    ErrorCode.CAPABILITY_VIOLATION,
                    f"only the proposer ({owner}) may withdraw proposal {cid}",
                    correlation_id=env.id or None,
                    extra={"attempted_kind": env.kind},
                )

    def observe(self, env: Envelope) -> list[str]:
        """Record a routed MCP envelope; return extra recipients (the proposer) if any."""
        kind = env.kind
        if kind == "mcp/proposal":
            self._remember(self._proposer, env.id, env.from_)
            return []
        extra: list[str] = []
        for cid in env.correlation_ids():
            if kind == "mcp/request" and cid in self._proposer:
                self._remember(self._fulfilment, env.id, self._proposer[cid])
            elif kind == "mcp/response" and cid in self._fulfilment:
                extra.append(self._fulfilment[cid])
            elif kind == "mcp/reject" and cid in self._proposer:
                extra.append(self._proposer[cid])
            elif kind == "mcp/withdraw":
                self._proposer.pop(cid, None)
        return extra
