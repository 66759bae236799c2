"""The gateway enforces document 003's proposal rules and shows an outcome to the proposer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hubbub.server.config import Limits
from tests.conftest import RunningGateway, WsClient, start_gateway, stop_gateway


async def test_fulfilled_proposal_response_reaches_the_proposer(gateway: RunningGateway) -> None:
    agent = await gateway.mew("agent")
    human = await gateway.mew("human")
    tool = await gateway.mew("tool")
    call = {"method": "tools/call", "params": {"name": "add", "arguments": {"a": 1, "b": 2}}}
    # the proposal goes to the channel, addressed to the tool, so the human sees it
    await agent.send(
        {"kind": "mcp/proposal", "channel": "#general", "to": ["tool"], "payload": call}
    )
    proposal = await human.expect("mcp/proposal")
    # the human fulfils it with a direct request to the tool
    await human.send(
        {
            "kind": "mcp/request",
            "to": ["tool"],
            "correlation_id": [proposal["id"]],
            "payload": call,
        }
    )
    request = await tool.next_where(lambda f: f.get("kind") == "mcp/request")
    await tool.send(
        {
            "kind": "mcp/response",
            "to": [request["from"]],
            "correlation_id": [request["id"]],
            "payload": {"result": {"content": [{"type": "text", "text": "3"}]}},
        }
    )
    for who in (human, agent):
        resp = await who.expect("mcp/response")
        assert resp["correlation_id"] == [request["id"]] and resp["to"] == ["human"]


async def test_reject_reaches_the_proposer_and_forged_withdraw_is_refused(
    gateway: RunningGateway,
) -> None:
    agent = await gateway.mew("agent")
    human = await gateway.mew("human")
    await agent.send({"kind": "mcp/proposal", "to": ["human"], "payload": {"method": "x"}})
    proposal = await human.expect("mcp/proposal")
    await human.send(
        {
            "kind": "mcp/withdraw",
            "correlation_id": [proposal["id"]],
            "payload": {"reason": "forged"},
        }
    )
    err = await human.expect("system/error")
    assert "only the proposer (agent)" in err["payload"]["message"]
    await human.send(
        {
            "kind": "mcp/reject",
            "to": ["human"],
            "correlation_id": [proposal["id"]],
            "payload": {"reason": "unsafe"},
        }
    )
    rejected = await agent.expect("mcp/reject")
    assert rejected["from"] == "human" and rejected["payload"]["reason"] == "unsafe"
    await agent.send({"kind": "mcp/withdraw", "correlation_id": [proposal["id"]], "payload": {}})
    assert (await human.expect("mcp/withdraw"))["from"] == "agent"


async def test_a_proposal_without_to_is_broadcast_and_an_empty_to_refused(
    gateway: RunningGateway,
) -> None:
    """MEW v0.4: an omitted ``to`` means everyone; ``to: []`` names nobody."""
    agent = await gateway.mew("agent")
    human = await gateway.mew("human")
    proposal = {"kind": "mcp/proposal", "channel": "#general", "payload": {"method": "x"}}
    await agent.send({"id": "prop-0", **proposal, "to": []})
    err = await agent.expect("system/error")
    assert err["payload"]["error"] == "invalid_envelope"
    assert "'to' must name at least one recipient" in err["payload"]["message"]
    assert err["correlation_id"] == ["prop-0"]
    await agent.send({"id": "prop-1", **proposal})
    got = await human.expect("mcp/proposal")
    assert got["id"] == "prop-1" and "to" not in got
    await human.send(
        {
            "id": "req-1",
            "kind": "mcp/request",
            "to": ["agent"],
            "correlation_id": ["prop-1"],
            "payload": {"method": "x"},
        }
    )
    fulfilled = await agent.expect("mcp/request")  # fulfilled toward anyone
    assert fulfilled["correlation_id"] == ["prop-1"]


async def test_a_fulfilment_goes_to_the_proposals_to(gateway: RunningGateway) -> None:
    agent = await gateway.mew("agent")
    human = await gateway.mew("human")
    tool = await gateway.mew("tool")
    await gateway.mew("other")
    call = {"method": "tools/call", "params": {"name": "add", "arguments": {"a": 1, "b": 2}}}
    await agent.send(
        {"kind": "mcp/proposal", "channel": "#general", "to": ["tool"], "payload": call}
    )
    proposal = await human.expect("mcp/proposal")
    for wrong in (["other"], ["tool", "other"], []):
        await human.send(
            {
                "id": "ful-1",
                "kind": "mcp/request",
                "to": wrong,
                "channel": "#general",
                "correlation_id": [proposal["id"]],
                "payload": call,
            }
        )
        err = await human.expect("system/error")
        assert err["payload"]["error"] == "invalid_envelope"
        assert f"fulfils proposal {proposal['id']}" in err["payload"]["message"]
        assert "['tool']" in err["payload"]["message"]
        assert err["correlation_id"] == ["ful-1"]
    await human.send(
        {
            "kind": "mcp/request",
            "to": ["tool", "tool"],
            "correlation_id": [proposal["id"]],
            "payload": call,
        }
    )
    request = await tool.expect("mcp/request")
    assert request["correlation_id"] == [proposal["id"]]


async def test_pending_proposals_are_capped_per_proposer_and_per_space(tmp_path: Path) -> None:
    """Issue 21 item 8: any agent may propose, so open proposals are bounded."""
    limits = Limits(rate_per_s=0, max_pending_proposals_per_participant=3, max_pending_proposals=5)
    gw = await start_gateway(tmp_path, limits=limits)
    try:
        one, two, three = [await gw.mew(p) for p in ("one", "two", "three")]
        await gw.mew("calc")
        call = {"method": "tools/call", "params": {"name": "add"}}

        async def propose(c: WsClient, pid: str) -> dict[str, Any]:
            await c.send({"kind": "mcp/proposal", "id": pid, "to": ["calc"], "payload": call})
            return await c.next_where(
                lambda f: (
                    f.get("id") == pid
                    or (f.get("kind") == "system/error" and f.get("correlation_id") == [pid])
                )
            )

        for i in range(3):
            assert (await propose(one, f"one-{i}"))["kind"] == "mcp/proposal"
        err = await propose(one, "one-3")
        assert err["payload"]["error"] == "rate_limited"
        assert "you have 3 pending proposals" in err["payload"]["message"]
        assert "max_pending_proposals_per_participant" in err["payload"]["message"]
        for i in range(2):
            assert (await propose(two, f"two-{i}"))["kind"] == "mcp/proposal"
        err = await propose(three, "three-0")
        assert "the space has 5 pending proposals" in err["payload"]["message"]
        await one.send({"kind": "mcp/withdraw", "correlation_id": ["one-0"], "payload": {}})
        assert (await propose(three, "three-1"))["kind"] == "mcp/proposal"  # room again
    finally:
        await stop_gateway(gw)
