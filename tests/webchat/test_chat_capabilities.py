"""The chat offers a person only what its capabilities allow, and follows grants and revokes.

A token space with people of different capabilities, each in a Chromium context of their own;
an admin grants and revokes over a real WebSocket while the pages stay open (no reload).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import Page, expect

from hubbub.server.config import Limits, ParticipantConfig, SpaceConfig, hash_token
from tests.conftest import RunningGateway, WsClient, start_gateway, stop_gateway
from tests.webchat.conftest import GATEWAY_DOWN, OpenPage

GUEST_CAPS: list[dict[str, Any]] = [
    {"kind": "chat"},
    {"kind": "channel/join", "payload": {"channel": "!#secret"}},
    {"kind": ["channel/leave", "channel/list", "history/request", "system/heartbeat"]},
]
"""A guest: writes, joins every channel but #secret; may not create channels nor act on
proposals (no mcp/request, no mcp/reject)."""


def _space(guest_caps: list[dict[str, Any]] = GUEST_CAPS) -> SpaceConfig:
    people = {
        "boss": ParticipantConfig(kind="human", role="admin"),  # may grant: everything
        "guest": ParticipantConfig(kind="human", capabilities=guest_caps),
        "host": ParticipantConfig(kind="human"),  # a human's defaults: all but capability/*
        "bot": ParticipantConfig(kind="agent"),  # an agent's defaults: mcp/* (it proposes)
        "calc": ParticipantConfig(kind="service"),
    }
    for pid, p in people.items():
        p.token_hash = hash_token(f"{pid}-token")
    cfg = SpaceConfig(space="team", channels=["#general", "#secret"], participants=people)
    cfg.validate()
    return cfg


@pytest.fixture
async def tgw(tmp_path: Path) -> AsyncIterator[RunningGateway]:
    """The token space ``team`` (see :func:`_space`)."""
    gw = await start_gateway(tmp_path, spaces=[_space()], limits=Limits(rate_per_s=0))
    yield gw
    await stop_gateway(gw)


async def _signed_in(pages: OpenPage, gw: RunningGateway, pid: str, **options: Any) -> Page:
    page = await pages(f"{gw.http}/chat?token={pid}-token", **options)
    await expect(page.locator("#conn")).to_have_attribute("data-state", "live")
    await expect(page.locator("#me")).to_have_text(pid)
    await expect(page.locator("#conv-title")).to_have_text("#general")
    return page


async def _member(gw: RunningGateway, pid: str) -> WsClient:
    return await gw.mew(pid, space="team", token=f"{pid}-token")


async def _change(boss: WsClient, kind: str, caps: list[dict[str, Any]]) -> None:
    await boss.send({"kind": kind, "payload": {"recipient": "guest", "capabilities": caps}})
    await boss.next_where(lambda f: f.get("kind") == kind and f.get("from") == "boss")


async def test_create_and_join_are_offered_as_capabilities_allow(
    tgw: RunningGateway, pages: OpenPage
) -> None:
    guest = await _signed_in(pages, tgw, "guest")
    host = await _signed_in(pages, tgw, "host")
    for page in (guest, host):
        await page.locator("#browse summary").click()
    # the host may create channels: the form, no explanation
    await expect(host.locator("#create-form")).to_be_visible()
    await expect(host.locator("#create-denied")).to_be_hidden()
    await expect(
        host.locator('#other-channels button.join[data-channel="#secret"]')
    ).to_be_visible()
    # the guest may not: no form, and the page says why
    await expect(guest.locator("#create-form")).to_be_hidden()
    await expect(guest.locator("#create-denied")).to_have_text(
        "You cannot create channels: your capabilities do not include channel/create."
    )
    secret = guest.locator('#other-channels [data-channel="#secret"]')
    await expect(secret).to_have_text(
        "you may not join: your capabilities do not include channel/join for #secret"
    )
    await expect(guest.locator("#other-channels button.join")).to_have_count(0)

    # an admin grants channel/create for #guest-* names: the form appears, no reload
    boss = await _member(tgw, "boss")
    await _change(
        boss, "capability/grant", [{"kind": "channel/create", "payload": {"channel": "#guest-*"}}]
    )
    await expect(guest.locator("#create-form")).to_be_visible()
    await expect(guest.locator("#create-denied")).to_be_hidden()
    name = guest.locator("#create-input")
    await name.fill("ideas")  # not a name the grant allows: Create is disabled, and says why
    create = guest.locator("#create-btn")
    await expect(create).to_be_disabled()
    why = "You cannot create #ideas: your capabilities do not include channel/create for #ideas."
    await expect(guest.locator("#create-denied")).to_have_text(why)
    await expect(create).to_have_attribute("title", why)
    await expect(create).to_have_attribute("aria-describedby", "create-denied")
    await name.fill("guest-room")
    await expect(create).to_be_enabled()
    await name.press("Enter")
    await expect(guest.locator("#conv-title")).to_have_text("#guest-room")

    # revoked: the form goes again
    await _change(boss, "capability/revoke", [{"kind": "channel/create"}])
    await expect(guest.locator("#create-form")).to_be_hidden()
    await expect(guest.locator("#create-denied")).to_contain_text(
        "your capabilities do not include channel/create"
    )


async def test_leaving_and_writing_follow_a_revoke(tgw: RunningGateway, pages: OpenPage) -> None:
    guest = await _signed_in(pages, tgw, "guest")
    await expect(guest.locator("#leave-btn")).to_be_visible()
    await expect(guest.locator("#composer-input")).to_be_enabled()
    boss = await _member(tgw, "boss")
    await _change(boss, "capability/revoke", [{"kind": "chat"}])
    box = guest.locator("#composer-input")
    await expect(box).to_be_disabled()
    await expect(guest.locator("#send-btn")).to_be_disabled()
    await expect(guest.locator("#composer-denied")).to_have_text(
        "You cannot write: your capabilities do not include chat."
    )
    await expect(box).to_have_attribute("aria-describedby", "composer-denied composer-keys")
    await _change(boss, "capability/grant", [{"kind": "chat"}])
    await expect(box).to_be_enabled()
    await expect(guest.locator("#composer-denied")).to_be_hidden()
    # a list is revoked as it was granted: channel/leave goes with it, so no Leave button
    await _change(
        boss,
        "capability/revoke",
        [{"kind": ["channel/leave", "channel/list", "history/request", "system/heartbeat"]}],
    )
    await expect(guest.locator("#leave-btn")).to_be_hidden()
    await expect(guest.locator("#conv-denied")).to_have_text(
        "You cannot leave #general: your capabilities do not include channel/leave for #general."
    )


async def test_a_proposal_is_shown_but_approve_and_reject_only_as_capabilities_allow(
    tgw: RunningGateway, pages: OpenPage
) -> None:
    guest = await _signed_in(pages, tgw, "guest")
    host = await _signed_in(pages, tgw, "host")
    bot = await _member(tgw, "bot")
    calc = await _member(tgw, "calc")
    call = {"method": "tools/call", "params": {"name": "add", "arguments": {"a": 2, "b": 3}}}
    await bot.send({"kind": "mcp/proposal", "channel": "#general", "to": ["calc"], "payload": call})
    what = "proposes tools/call add to calc"
    # the host may approve and reject
    offered = host.locator(".entry.proposal")
    await expect(offered.locator(".what")).to_contain_text(what)
    await expect(offered.locator("dl.args")).to_have_text("a2b3")  # a readable list: a 2, b 3
    await expect(offered.locator("button.approve")).to_be_visible()
    await expect(offered.locator("button.reject")).to_be_visible()
    await expect(offered.locator(".buttons")).to_have_text("Approve Reject")  # and nothing else
    # the guest sees the proposal, but neither button, and why
    proposal = guest.locator(".entry.proposal")
    await expect(proposal.locator(".what")).to_contain_text(what)
    await expect(proposal.locator("button")).to_have_count(0)
    await expect(proposal.locator(".denied")).to_have_text(
        "You cannot approve: your capabilities do not include mcp/request for tools/call add; "
        "reject: your capabilities do not include mcp/reject."
    )
    # granted this very call: Approve appears on the proposal already shown, Reject does not
    boss = await _member(tgw, "boss")
    grant = {"kind": "mcp/request", "payload": {"method": "tools/call", "params": {"name": "add"}}}
    await _change(boss, "capability/grant", [grant])
    await expect(proposal.locator("button.approve")).to_be_visible()
    await expect(proposal.locator("button.reject")).to_have_count(0)
    await expect(proposal.locator(".denied")).to_have_text(
        "You cannot reject: your capabilities do not include mcp/reject."
    )
    await proposal.locator("button.approve").click()
    request = await calc.next_where(lambda f: f.get("kind") == "mcp/request")
    assert request["from"] == "guest" and request["payload"] == call
    await expect(proposal.locator(".outcome")).to_have_text("approved by guest; waiting for calc…")


async def test_a_refusal_after_capabilities_changed_under_the_page_shows_the_gateways_text(
    tmp_path: Path, pages: OpenPage
) -> None:
    """Written while allowed, sent after a revoke: the gateway refuses, and the page says so."""
    gw = await start_gateway(tmp_path, spaces=[_space()], limits=Limits(rate_per_s=0))
    guest = await pages(f"{gw.http}/chat?token=guest-token", allow=GATEWAY_DOWN)
    await expect(guest.locator("#conn")).to_have_attribute("data-state", "live")
    await stop_gateway(gw)
    await expect(guest.locator("#conn")).to_have_text("reconnecting…")
    await guest.locator("#composer-input").fill("may I speak?")
    await guest.locator("#composer-input").press("Enter")
    row = guest.locator("#messages li.msg", has_text="may I speak?")
    await expect(row).to_have_attribute("data-status", "pending")
    # the gateway comes back with a space.yaml that no longer lets the guest write
    no_chat = [c for c in GUEST_CAPS if c["kind"] != "chat"]
    gw = await start_gateway(
        tmp_path, spaces=[_space(no_chat)], limits=Limits(rate_per_s=0), port=gw.port
    )
    try:
        await expect(row).to_have_attribute("data-status", "failed")
        await expect(row.locator(".state")).to_have_text("not sent")
        await expect(row.locator(".failure")).to_contain_text(
            "capability_violation: you may not send kind 'chat' with this payload; "
            "ask an admin for a capability/grant"
        )
        await expect(guest.locator("#composer-input")).to_be_disabled()  # the welcome said so
        await row.locator("button.retry").click()  # same id again: refused again
        await expect(row).to_have_attribute("data-status", "failed")
        await row.locator("button.discard").click()
        await expect(row).to_have_count(0)
    finally:
        await stop_gateway(gw)
