"""Proposals end to end: propose → approve / reject / time out and withdraw; forged withdrawals."""

from __future__ import annotations

import asyncio
import time

import mcp.types as mt
import pytest

from hubbub.errors import CapabilityDenied, ProposalRejected, ProposalWithdrawn, RequestTimeout
from hubbub.protocol.envelope import Envelope
from hubbub.sdk import Proposal
from tests.conftest import RunningGateway
from tests.sdk.conftest import PROPOSER_CAPS, MakeClient, MakeParticipant, tool_owner
from tests.timing import until


async def test_proposal_approve_result(participant: MakeParticipant) -> None:
    await tool_owner(participant)
    agent = await participant("agent", capabilities=PROPOSER_CAPS)
    human = await participant("human", kind="human")
    events: list[tuple[str, str]] = []
    human.proposals.subscribe(lambda event, p: events.append((event, p.proposer)))
    call = asyncio.create_task(agent.call_tool("calc", "add", {"a": 2, "b": 3}, timeout=5))
    proposal = await human.proposals.next(timeout=2)
    assert proposal in human.proposals and len(human.proposals) == 1
    assert proposal.proposer == "agent" and proposal.to == ["calc"]
    assert proposal.channel == "#general" and proposal.method == "tools/call"
    assert proposal.params["arguments"] == {"a": 2, "b": 3}
    assert proposal.describe() == "agent proposes tools/call add {'a': 2, 'b': 3} on calc"
    fulfilled = await human.approve(proposal, timeout=2)  # the fulfiller gets the result too
    assert fulfilled["content"] == [{"type": "text", "text": "5"}]
    result = await asyncio.wait_for(call, 2)  # and the proposer, from the gateway
    assert result.content == [mt.TextContent(text="5")]
    assert proposal.status == "approved" and len(human.proposals) == 0
    assert events == [("added", "agent"), ("approved", "agent")]
    assert len(agent.requests) == 0 and len(human.requests) == 0


async def test_proposal_reject_fails_fast(participant: MakeParticipant) -> None:
    await tool_owner(participant)
    agent = await participant("agent", capabilities=PROPOSER_CAPS)
    human = await participant("human", kind="human")
    started = time.monotonic()
    call = asyncio.create_task(agent.call_tool("calc", "add", {"a": 1, "b": 1}, timeout=30))
    proposal = await human.proposals.next(timeout=2)
    await human.reject(proposal.id, "unsafe")
    with pytest.raises(ProposalRejected, match=r"^Proposal rejected by human: unsafe$") as info:
        await asyncio.wait_for(call, 2)
    assert time.monotonic() - started < 2  # fail fast, not at the 30 s timeout
    assert info.value.by == "human" and info.value.reason == "unsafe"
    assert info.value.proposal_id == proposal.id
    assert proposal.status == "rejected"


async def test_proposal_timeout_withdraws_and_the_gateway_delivers_it(
    participant: MakeParticipant, client: MakeClient
) -> None:
    await tool_owner(participant)
    agent = await participant("agent", capabilities=PROPOSER_CAPS)
    human = await participant("human", kind="human")
    observer = await client("observer")
    withdrawn = observer.expect("mcp/withdraw")
    seen: list[Proposal] = []
    human.proposals.subscribe(lambda event, p: seen.append(p) if event == "withdrawn" else None)
    with pytest.raises(RequestTimeout, match="no fulfilment of the proposal for tools/call"):
        await agent.call_tool("calc", "add", {"a": 1, "b": 1}, timeout=0.2)
    withdrawal = await asyncio.wait_for(withdrawn, 2)
    assert withdrawal.from_ == "agent" and withdrawal.payload == {"reason": "timeout"}
    await until(lambda: len(seen) == 1, what="the human's inbox seeing the withdrawal")
    assert seen[0].status == "withdrawn"
    assert withdrawal.correlation_ids() == [seen[0].id]
    assert len(human.proposals) == 0
    with pytest.raises(ValueError, match="no pending proposal"):
        await human.approve(seen[0].id)


async def test_the_proposer_withdraws_its_own_proposal(
    participant: MakeParticipant, client: MakeClient
) -> None:
    """Document 003: ``withdraw(proposal_id)`` — the waiting call fails at once, everyone
    sees the ``mcp/withdraw``, fulfillers drop the proposal; nobody else may withdraw it."""
    await tool_owner(participant)
    agent = await participant("agent", capabilities=PROPOSER_CAPS)
    human = await participant("human", kind="human")
    observer = await client("observer")
    withdrawn = observer.expect("mcp/withdraw")
    gone: list[Proposal] = []
    human.proposals.subscribe(lambda event, p: gone.append(p) if event == "withdrawn" else None)
    started = time.monotonic()
    call = asyncio.create_task(agent.call_tool("calc", "add", {"a": 1, "b": 2}, timeout=30))
    proposal = await human.proposals.next(timeout=2)
    assert agent.my_proposals == [proposal.id]
    with pytest.raises(ValueError, match="not a pending proposal of human"):
        await human.withdraw(proposal.id)  # not hers to withdraw
    reaches_human = human.client.expect("mcp/withdraw")
    await agent.withdraw(proposal.id, "found another way")
    with pytest.raises(ProposalWithdrawn, match="withdrawn: found another way") as info:
        await asyncio.wait_for(call, 2)
    assert time.monotonic() - started < 2 and info.value.proposal_id == proposal.id
    withdrawal = await asyncio.wait_for(withdrawn, 2)
    assert withdrawal.from_ == "agent" and withdrawal.correlation_ids() == [proposal.id]
    assert withdrawal.payload == {"reason": "found another way"}
    await asyncio.wait_for(reaches_human, 2)
    assert gone == [proposal] and proposal.status == "withdrawn"
    assert agent.my_proposals == []
    with pytest.raises(ValueError, match=r"not a pending proposal of agent \(pending: none\)"):
        await agent.withdraw(proposal.id)


async def test_a_proposal_withdrawn_before_its_echo_is_withdrawn_by_the_id_everyone_sees(
    participant: MakeParticipant, client: MakeClient
) -> None:
    await tool_owner(participant)
    agent = await participant("agent", capabilities=PROPOSER_CAPS)
    observer = await client("observer")
    proposed, withdrawn = observer.expect("mcp/proposal"), observer.expect("mcp/withdraw")
    call = asyncio.create_task(agent.call_tool("calc", "add", {"a": 1, "b": 2}, timeout=30))
    await asyncio.sleep(0)  # the call starts: sent, not yet echoed (the gateway is a few
    (client_id,) = agent.my_proposals  # loop turns away)
    await agent.withdraw(client_id)
    with pytest.raises(ProposalWithdrawn, match="no_longer_needed"):
        await asyncio.wait_for(call, 2)
    proposal = await asyncio.wait_for(proposed, 2)
    assert proposal.id == client_id  # the gateway keeps the id it was sent with
    withdrawal = await asyncio.wait_for(withdrawn, 2)
    assert withdrawal.correlation_ids() == [proposal.id]


async def test_a_forged_withdrawal_is_refused_by_the_gateway(
    participant: MakeParticipant,
) -> None:
    await tool_owner(participant)
    agent = await participant("agent", capabilities=PROPOSER_CAPS)
    human = await participant("human", kind="human")
    mallory = await participant("mallory")
    call = asyncio.create_task(agent.call_tool("calc", "add", {"a": 1, "b": 2}, timeout=5))
    proposal = await human.proposals.next(timeout=2)
    await mallory.proposals.next(timeout=2)
    forged = Envelope(
        kind="mcp/withdraw", id=mallory.client.new_id(), correlation_id=[proposal.id], payload={}
    )
    refused = mallory.client.expect("system/error", lambda e: forged.id in e.correlation_ids())
    await mallory.client.send(forged)
    error = await asyncio.wait_for(refused, 2)
    assert "only the proposer (agent) may withdraw" in error.payload["message"]
    assert proposal in human.proposals  # still pending
    assert (await human.approve(proposal))["content"][0]["text"] == "3"
    assert (await asyncio.wait_for(call, 2)).content[0].text == "3"


async def test_a_delivered_forged_withdrawal_is_ignored_by_the_sdk(
    participant: MakeParticipant, gw: RunningGateway
) -> None:
    """MEW: withdrawals not from the proposer MUST be ignored. Our gateway refuses them, so
    to see the SDK's own check we let this gateway forget proposals at once (as a gateway
    that does not track them would)."""
    gw.router.spaces["default"].proposals.capacity = 0
    await tool_owner(participant)
    agent = await participant("agent", capabilities=PROPOSER_CAPS)
    human = await participant("human", kind="human")
    mallory = await participant("mallory")
    call = asyncio.create_task(agent.mcp_request("calc", {"method": "tools/list"}, timeout=0.5))
    proposal = await human.proposals.next(timeout=2)
    forged = human.client.expect("mcp/withdraw")
    await mallory.client.send(
        Envelope(kind="mcp/withdraw", correlation_id=[proposal.id], payload={"reason": "forged"})
    )
    assert (await asyncio.wait_for(forged, 2)).from_ == "mallory"  # delivered...
    assert proposal in human.proposals and proposal.status == "pending"  # ...and ignored
    with pytest.raises(RequestTimeout):
        await call
    await until(lambda: proposal.status == "withdrawn", what="the real withdrawal")
    assert proposal not in human.proposals


async def test_fulfilling_needs_the_capability_to_request(participant: MakeParticipant) -> None:
    await tool_owner(participant)
    agent = await participant("agent", capabilities=PROPOSER_CAPS)
    other = await participant("other", capabilities=PROPOSER_CAPS)
    call = asyncio.create_task(agent.call_tool("calc", "add", {"a": 1, "b": 1}, timeout=0.5))
    proposal = await other.proposals.next(timeout=2)
    with pytest.raises(CapabilityDenied, match="other may not send mcp/request"):
        await other.approve(proposal)
    assert proposal in other.proposals
    with pytest.raises(RequestTimeout):
        await call


async def test_a_fulfilment_by_a_plain_mew_client_reaches_the_proposer(
    participant: MakeParticipant, gw: RunningGateway
) -> None:
    """A fulfiller that is not this SDK (a raw MEW client) and re-numbers the JSON-RPC id:
    the proposer still gets the outcome, which the gateway delivers to it."""
    await tool_owner(participant)
    agent = await participant("agent", capabilities=PROPOSER_CAPS)
    human = await gw.mew("raw-human")
    call = asyncio.create_task(agent.call_tool("calc", "add", {"a": 4, "b": 5}, timeout=5))
    proposal = await human.expect("mcp/proposal")
    await human.send(
        {
            "kind": "mcp/request",
            "to": proposal["to"],
            "correlation_id": [proposal["id"]],
            "payload": {**proposal["payload"], "id": 999},
        }
    )
    response = await human.expect("mcp/response")
    assert response["payload"]["id"] == 999
    assert (await asyncio.wait_for(call, 2)).content[0].text == "9"
