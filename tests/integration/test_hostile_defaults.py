"""Hostile use of the default capabilities (hostile input, round three: items 2, 3 and 8),
over real sockets and SQLite.

A token space where nobody was given capabilities: agents ``mallory`` and ``worker``, humans
``eve`` and ``carol`` get the defaults of their kind; ``boss`` is an admin.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from hubbub.sdk import Participant
from hubbub.server.config import ParticipantConfig, SpaceConfig, hash_token
from tests.conftest import RunningGateway, WsClient, start_gateway, stop_gateway
from tests.engines_live.conftest import start_engine_gateway

SPACE = "team"
CONTROLS = ("participant/shutdown", "participant/clear", "participant/restart", "participant/pause")


def _space() -> SpaceConfig:
    people = {
        "boss": ParticipantConfig(kind="human", role="admin"),
        "mallory": ParticipantConfig(kind="agent"),
        "worker": ParticipantConfig(kind="agent"),
        "eve": ParticipantConfig(kind="human"),
        "carol": ParticipantConfig(kind="human"),
        "ops": ParticipantConfig(
            kind="agent", capabilities=[{"kind": "chat"}, {"kind": "participant/*"}]
        ),
        "lead": ParticipantConfig(
            kind="human",
            capabilities=[{"kind": ["chat", "mcp/response", "space/invite"]}],
        ),
    }
    for pid, p in people.items():
        p.token_hash = hash_token(f"{pid}-token")
    cfg = SpaceConfig(space=SPACE, participants=people)
    cfg.validate()
    return cfg


@pytest.fixture
async def team(tmp_path: Path) -> AsyncIterator[RunningGateway]:
    gw = await start_gateway(tmp_path, spaces=[_space()])
    yield gw
    await stop_gateway(gw)


async def _join(gw: RunningGateway, pid: str, token: str | None = None) -> WsClient:
    return await gw.mew(pid, space=SPACE, token=token or f"{pid}-token")


async def _refused(c: WsClient, frame: dict[str, Any]) -> dict[str, Any]:
    """Send ``frame``; the payload of the ``system/error`` that answers it."""
    await c.send(frame)
    payload: dict[str, Any] = (await c.expect("system/error"))["payload"]
    return payload


def _control(kind: str, to: list[str] | None) -> dict[str, Any]:
    frame: dict[str, Any] = {"kind": kind, "payload": {"reason": "because"}}
    if to is not None:
        frame["to"] = to
    return frame


# ------------------------------------------------------------------ item 2: participant control


@pytest.mark.parametrize("attacker", ["mallory", "eve"])
async def test_defaults_do_not_let_one_participant_control_another(
    team: RunningGateway, attacker: str
) -> None:
    bad = await _join(team, attacker)
    worker = await _join(team, "worker")
    for kind in CONTROLS:
        for to in (["worker"], None, [attacker, "worker"]):  # to it, to everyone, both
            err = await _refused(bad, _control(kind, to))
            assert err["error"] == "capability_violation", err
            assert err["attempted_kind"] == kind
            assert f"{{kind: {kind}}}" in err["message"] and "admin" in err["message"]
    await worker.silent(lambda f: str(f.get("kind", "")).startswith("participant/"))
    # what agents and people do send about themselves still goes through
    await worker.send({"kind": "participant/status", "payload": {"status": "idle"}})
    assert (await bad.expect("participant/status"))["from"] == "worker"
    await bad.send({"kind": "participant/request-status", "to": ["worker"], "payload": {}})
    assert (await worker.expect("participant/request-status"))["from"] == attacker


async def test_a_human_may_still_address_a_control_kind_to_itself(team: RunningGateway) -> None:
    eve = await _join(team, "eve")
    await eve.send(_control("participant/pause", ["eve"]))
    echo = await eve.expect("participant/pause")
    assert echo["from"] == "eve" and echo["to"] == ["eve"]


async def test_an_admin_or_an_explicit_grant_may_control_others(team: RunningGateway) -> None:
    worker = await _join(team, "worker")
    boss = await _join(team, "boss")
    ops = await _join(team, "ops")
    for sender in (boss, ops):
        await sender.send(_control("participant/shutdown", ["worker"]))
        got = await worker.expect("participant/shutdown")
        assert got["payload"]["reason"] == "because"
    # granted at run time: an admin gives mallory exactly that kind
    mallory = await _join(team, "mallory")
    err = await _refused(mallory, _control("participant/clear", ["worker"]))
    assert err["error"] == "capability_violation"
    grant = {"recipient": "mallory", "capabilities": [{"kind": "participant/clear"}]}
    await boss.send({"kind": "capability/grant", "payload": grant})
    await mallory.expect("capability/grant")
    await mallory.send(_control("participant/clear", ["worker"]))
    assert (await worker.expect("participant/clear"))["from"] == "mallory"


async def test_a_control_kind_over_http_is_refused_alike(team: RunningGateway) -> None:
    worker = await _join(team, "worker")
    async with (
        aiohttp.ClientSession() as http,
        http.post(
            f"{team.http}/participants/mallory/messages",
            json=_control("participant/shutdown", ["worker"]),
            headers={"Authorization": "Bearer mallory-token"},
        ) as resp,
    ):
        body = await resp.json()
    assert resp.status == 403, body
    assert body["error"] == "capability_violation"
    await worker.silent(lambda f: f.get("kind") == "participant/shutdown")


# ------------------------------------------------------------------ item 3: invites


async def _invite(c: WsClient, pid: str, caps: list[dict[str, Any]] | None) -> dict[str, Any]:
    """Send ``space/invite``; the ``space/invite-ack`` payload, or the refusal's."""
    payload: dict[str, Any] = {"participant_id": pid}
    if caps is not None:
        payload["initial_capabilities"] = caps
    await c.send({"kind": "space/invite", "payload": payload})
    answer = await c.next_where(lambda f: f.get("kind") in ("space/invite-ack", "system/error"))
    out: dict[str, Any] = answer["payload"]
    return out


async def test_a_human_with_the_defaults_may_not_invite(team: RunningGateway) -> None:
    eve = await _join(team, "eve")
    err = await _invite(eve, "puppet", [{"kind": "**"}])
    assert err["error"] == "capability_violation" and err["attempted_kind"] == "space/invite"
    assert "{kind: space/invite}" in err["message"]
    assert "puppet" not in team.router.spaces[SPACE].known
    async with (
        aiohttp.ClientSession() as http,
        http.post(
            f"{team.http}/participants/eve/messages",
            json={"kind": "space/invite", "payload": {"participant_id": "puppet"}},
            headers={"Authorization": "Bearer eve-token"},
        ) as resp,
    ):
        assert resp.status == 403 and (await resp.json())["error"] == "capability_violation"
    mallory = await _join(team, "mallory")  # agents never had it
    err = await _invite(mallory, "puppet", [{"kind": "chat"}])
    assert err["error"] == "capability_violation"


async def test_an_invitee_never_gets_more_than_its_inviter(team: RunningGateway) -> None:
    lead = await _join(team, "lead")  # holds chat, mcp/response and space/invite
    err = await _invite(lead, "puppet", [{"kind": "**"}])
    assert err["error"] == "capability_violation"
    assert '{"kind":"**"}' in err["message"] and "inviter" in err["message"]
    err = await _invite(lead, "puppet", None)  # the agent defaults: far more than lead holds
    assert err["error"] == "capability_violation" and "initial_capabilities" in err["message"]
    assert "puppet" not in team.router.spaces[SPACE].known
    ack = await _invite(lead, "puppet", [{"kind": "chat"}])
    assert ack["status"] == "created"
    puppet = await _join(team, "puppet", ack["token"])
    assert {"kind": "chat"} in puppet.welcome["payload"]["you"]["capabilities"]
    boss = await _join(team, "boss")  # an admin holds ** and may hand it out
    assert (await _invite(boss, "helper", [{"kind": "**"}]))["status"] == "created"


async def test_a_ban_takes_the_inviters_invitees_with_it(tmp_path: Path) -> None:
    gw = await start_gateway(tmp_path, spaces=[_space()])
    try:
        lead = await _join(gw, "lead")
        used = await _invite(lead, "puppet", [{"kind": ["chat", "space/invite"]}])
        puppet = await _join(gw, "puppet", used["token"])
        unused = await _invite(puppet, "puppet2", [{"kind": "chat"}])  # an invite's invite
        spare = await _invite(lead, "spare", [{"kind": "chat"}])  # never used
        carol = await _join(gw, "carol")
        boss = await _join(gw, "boss")
        await boss.send({"kind": "admin/ban", "payload": {"participant": "lead"}})
        result = (await boss.expect("admin/result"))["payload"]
        assert result["banned"] and sorted(result["invitees_banned"]) == [
            "puppet",
            "puppet2",
            "spare",
        ]
        kicked = await puppet.expect("system/kicked")
        assert kicked["payload"]["banned"] and "lead" in kicked["payload"]["reason"]
        await carol.send({"kind": "chat", "payload": {"text": "still fine"}})
        assert (await boss.expect("chat"))["payload"]["text"] == "still fine"
    finally:
        await stop_gateway(gw)
    gw = await start_gateway(tmp_path, spaces=[_space()])  # the same store: a restart
    try:
        for pid, token in (("puppet", used), ("puppet2", unused), ("spare", spare)):
            c = await gw.connect()
            await c.send({"type": "join", "participantId": pid, "space": SPACE,
                          "token": token["token"]})  # fmt: skip
            err = (await c.expect("system/error"))["payload"]
            assert err["error"] in ("banned", "auth_failed"), err
        boss = await _join(gw, "boss")  # an unban of the inviter does not revive them
        await boss.send({"kind": "admin/unban", "payload": {"participant": "lead"}})
        await boss.expect("admin/result")
        c = await gw.connect()
        await c.send({"type": "join", "participantId": "spare", "space": SPACE,
                      "token": spare["token"]})  # fmt: skip
        assert (await c.expect("system/error"))["payload"]["error"] in ("banned", "auth_failed")
    finally:
        await stop_gateway(gw)


# ------------------------------------------------------------------ item 8: huge durations

HUGE = "1" + "0" * 300  # 1e300 seconds, in the digits a marker takes
ENDLESS = "9" * 400  # reads as infinity


async def test_huge_durations_are_clamped_at_every_door(tmp_path: Path) -> None:
    gw = await start_engine_gateway(tmp_path, cb_max_duration_s=60)
    try:
        a = await gw.mew("agent-a")
        assert a.welcome["payload"]["max_duration_s"] == 60
        text = f"@@cb:{HUGE}s@@mew @@cb:{ENDLESS}s@@inf"
        await a.send({"kind": "chat", "payload": {"text": text}})
        await gw.synced(a)
        async with (
            aiohttp.ClientSession() as http,
            http.post(
                f"{gw.http}/participants/agent-a/messages",
                json={"kind": "chat", "payload": {"text": f"@@cb:{HUGE}s@@http"}},
            ) as resp,
        ):
            assert resp.status == 202 and "errors" not in await resp.json()
        bot = await gw.agentchat("bot")
        await bot.send({"type": "MSG", "to": "#general", "content": f"@@sleep:{ENDLESS}s@@"})
        await bot.send({"type": "LIST_CHANNELS"})
        await bot.expect_type("CHANNELS")  # the sleep was read before this answer
        await gw.settle()  # and applied once its (empty) delivery committed
        engines = gw.router.coordination.spaces["default"]
        now = gw.clock()
        pending = engines.callbacks.pending("agent-a")
        assert sorted(cb.payload for cb in pending) == ["http", "inf", "mew "]
        assert all(now < cb.due_ms <= now + 60_000 for cb in pending)
        entry = engines.sleep.entry("bot")
        assert entry is not None and now < entry.wake_at <= now + 60_000
        gw.tick(61)
        fired = {(await a.expect("chat"))["payload"]["text"] for _ in range(3)}
        assert fired == {"@@cb-fire@@mew ", "@@cb-fire@@inf", "@@cb-fire@@http"}
        wake = await bot.expect_type("MSG")
        assert wake["content"] == "@@wake@@"
    finally:
        await stop_gateway(gw)


async def test_the_sdk_clamps_to_the_gateways_longest_and_refuses_nan(tmp_path: Path) -> None:
    gw = await start_engine_gateway(tmp_path, cb_max_duration_s=60)
    try:
        async with Participant(gateway=gw.url, participant_id="sdk") as p:
            assert p.max_duration_s == 60
            sent = await p.schedule_callback(1e300, "later")
            assert sent.payload["text"] == "@@cb:60s@@later"
            slept = await p.sleep(float("inf"))
            assert slept.payload["text"] == "@@sleep:60s@@"
            for bad, why in ((float("nan"), "number of seconds"), (-1, "0 seconds or more")):
                with pytest.raises(ValueError, match=why):
                    await p.schedule_callback(bad, "x")
                with pytest.raises(ValueError, match=why):
                    await p.sleep(bad)
    finally:
        await stop_gateway(gw)
