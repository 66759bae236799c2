"""``claim_floor`` on a message answered already, or addressed to another: refused, with who
answered or whom it is for (the gateway's one refusal rule, reached through the MCP door)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import RunningGateway
from tests.mcp.conftest import SHORT, call, opener

pytestmark = pytest.mark.timeout(90)


@pytest.fixture(autouse=True)
def short_listen(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in SHORT.items():
        monkeypatch.setenv(name, value)


async def _question(s: Any, gateway: RunningGateway, frame: dict[str, Any]) -> dict[str, Any]:
    """Have ``asker`` send ``frame`` to #general; the message as the MCP session heard it."""
    asker = await gateway.mew("asker", kind="human")
    await asker.send(frame)
    sent = await asker.expect("chat")
    while True:
        got = await call(s, "listen", timeout_s=10)
        for m in got["messages"]:
            if m["id"] == sent["id"]:
                return {**m, "asker": asker}


async def test_claim_floor_on_an_answered_message_is_refused(gateway: RunningGateway) -> None:
    maths = await gateway.mew("maths")
    async with opener("http", gateway.http, gateway.url)("claude") as s:
        q = await _question(
            s, gateway, {"kind": "chat", "channel": "#general", "payload": {"text": "6*7?"}}
        )
        await maths.send(
            {
                "kind": "chat",
                "channel": "#general",
                "correlation_id": [q["id"]],
                "payload": {"text": "42"},
            }
        )
        await q["asker"].expect("chat")
        result = await s.call_tool("claim_floor", {"message_id": q["id"]})
        assert not result.is_error
        assert result.structured_content is not None
        advice = result.structured_content.pop("advice")  # what the model sees (Codex, Claude)
        assert advice.startswith(f"{q['id']} was answered already by maths (message ")
        assert result.structured_content == {
            "message_id": q["id"],
            "channel": "#general",
            "granted": False,
            "yielded_to": "maths",
        }
        text = result.content[0].text  # type: ignore[union-attr]
        assert text.startswith(f"Refused: {q['id']} was answered already by maths (message ")
        assert text.endswith("Do not answer it.")


async def test_claim_floor_on_a_message_for_another_is_refused(gateway: RunningGateway) -> None:
    await gateway.mew("travel", name="Trip Planner")
    async with opener("http", gateway.http, gateway.url)("claude") as s:
        q = await _question(
            s,
            gateway,
            {"kind": "chat", "channel": "#general", "payload": {"text": "@Trip Planner Porto?"}},
        )
        result = await s.call_tool("claim_floor", {"message_id": q["id"]})
        assert result.structured_content is not None
        assert result.structured_content["granted"] is False
        assert result.structured_content["yielded_to"] == "travel"
        assert "is addressed to travel" in result.structured_content["advice"]
        text = result.content[0].text  # type: ignore[union-attr]
        assert f"Refused: {q['id']} is addressed to travel, not to you" in text
