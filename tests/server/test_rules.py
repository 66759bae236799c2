"""One home per rule: the kind table drives admission and requests; the proposal ledger is
both the proposal rules and the dashboard's board."""

from __future__ import annotations

import pytest

from hubbub.protocol.envelope import Envelope
from hubbub.protocol.errors import ErrorCode, ProtocolError
from hubbub.protocol.kinds import CLIENT_KINDS, KINDS, REQUEST_KINDS, SERVER_KINDS, STORED_KINDS
from hubbub.server.config import Limits, open_space
from hubbub.server.gateway import Gateway
from hubbub.server.state.proposals import ProposalLedger
from hubbub.store.memory import MemoryStore


def test_every_request_kind_has_exactly_one_handler() -> None:
    gw = Gateway([open_space()], MemoryStore(), Limits())
    assert gw.router.requests.handlers.keys() == REQUEST_KINDS
    assert REQUEST_KINDS <= CLIENT_KINDS and not (CLIENT_KINDS & SERVER_KINDS)


def test_the_table_says_what_is_stored_and_what_the_engines_see() -> None:
    assert "chat" in STORED_KINDS and KINDS["chat"].engines == "markers"
    assert "system/heartbeat" not in STORED_KINDS and "channel/join" not in STORED_KINDS
    assert KINDS["capability/grant"].request and KINDS["capability/grant"].stored
    assert {k for k, s in KINDS.items() if s.engines == "claim"} == {"floor/responding-to"}


def env(kind: str, sender: str, eid: str, to: list[str], cid: str | None = None) -> Envelope:
    return Envelope(
        kind=kind,
        id=eid,
        from_=sender,
        to=to,
        correlation_id=[cid] if cid else None,
        payload={"method": "tools/call", "params": {"name": "add"}},
    )


def test_the_ledger_is_the_board_from_proposal_to_result() -> None:
    ledger = ProposalLedger()
    proposal = env("mcp/proposal", "agent", "p1", ["calc"])
    assert ledger.observe(proposal) == []
    assert ledger.outcome(proposal) == ("proposal", "p1")
    assert [p.env.id for p in ledger.open()] == ["p1"]
    request = env("mcp/request", "human", "r1", ["calc"], "p1")
    ledger.check(request, "human")
    assert ledger.observe(request) == []
    assert ledger.outcome(request) == ("proposal-approved", "p1")
    assert ledger.open()[0].approved_by == "human"
    response = env("mcp/response", "calc", "x1", ["human"], "r1")
    assert ledger.observe(response) == ["agent"]  # the proposer hears the outcome
    assert ledger.outcome(response) == ("proposal-result", "p1")
    assert ledger.open() == []
    again = env("mcp/response", "calc", "x2", ["human"], "r1")
    assert ledger.observe(again) == ["agent"] and ledger.outcome(again) is None


def test_the_ledger_refuses_a_fulfilment_elsewhere_and_a_strangers_withdrawal() -> None:
    ledger = ProposalLedger()
    ledger.observe(env("mcp/proposal", "agent", "p1", ["calc"]))
    with pytest.raises(ProtocolError) as wrong:
        ledger.check(env("mcp/request", "human", "r1", ["other"], "p1"), "human")
    assert wrong.value.code is ErrorCode.INVALID_ENVELOPE
    with pytest.raises(ProtocolError) as stranger:
        ledger.check(env("mcp/withdraw", "human", "w1", ["calc"], "p1"), "human")
    assert stranger.value.code is ErrorCode.CAPABILITY_VIOLATION
    withdraw = env("mcp/withdraw", "agent", "w2", ["calc"], "p1")
    ledger.observe(withdraw)
    assert ledger.outcome(withdraw) == ("proposal-withdrawn", "p1") and ledger.open() == []
