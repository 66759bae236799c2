"""Ids and channel names that differ only by case or by look-alike characters from an existing
one are refused, naming the existing one (issue 21 item 15); a limit turns it off."""

from __future__ import annotations

from pathlib import Path

import aiohttp
import pytest

from hubbub.server.admission.names import LookAlikes, looks_like
from hubbub.server.config import Limits
from tests.conftest import RunningGateway, start_gateway, stop_gateway


@pytest.mark.parametrize(
    ("new", "old"),
    [("Alice", "alice"), ("ALICE", "alice"), ("aIice", "alice"), ("a1ice", "alice"),
     ("b0b", "bob"), ("B0B", "bob"), ("#General", "#general"), ("#genera1", "#general"),
     ("#GENERAL", "#general")],
)  # fmt: skip
def test_case_and_look_alike_variants_clash(new: str, old: str) -> None:
    assert looks_like(new, old) and looks_like(old, new)
    names = LookAlikes()
    names.add(old)
    assert names.clash(new) == old
    assert names.clash(old) is None  # the name itself is not a clash


@pytest.mark.parametrize(("a", "b"), [("bill", "bili"), ("alice", "alicia"), ("ann", "anm")])
def test_different_names_do_not_clash(a: str, b: str) -> None:
    assert not looks_like(a, b)


async def test_a_case_variant_of_a_known_id_is_refused_naming_it(gw: RunningGateway) -> None:
    await gw.mew("alice")
    for name in ("Alice", "aIice"):
        c = await gw.connect()
        await c.send({"type": "join", "participantId": name})
        err = await c.expect("system/error")
        message = err["payload"]["message"]
        assert err["payload"]["error"] == "invalid_id"
        assert f"{name!r} looks like 'alice'" in message and "pick another id" in message
    agentchat = await gw.connect()
    await agentchat.send({"type": "IDENTIFY", "name": "ALICE"})
    err = await agentchat.expect_type("ERROR")
    assert "looks like 'alice'" in err["message"]
    async with (
        aiohttp.ClientSession() as http,
        http.post(
            f"{gw.http}/participants/Alice/messages",
            json={"kind": "chat", "payload": {"text": "hi"}},
        ) as resp,
    ):
        assert resp.status == 400
        assert "looks like 'alice'" in (await resp.json())["message"]
    await gw.mew("alice")  # the same id again is of course fine


async def test_a_look_alike_channel_is_refused_naming_the_existing_one(gw: RunningGateway) -> None:
    alice = await gw.mew("alice")
    for name in ("#General", "#genera1"):
        await alice.send({"kind": "channel/create", "id": name[1:], "payload": {"channel": name}})
        err = await alice.expect("system/error")
        assert err["payload"]["error"] == "channel_exists"
        assert f"{name} looks like the existing channel #general" in err["payload"]["message"]


async def test_the_limit_allows_look_alikes(tmp_path: Path) -> None:
    gw = await start_gateway(tmp_path, limits=Limits(allow_lookalike_names=True))
    try:
        await gw.mew("alice")
        await gw.mew("Alice")
        alice = await gw.mew("alice")
        await alice.send({"kind": "channel/create", "payload": {"channel": "#General"}})
        await alice.expect("channel/joined")
    finally:
        await stop_gateway(gw)
