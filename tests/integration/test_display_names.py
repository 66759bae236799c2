"""Display names travel: a MEW join's ``name`` is in the welcome and presence of both
dialects; it is unique in the space (a second ``Ada`` is refused, naming who has it); a MEW
join without one is unchanged."""

from __future__ import annotations

from typing import Any

import pytest

from hubbub.protocol.addressing import display_name_error
from hubbub.protocol.mew import MewDialect
from tests.conftest import RunningGateway


def _entries(frame: dict[str, Any]) -> list[dict[str, Any]]:
    payload = frame["payload"]
    return payload.get("participants") or [payload["participant"]]


def test_the_mew_join_reads_name() -> None:
    hello = MewDialect().parse_hello({"type": "join", "participantId": "coder", "name": "Ada"})
    assert hello.display_name == "Ada" and hello.name is None
    assert MewDialect().parse_hello({"type": "join", "participantId": "x"}).display_name is None


@pytest.mark.parametrize("name", ["", " Ada", "Ada\n", "a" * 65, "@Ada", "Server", "s e r v e r"])
def test_a_display_name_that_cannot_address_is_not_legal(name: str) -> None:
    assert display_name_error(name) is not None
    assert display_name_error("Chef Anna") is None and display_name_error("Zoë") is None


async def test_a_display_name_is_in_welcome_and_presence_on_both_dialects(
    gw: RunningGateway,
) -> None:
    alice = await gw.mew("alice")
    watcher = await gw.agentchat("watcher")
    coder = await gw.mew("coder", name="Ada")
    assert coder.welcome["payload"]["you"]["name"] == "Ada"
    joined = await alice.next_where(
        lambda f: (
            f.get("kind") == "system/presence" and any(p["id"] == "coder" for p in _entries(f))
        )
    )
    assert [p.get("name") for p in _entries(joined) if p["id"] == "coder"] == ["Ada"]
    seen = await watcher.next_where(
        lambda f: f.get("type") == "AGENT_JOINED" and f["agent"] == "@coder"
    )
    assert (seen["agent"], seen["name"]) == ("@coder", "Ada")
    late = await gw.mew("late")
    names = {p["id"]: p.get("name") for p in late.welcome["payload"]["participants"]}
    assert names["coder"] == "Ada" and names["alice"] is None  # no name: the id is the handle


@pytest.mark.parametrize("name", ["Ada", "ada", "coder"])
async def test_a_display_name_another_participant_has_is_refused(
    gw: RunningGateway, name: str
) -> None:
    await gw.mew("coder", name="Ada")
    c = await gw.connect()
    await c.send({"type": "join", "participantId": "coder2", "name": name})
    error = await c.expect("system/error")
    assert error["payload"]["error"] == "invalid_id"
    message = error["payload"]["message"]
    assert f"display name {name!r} is taken" in message and "'coder'" in message
    assert "pick another 'name'" in message


async def test_the_same_participant_may_come_back_with_its_name(gw: RunningGateway) -> None:
    first = await gw.mew("coder", name="Ada")
    again = await gw.mew("coder", name="Ada")  # a reconnect replaces its earlier connection
    assert again.welcome["payload"]["you"]["name"] == "Ada"
    await first.close()


async def test_an_agentchat_sender_is_told_its_addressee_is_offline(gw: RunningGateway) -> None:
    travel = await gw.mew("travel", name="Phileas")
    await travel.close()
    bot = await gw.agentchat("bot")
    await gw.settle()
    await bot.send({"type": "MSG", "to": "#general", "content": "@Phileas a train to Lyon?"})
    note = await bot.next_where(lambda f: f.get("type") == "MSG" and f.get("from") == "@server")
    assert note["content"] == "travel is offline; it will see this when it reconnects"
    assert note["to"] == "@bot" and note["in_reply_to"]
    back = await gw.connect()  # a new connection, no resume: the message was kept for it
    await back.send({"type": "join", "participantId": "travel"})
    kept = await back.next_where(lambda f: f.get("kind") in ("chat", "channel/joined"))
    assert (kept["kind"], kept["payload"]["text"]) == ("chat", "@Phileas a train to Lyon?")
