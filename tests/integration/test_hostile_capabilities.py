"""Hostile capabilities (issue 21, items 1, 11 and 18), over real sockets and SQLite.

A capability pattern comes from a participant (an open-mode join asks for its own, a grant
carries some), and a value it is matched against comes from a participant too: neither may
make one frame cost the gateway more than a bounded slice of CPU, nor make presence traffic
grow with the size of someone's capability list.

The matching attacks below took minutes to hours before the glob matcher was made linear (a
backtracking ``re`` translation): such a test fails on its time limit, not on a timed
assertion; now each frame takes milliseconds.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from hubbub.protocol.capabilities import BASELINE
from hubbub.server.config import ParticipantConfig, SpaceConfig, hash_token
from tests.conftest import RunningGateway, WsClient, start_gateway, stop_gateway

SEARCH_ONLY = [
    {"kind": "mcp/request", "payload": {"params": {"name": "*search*"}}},
    {"kind": "channel/join"},
]


def token_space() -> SpaceConfig:
    """A token-mode space: ``finder`` may only call tools named like ``*search*``."""
    cfg = SpaceConfig(
        space="team",
        participants={
            "boss": ParticipantConfig(kind="human", role="admin", token_hash=hash_token("b")),
            "finder": ParticipantConfig(token_hash=hash_token("f"), capabilities=SEARCH_ONLY),
            "person": ParticipantConfig(kind="human", token_hash=hash_token("p")),
        },
    )
    cfg.validate()
    return cfg


@pytest.fixture
async def team(tmp_path: Path) -> AsyncIterator[RunningGateway]:
    gw = await start_gateway(tmp_path, spaces=[token_space()])
    yield gw
    await stop_gateway(gw)


async def health(gw: RunningGateway) -> int:
    async with aiohttp.ClientSession() as http, http.get(f"{gw.http}/health") as resp:
        return resp.status


async def refused(c: WsClient, frame: dict[str, Any]) -> dict[str, Any]:
    """Send ``frame`` and return the ``system/error`` payload that answers it."""
    await c.send(frame)
    payload: dict[str, Any] = (await c.expect("system/error", timeout=30))["payload"]
    return payload


# ------------------------------------------------------------------ item 1: matching cost


@pytest.mark.timeout(60)
async def test_a_cubic_glob_in_an_open_mode_join_does_not_stall_the_gateway(
    gateway: RunningGateway,
) -> None:
    glob = [{"kind": "chat", "payload": {"text": "*a*a*b"}}, {"kind": "channel/join"}]
    attacker = await gateway.mew("mallory", capabilities=glob)
    assert attacker.welcome["payload"]["you"]["capabilities"] == [*glob, *BASELINE]
    listener = await gateway.mew("listener")
    for size in (4 * 1024, 60 * 1024):  # 4 KB: 6.9 s with the old matcher; 60 KB: hours
        err = await refused(attacker, {"kind": "chat", "payload": {"text": "a" * size}})
        assert err["error"] == "capability_violation"
    await attacker.send({"kind": "chat", "payload": {"text": "a" * 60 * 1024 + "b"}})
    assert len((await listener.expect("chat"))["payload"]["text"]) == 60 * 1024 + 1
    assert await health(gateway) == 200


@pytest.mark.timeout(30)  # the old matcher: 45 s; now well under one
async def test_a_long_tool_name_against_a_search_glob_costs_milliseconds(
    team: RunningGateway,
) -> None:
    finder = await team.mew("finder", space="team", token="f")
    boss = await team.mew("boss", space="team", token="b")
    name = "search" * 10_000 + "/"  # 60 KB: quadratic for the old matcher, 1-1.5 s a frame
    for _ in range(15):
        err = await refused(
            finder,
            {"kind": "mcp/request", "to": ["boss"], "payload": {"params": {"name": name}}},
        )
        assert err["error"] == "capability_violation"
    assert await health(team) == 200
    await finder.send(
        {"kind": "mcp/request", "to": ["boss"], "payload": {"params": {"name": name[:-1]}}}
    )
    assert (await boss.expect("mcp/request"))["from"] == "finder"


async def test_capability_matching_past_its_budget_is_refused_with_a_reason(
    gateway: RunningGateway,
) -> None:
    # 200 regexes that never finish (exponential backtracking): 5 ms each would be a second
    runaway = [f"/(a|aa)+{i}$/" for i in range(200)]
    caps = [{"kind": "chat", "payload": {"text": runaway}}, {"kind": "channel/join"}]
    attacker = await gateway.mew("mallory", capabilities=caps)
    err = await refused(attacker, {"kind": "chat", "payload": {"text": "a" * 40 + "!"}})
    assert err["error"] == "capability_violation"
    assert "ms" in err["message"] and "budget" in err["message"]
    assert await health(gateway) == 200


async def test_too_many_patterns_in_a_join_are_refused_naming_the_limit(
    gateway: RunningGateway,
) -> None:
    c = await gateway.connect()
    thousand = [{"kind": "chat", "payload": {"text": [f"/^{i}$/" for i in range(1000)]}}]
    await c.send({"type": "join", "participantId": "mallory", "space": "default",
                  "capabilities": thousand})  # fmt: skip
    err = (await c.expect("system/error"))["payload"]
    assert err["error"] == "invalid_envelope"
    assert "1001 string patterns" in err["message"] and "MAX_PATTERNS" in err["message"]


@pytest.mark.timeout(60)
async def test_a_regex_that_takes_forever_to_compile_is_refused_before_compiling(
    gateway: RunningGateway,
) -> None:
    c = await gateway.connect()
    bomb = [{"kind": "chat", "payload": {"text": "/(a{60000}){60000}/"}}]
    await c.send({"type": "join", "participantId": "mallory", "space": "default",
                  "capabilities": bomb})  # fmt: skip
    err = (await c.expect("system/error"))["payload"]
    assert err["error"] == "invalid_envelope" and "MAX_REGEX_REPEATS" in err["message"]
    assert await health(gateway) == 200


async def test_a_long_pattern_is_refused_naming_the_limit(gateway: RunningGateway) -> None:
    c = await gateway.connect()
    long_glob = [{"kind": "chat", "payload": {"text": "*a" * 2000}}]
    await c.send({"type": "join", "participantId": "mallory", "space": "default",
                  "capabilities": long_glob})  # fmt: skip
    err = (await c.expect("system/error"))["payload"]
    assert err["error"] == "invalid_envelope" and "MAX_PATTERN_CHARS" in err["message"]


# ------------------------------------------------------------------ item 18: no-op revokes


async def test_a_revoke_that_removes_nothing_says_so_and_changes_nothing(
    team: RunningGateway,
) -> None:
    boss = await team.mew("boss", space="team", token="b")
    person = await team.mew("person", space="team", token="p")
    held = person.welcome["payload"]["you"]["capabilities"]
    assert {"kind": "!capability/*"} in held  # a human may send anything by default
    revoke = {"recipient": "person", "capabilities": [{"kind": "**"}]}
    err = await refused(boss, {"kind": "capability/revoke", "payload": revoke})
    assert err["error"] == "nothing_revoked"
    assert "removes nothing" in err["message"] and '{"kind":"!capability/*"}' in err["message"]
    assert err["removes_nothing"] == [{"kind": "**"}]
    assert err["recipient_capabilities"] == held
    await person.silent(lambda f: f.get("kind") == "capability/revoke")
    await person.send({"kind": "chat", "payload": {"text": "still here"}})
    assert (await boss.expect("chat"))["payload"]["text"] == "still here"
    # what it does hold is revoked as before, and a second revoke of it says so too
    revoke = {"recipient": "person", "capabilities": [{"kind": "!capability/*"}]}
    await boss.send({"kind": "capability/revoke", "payload": revoke})
    assert (await person.expect("capability/revoke"))["from"] == "boss"
    err = await refused(boss, {"kind": "capability/revoke", "payload": revoke})
    assert err["error"] == "nothing_revoked"


async def test_revoking_a_held_everything_removes_it(team: RunningGateway) -> None:
    boss = await team.mew("boss", space="team", token="b")
    finder = await team.mew("finder", space="team", token="f")
    grant = {"recipient": "finder", "capabilities": [{"kind": "**"}]}
    await boss.send({"kind": "capability/grant", "payload": grant})
    await finder.expect("capability/grant")
    await finder.send({"kind": "chat", "payload": {"text": "allowed now"}})
    assert (await boss.expect("chat"))["payload"]["text"] == "allowed now"
    await boss.send({"kind": "capability/revoke", "payload": grant})
    await finder.expect("capability/revoke")
    err = await refused(finder, {"kind": "chat", "payload": {"text": "x"}})
    assert err["error"] == "capability_violation"


# ------------------------------------------------------------------ item 11: amplification


def _presence_of(frame: dict[str, Any], pid: str, event: str) -> dict[str, Any] | None:
    p = frame.get("payload", {})
    if frame.get("kind") != "system/presence" or p.get("event") != event or "channel" in p:
        return None
    entries = p.get("participants") or [p["participant"]]
    return next((e for e in entries if e.get("id") == pid), None)


async def _next_presence(c: WsClient, pid: str, event: str) -> tuple[dict[str, Any], int]:
    """The next space-wide presence ``event`` of ``pid`` seen by ``c``, and its frame's size."""
    while True:
        raw = await c.ws.recv()
        frame = json.loads(raw)
        entry = _presence_of(frame, pid, event)
        if entry is not None:
            return entry, len(raw)


async def test_a_join_asking_for_thousands_of_capabilities_is_refused_naming_the_limit(
    gateway: RunningGateway,
) -> None:
    c = await gateway.connect()
    many = [{"kind": f"x/{i:04}", "payload": {"a": "b"}} for i in range(6000)]  # ~290 KB
    await c.send({"type": "join", "participantId": "mallory", "space": "default",
                  "capabilities": many})  # fmt: skip
    err = (await c.expect("system/error"))["payload"]
    assert err["error"] == "invalid_envelope"
    assert "6000 entries" in err["message"] and "MAX_CAPABILITIES" in err["message"]


@pytest.fixture
async def granting(tmp_path: Path) -> AsyncIterator[RunningGateway]:
    """An open space where participants may grant (within their own capabilities)."""
    cfg = SpaceConfig(open=True, grant_roles=["admin", "participant"])
    cfg.validate()
    gw = await start_gateway(tmp_path, spaces=[cfg])
    yield gw
    await stop_gateway(gw)


async def test_presence_carries_a_capability_list_once_then_its_digest(
    granting: RunningGateway,
) -> None:
    gateway = granting
    many = [{"kind": f"x/{i:03}", "payload": {"pad": "p" * 80}} for i in range(100)]
    many.append({"kind": "channel/join"})
    listener = await gateway.mew("listener")
    p = await gateway.mew("mallory", capabilities=many)
    first, first_size = await _next_presence(listener, "mallory", "join")
    held = [*many, *BASELINE]  # everyone may answer (MEW's mcp/response baseline)
    assert first["capabilities"] == held and first_size > 10_000
    digest = first["capabilities_digest"]
    for _ in range(5):  # reconnects: each presence is small and names the same list
        await p.close()
        left, left_size = await _next_presence(listener, "mallory", "leave")
        assert "capabilities" not in left and left_size < 1000
        p = await gateway.mew("mallory", capabilities=many)
        again, size = await _next_presence(listener, "mallory", "join")
        assert "capabilities" not in again and again["capabilities_digest"] == digest
        assert size < 1000
    # someone who connects while mallory is away has not seen the list: the next join sends it
    await p.close()
    late = await gateway.mew("late")
    p = await gateway.mew("mallory", capabilities=many)
    seen, _ = await _next_presence(late, "mallory", "join")
    assert seen["capabilities"] == held and seen["capabilities_digest"] == digest
    # a changed list is announced in full
    boss = await gateway.mew("boss")
    grant = {"recipient": "mallory", "capabilities": [{"kind": "chat"}]}
    await boss.send({"kind": "capability/grant", "payload": grant})
    updated, _ = await _next_presence(listener, "mallory", "update")
    assert updated["capabilities"] == [*held, {"kind": "chat"}]
    assert updated["capabilities_digest"] != digest


async def test_grants_cannot_grow_a_list_past_the_limit(team: RunningGateway) -> None:
    boss = await team.mew("boss", space="team", token="b")
    many = [{"kind": f"tool/{i:03}"} for i in range(127)]  # finder holds 2 + the baseline
    grant = {"recipient": "finder", "capabilities": many}
    err = await refused(boss, {"kind": "capability/grant", "payload": grant})
    assert err["error"] == "invalid_envelope"
    assert "130 entries" in err["message"] and "MAX_CAPABILITIES" in err["message"]
    finder = await team.mew("finder", space="team", token="f")
    assert finder.welcome["payload"]["you"]["capabilities"] == [
        *SEARCH_ONLY,
        *BASELINE,
    ]  # as before
