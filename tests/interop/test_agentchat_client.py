"""agentchat's own client against hubbub: each flow frame by frame, as agentchat's TypeScript
client (``lib/client.ts``) sends it and reads the answers, over real sockets."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from hubbub.server.config import (
    AUTO_JOIN_MAX,
    ConfigError,
    ParticipantConfig,
    SpaceConfig,
    hash_token,
    load_space,
)
from tests.conftest import RunningGateway, WsClient, start_gateway, stop_gateway

Frame = dict[str, Any]


def of_type(type_: str, **fields: Any) -> Any:
    """A predicate: an agentchat frame of ``type_`` whose ``fields`` have these values."""
    return lambda f: f.get("type") == type_ and all(f.get(k) == v for k, v in fields.items())


async def identify(gw: RunningGateway, name: str, **extra: Any) -> WsClient:
    """What ``AgentChatClient.connect()`` sends: IDENTIFY {name, pubkey: null}; then WELCOME."""
    c = await gw.connect()
    await c.send({"type": "IDENTIFY", "name": name, "pubkey": None, **extra})
    c.welcome = await c.expect_type("WELCOME")
    return c


def team_space(**settings: Any) -> SpaceConfig:
    """A space with tokens: bot may join #general and #ops only; boss may do anything."""
    join_two = {"kind": "channel/join", "payload": {"channel": ["#general", "#ops"]}}
    cfg = SpaceConfig(
        space="team",
        channels=["#general", "#ops", "#secret"],
        participants={
            "bot": ParticipantConfig(
                token_hash=hash_token("bot-token"),
                capabilities=[{"kind": "chat"}, join_two, {"kind": "channel/members"}],
            ),
            "boss": ParticipantConfig(kind="human", token_hash=hash_token("boss-token")),
        },
        **settings,
    )
    cfg.validate()
    return cfg


@pytest.fixture
async def team(tmp_path: Path) -> AsyncIterator[RunningGateway]:
    gw = await start_gateway(tmp_path, spaces=[team_space()])
    yield gw
    await stop_gateway(gw)


# ---------------------------------------------------------------------------------------------
# 1. auto-join: MSG to #general without JOIN
# ---------------------------------------------------------------------------------------------


async def test_identify_auto_joins_so_msg_to_general_needs_no_join(
    gateway: RunningGateway,
) -> None:
    watcher = await gateway.mew("watcher")
    alice = await identify(gateway, "alice")
    assert alice.welcome["agent_id"] == "@alice" and alice.welcome["name"] == "alice"

    await alice.send({"type": "MSG", "to": "#general", "content": "hello from agentchat"})
    echo = await alice.expect_type("MSG")
    assert echo["from"] == "@alice" and echo["from_name"] == "alice"
    assert echo["to"] == "#general" and echo["content"] == "hello from agentchat"
    seen = await watcher.expect("chat")
    assert seen["from"] == "alice" and seen["payload"] == {"text": "hello from agentchat"}


async def test_auto_join_takes_every_channel_the_capabilities_allow(
    team: RunningGateway,
) -> None:
    boss = await identify(team, "boss", token="boss-token", space="team")
    bot = await identify(team, "bot", token="bot-token", space="team")
    for channel in ("#general", "#ops", "#secret"):
        await boss.send({"type": "MSG", "to": channel, "content": f"hello {channel}"})
    got = [(await bot.expect_type("MSG"))["to"] for _ in range(2)]
    assert got == ["#general", "#ops"]  # not #secret
    await bot.silent(of_type("MSG", to="#secret"))
    await bot.send({"type": "MSG", "to": "#ops", "content": "no JOIN needed"})
    await boss.next_where(of_type("MSG", content="no JOIN needed", to="#ops"))


async def test_auto_join_follows_the_space_setting(tmp_path: Path) -> None:
    gw = await start_gateway(tmp_path, spaces=[team_space(agentchat_auto_join=["#ops"])])
    try:
        boss = await identify(gw, "boss", token="boss-token", space="team")
        await boss.send({"type": "MSG", "to": "#ops", "content": "joined"})
        assert (await boss.expect_type("MSG"))["content"] == "joined"
        await boss.send({"type": "MSG", "to": "#general", "content": "not joined"})
        err = await boss.expect_type("ERROR")
        assert err["code"] == "NOT_IN_CHANNEL"
    finally:
        await stop_gateway(gw)


async def test_auto_join_is_silent_and_a_later_join_replays_history_once(
    gateway: RunningGateway,
) -> None:
    """agentchat's daemon connects, then JOINs: its inbox must get each message once.
    ``quickSend`` and ``listen`` JOIN after connecting too."""
    peer = await gateway.agentchat("peer")
    for text in ("one", "two"):
        await peer.send({"type": "MSG", "to": "#general", "content": text})
        await peer.expect_type("MSG")
    alice = await identify(gateway, "alice")
    await alice.silent(lambda f: f.get("type") in ("JOINED", "MSG"))  # no JOINED, no replay
    await peer.next_where(of_type("AGENT_JOINED", agent="@alice", channel="#general"))
    await alice.send({"type": "JOIN", "channel": "#general"})
    again = await alice.expect_type("JOINED")
    assert again["channel"] == "#general"
    replayed = [await alice.expect_type("MSG") for _ in range(2)]
    assert [(m["content"], m["replay"]) for m in replayed] == [("one", True), ("two", True)]
    await alice.silent(of_type("MSG"))  # the history once, nothing more
    await peer.silent(of_type("AGENT_JOINED", agent="@alice"))


# ---------------------------------------------------------------------------------------------
# 2. AGENTS objects, MSG from_name
# ---------------------------------------------------------------------------------------------


async def test_list_agents_answers_objects_the_agents_cli_can_print(
    gateway: RunningGateway,
) -> None:
    await gateway.mew("mia")
    bob = await gateway.agentchat("bob")
    await bob.send({"type": "LIST_AGENTS", "channel": "#general"})
    agents = await bob.expect_type("AGENTS")
    assert agents["channel"] == "#general"
    by_id = {a["id"]: a for a in agents["list"]}
    assert by_id == {
        "@mia": {
            "id": "@mia",
            "name": "mia",
            "verified": False,
            "presence": "online",
            "status_text": None,
        },
        "@bob": {
            "id": "@bob",
            "name": "bob",
            "verified": False,
            "presence": "online",
            "status_text": None,
        },
    }


# ---------------------------------------------------------------------------------------------
# 3. presence
# ---------------------------------------------------------------------------------------------


async def test_set_presence_busy_with_status_text_reaches_both_dialects(
    gateway: RunningGateway,
) -> None:
    mew = await gateway.mew("mew-watcher")
    other = await gateway.agentchat("other")
    bob = await gateway.agentchat("bob")
    await bob.send({"type": "SET_PRESENCE", "status": "busy", "status_text": "reviewing PR 12"})

    changed = await other.next_where(of_type("PRESENCE_CHANGED", agent_id="@bob"))
    assert changed["name"] == "bob" and changed["presence"] == "busy"
    assert changed["status_text"] == "reviewing PR 12"
    update = await mew.next_where(
        lambda f: f.get("kind") == "system/presence" and f["payload"]["event"] == "update"
    )
    person = update["payload"]["participant"]
    assert (person["id"], person["presence"], person["status_text"]) == (
        "bob",
        "busy",
        "reviewing PR 12",
    )

    await bob.send({"type": "LIST_AGENTS", "channel": "#general"})
    agents = await bob.expect_type("AGENTS")
    me = next(a for a in agents["list"] if a["id"] == "@bob")
    assert (me["presence"], me["status_text"]) == ("busy", "reviewing PR 12")
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"{gateway.http}/participants") as resp,
    ):
        people = {p["id"]: p for p in (await resp.json())["participants"]}
    assert (people["bob"]["presence"], people["bob"]["status_text"]) == ("busy", "reviewing PR 12")


@pytest.mark.parametrize("status", ["online", "away", "busy", "listening", "offline"])
async def test_every_agentchat_presence_value_is_accepted(
    gateway: RunningGateway, status: str
) -> None:
    other = await gateway.agentchat("other")
    bob = await gateway.agentchat("bob")
    await bob.send({"type": "SET_PRESENCE", "status": "away" if status == "online" else status})
    await bob.send({"type": "SET_PRESENCE", "status": status})
    changed = await other.next_where(of_type("PRESENCE_CHANGED", agent_id="@bob", status=status))
    assert changed["presence"] == status
    await bob.silent(of_type("ERROR"))


async def test_sleeping_cannot_be_set_and_the_error_lists_the_values(
    gateway: RunningGateway,
) -> None:
    bob = await gateway.agentchat("bob")
    await bob.send({"type": "SET_PRESENCE", "status": "sleeping"})
    err = await bob.expect_type("ERROR")
    assert err["code"] == "INVALID_MSG"
    assert "'busy'" in err["message"] and "@@sleep" in err["message"]


# ---------------------------------------------------------------------------------------------
# 4. floor control frames
# ---------------------------------------------------------------------------------------------


def responding_to(msg: Frame, started_at: int) -> Frame:
    return {
        "type": "RESPONDING_TO",
        "msg_id": msg["msg_id"],
        "channel": "#general",
        "started_at": started_at,
    }


async def test_yield_and_floor_claimed_carry_the_holder(gateway: RunningGateway) -> None:
    human = await gateway.mew("human")
    a = await gateway.agentchat("a1")
    b = await gateway.agentchat("b1")
    await human.send({"kind": "chat", "channel": "#general", "payload": {"text": "who knows?"}})
    q = await a.expect_type("MSG")
    await b.expect_type("MSG")
    t0 = q["ts"]

    await a.send(responding_to(q, t0 + 20))
    claimed = await b.next_where(of_type("FLOOR_CLAIMED", holder="@a1"))
    assert claimed["holder_name"] == "a1" and claimed["agent"] == "@a1"
    assert claimed["msg_id"] == q["msg_id"] and claimed["started_at"] == t0 + 20

    await b.send(responding_to(q, t0 + 10))  # started earlier: b takes the floor from a
    y = await a.expect_type("YIELD")
    assert y["msg_id"] == q["msg_id"] and y["channel"] == "#general"
    assert y["holder"] == "@b1" and y["winner"] == "@b1"
    assert y["holder_started_at"] == t0 + 10
    assert "earlier started_at" in y["reason"]
    claimed = await a.next_where(of_type("FLOOR_CLAIMED", holder="@b1"))
    assert claimed["holder_name"] == "b1"

    await a.send(responding_to(q, t0 + 30))  # later than the holder: yields at once
    y = await a.expect_type("YIELD")
    assert (y["holder"], y["holder_started_at"]) == ("@b1", t0 + 10)
    assert "earlier started_at" in y["reason"]


# ---------------------------------------------------------------------------------------------
# 5. before IDENTIFY, AGENT_JOINED/AGENT_LEFT scope, displacement, extra MSG fields
# ---------------------------------------------------------------------------------------------


async def test_a_frame_before_identify_gets_auth_required_and_identify_still_works(
    gateway: RunningGateway,
) -> None:
    c = await gateway.connect()
    await c.send({"type": "MSG", "to": "#general", "content": "too early"})
    err = await c.recv()
    assert err["type"] == "ERROR" and err["code"] == "AUTH_REQUIRED"
    assert "MSG before IDENTIFY" in err["message"]
    await c.send({"type": "IDENTIFY", "name": "late", "pubkey": None})
    welcome = await c.expect_type("WELCOME")
    assert welcome["agent_id"] == "@late"


async def test_too_many_frames_before_identify_close_the_connection(
    gateway: RunningGateway,
) -> None:
    c = await gateway.connect()
    for _ in range(11):
        await c.send({"type": "JOIN", "channel": "#general"})
    codes = [(await c.expect_type("ERROR"))["code"] for _ in range(11)]
    assert codes == ["AUTH_REQUIRED"] * 11
    await c.ws.wait_closed()
    assert c.ws.close_code == 1008


async def test_agent_joined_skips_the_joiner_and_agent_left_reaches_members_only(
    gateway: RunningGateway,
) -> None:
    creator = await gateway.mew("creator")
    await creator.send({"kind": "channel/create", "payload": {"channel": "#ops"}})
    await creator.expect("channel/joined")
    general_only = await gateway.agentchat("gen", channels=["#general"])
    both = await identify(gateway, "both")  # auto-joins #general and #ops, silently
    got = await general_only.next_where(of_type("AGENT_JOINED", agent="@both"))
    assert got["channel"] == "#general" and got["name"] == "both"
    await general_only.silent(of_type("AGENT_JOINED", agent="@both", channel="#ops"))
    await both.silent(of_type("AGENT_JOINED", agent="@both"))

    await both.close()
    left = await general_only.next_where(of_type("AGENT_LEFT", agent="@both"))
    assert left["channel"] == "#general"
    await general_only.silent(of_type("AGENT_LEFT", channel="#ops"))
    # MEW keeps its space-wide presence events
    await creator.next_where(
        lambda f: f.get("kind") == "system/presence" and f["payload"]["event"] == "leave"
    )


async def test_a_second_connection_displaces_the_first_with_session_displaced(
    team: RunningGateway,
) -> None:
    old = await identify(team, "bot", token="bot-token", space="team")
    new = await identify(team, "bot", token="bot-token", space="team")
    assert new.welcome["agent_id"] == "@bot"
    displaced = await old.expect_type("SESSION_DISPLACED")
    assert "new connection" in displaced["reason"]
    assert "Another connection" in displaced["reason"]  # what agentchat's tests look for
    await old.ws.wait_closed()
    assert old.ws.close_code == 4000


async def test_a_displaced_mew_client_gets_a_system_error(team: RunningGateway) -> None:
    old = await team.mew("boss", space="team", token="boss-token")
    await identify(team, "boss", token="boss-token", space="team")
    err = await old.expect("system/error")
    assert err["payload"]["error"] == "session_displaced"
    # left open, as MEW's gateway does (MEWClient reconnects after any close): refused
    await old.send({"kind": "chat", "payload": {"text": "still here?"}})
    again = await old.expect("system/error")
    assert again["payload"]["error"] == "session_displaced" and old.ws.close_code is None


async def test_extra_msg_fields_like_sig_are_relayed(gateway: RunningGateway) -> None:
    mew = await gateway.mew("mew-reader")
    reader = await gateway.agentchat("reader")
    writer = await gateway.agentchat("writer")
    await writer.send(
        {
            "type": "MSG",
            "to": "#general",
            "content": "signed",
            "ts": 1700000000000,
            "sig": "c2lnbmF0dXJl",
            "from": "@someone-else",
            "verified": True,
        }
    )
    got = await reader.next_where(of_type("MSG", content="signed"))
    assert got["sig"] == "c2lnbmF0dXJl"
    assert got["from"] == "@writer" and got["verified"] is False and got["ts"] != 1700000000000
    seen = await mew.expect("chat")
    assert seen["payload"] == {"text": "signed", "sig": "c2lnbmF0dXJl"}

    await writer.send(
        {"type": "MSG", "to": "#general", "content": "re", "in_reply_to": got["msg_id"]}
    )
    reply = await reader.next_where(of_type("MSG", content="re"))
    assert reply["in_reply_to"] == got["msg_id"]
    assert (await mew.expect("chat"))["correlation_id"] == [got["msg_id"]]


# ---------------------------------------------------------------------------------------------
# 6. marketplace frames, 7. errors in this dialect's words
# ---------------------------------------------------------------------------------------------

MARKETPLACE: list[Frame] = [
    {"type": "PROPOSAL", "to": "@bob", "task": "review", "sig": "x"},
    {"type": "ACCEPT", "proposal_id": "prop_1", "sig": "x"},
    {"type": "REJECT", "proposal_id": "prop_1", "sig": "x"},
    {"type": "COMPLETE", "proposal_id": "prop_1", "sig": "x"},
    {"type": "DISPUTE", "proposal_id": "prop_1", "reason": "late", "sig": "x"},
    {"type": "DISPUTE_INTENT", "proposal_id": "prop_1", "reason": "r", "commitment": "c"},
    {"type": "ARBITER_VOTE", "dispute_id": "d", "verdict": "v", "reasoning": "r", "sig": "x"},
    {"type": "REGISTER_SKILLS", "skills": [], "sig": "x"},
    {"type": "SEARCH_SKILLS", "query": {}},
    {"type": "FILE_CHUNK", "to": "@bob", "content": "chunk"},
]


@pytest.mark.parametrize("frame", [pytest.param(f, id=f["type"]) for f in MARKETPLACE])
async def test_marketplace_frames_are_answered_unsupported(
    gateway: RunningGateway, frame: Frame
) -> None:
    bob = await gateway.agentchat("bob")
    await bob.send(frame)
    err = await bob.expect_type("ERROR")
    assert err["code"] == "UNSUPPORTED", err
    assert err["message"].startswith(f"{frame['type']} is not supported")
    await bob.send({"type": "MSG", "to": "#general", "content": "still here"})
    await bob.next_where(of_type("MSG", content="still here"))


async def test_errors_name_this_dialects_frames(gateway: RunningGateway) -> None:
    creator = await gateway.mew("creator")
    await creator.send({"kind": "channel/create", "payload": {"channel": "#ops"}})
    await creator.expect("channel/joined")
    bob = await gateway.agentchat("bob", channels=["#general"])

    await bob.send({"type": "MSG", "to": "#ops", "content": "sneak"})
    err = await bob.expect_type("ERROR")
    assert err["code"] == "NOT_IN_CHANNEL"
    assert "send JOIN first" in err["message"] and "channel/" not in err["message"]

    await bob.send({"type": "MSG", "to": "#nowhere", "content": "hi"})
    err = await bob.expect_type("ERROR")
    assert err["code"] == "CHANNEL_NOT_FOUND" and "CREATE_CHANNEL" in err["message"]


async def test_capability_errors_name_the_frame(team: RunningGateway) -> None:
    bot = await identify(team, "bot", token="bot-token", space="team")
    await bot.send({"type": "CREATE_CHANNEL", "channel": "#new"})
    err = await bot.expect_type("ERROR")
    assert err["code"] == "CAPABILITY_VIOLATION"
    assert "CREATE_CHANNEL" in err["message"] and "channel/" not in err["message"]


# ---------------------------------------------------------------------------------------------
# the space.yaml setting
# ---------------------------------------------------------------------------------------------


def test_agentchat_auto_join_is_read_and_checked_from_space_yaml(tmp_path: Path) -> None:
    cfg = tmp_path / "space.yaml"
    cfg.write_text('space: team\nchannels: ["#ops"]\nagentchat_auto_join: ["#ops"]\n')
    assert load_space(cfg).agentchat_auto_join == ["#ops"]
    cfg.write_text("space: team\nagentchat_auto_join: [ops]\n")
    with pytest.raises(ConfigError, match="agentchat_auto_join: 'ops' is not a channel name"):
        load_space(cfg)
    many = ", ".join(f'"#c{i}"' for i in range(AUTO_JOIN_MAX + 1))
    cfg.write_text(f"space: team\nagentchat_auto_join: [{many}]\n")
    with pytest.raises(ConfigError, match=f"more than {AUTO_JOIN_MAX} channels"):
        load_space(cfg)
