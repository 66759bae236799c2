"""Private channels in the web chat: a person creates one and invites someone, who is told
and may join; outsiders never see it; the controls follow the person's capabilities."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

from playwright.async_api import Page, expect

from hubbub.server.config import Limits, ParticipantConfig, SpaceConfig, hash_token
from tests.conftest import RunningGateway, start_gateway, stop_gateway
from tests.webchat.conftest import OpenPage

Person = Callable[..., Awaitable[Page]]


async def _browse(page: Page) -> None:
    """Open "Join or create a channel" (which asks the gateway for the channel list)."""
    if await page.locator("#browse").get_attribute("open") is None:
        await page.locator("#browse summary").click()


async def test_create_a_private_channel_invite_someone_and_talk(
    gw: RunningGateway, person: Person
) -> None:
    dana = await person("dana")
    erin = await person("erin")
    outsider = await gw.agentchat("outsider")
    await _browse(dana)
    await dana.locator("#create-input").fill("hideout")
    await dana.locator("#create-private").check()
    await dana.locator("#create-btn").click()
    await expect(dana.locator("#conv-title")).to_have_text("#hideout")
    await expect(dana.locator("#conv-info")).to_have_text("private · 1 member")
    await expect(dana.locator("#invite-form")).to_be_visible()

    # nobody else sees it: not in the list, not joinable by an agentchat client either
    await _browse(erin)
    await expect(erin.locator('#other-channels [data-channel="#hideout"]')).to_have_count(0)
    await outsider.send({"type": "JOIN", "channel": "#hideout"})
    assert (await outsider.expect_type("ERROR"))["code"] == "NOT_INVITED"

    await dana.locator("#invite-input").fill("erin")
    await dana.locator("#invite-btn").click()
    await expect(dana.locator("#invite-note")).to_have_text("Invited erin.")
    await expect(erin.locator("#toast")).to_contain_text("dana invited you to #hideout")
    join = erin.locator('#other-channels button.join[data-channel="#hideout"]')
    await join.click()
    await expect(erin.locator("#conv-title")).to_have_text("#hideout")
    await expect(erin.locator("#conv-info")).to_have_text("private · 2 members")

    await dana.locator("#composer-input").fill("only for the two of us")
    await dana.keyboard.press("Enter")
    await expect(erin.locator("#messages")).to_contain_text("only for the two of us")
    await outsider.silent(lambda f: f.get("content") == "only for the two of us")


def _space() -> SpaceConfig:
    """host: a human's defaults (create, invite); guest: may join and write, not invite."""
    guest_caps = [
        {"kind": "chat"},
        {"kind": ["channel/join", "channel/leave", "channel/list", "history/request"]},
        {"kind": "system/heartbeat"},
    ]
    people = {
        "host": ParticipantConfig(kind="human", token_hash=hash_token("host-token")),
        "guest": ParticipantConfig(
            kind="human", token_hash=hash_token("guest-token"), capabilities=guest_caps
        ),
    }
    cfg = SpaceConfig(space="team", participants=people)
    cfg.validate()
    return cfg


async def test_private_channel_controls_follow_the_capabilities(
    tmp_path: Path, pages: OpenPage
) -> None:
    gw = await start_gateway(tmp_path, spaces=[_space()], limits=Limits(rate_per_s=0))
    try:
        host = await pages(f"{gw.http}/chat?token=host-token")
        guest = await pages(f"{gw.http}/chat?token=guest-token")
        for page in (host, guest):
            await expect(page.locator("#conv-title")).to_have_text("#general")
        await _browse(host)
        await _browse(guest)
        await expect(guest.locator("#create-form")).to_be_hidden()  # no channel/create
        await host.locator("#create-input").fill("#inner")
        await host.locator("#create-private").check()
        await host.locator("#create-btn").click()
        await expect(host.locator("#conv-title")).to_have_text("#inner")
        await host.locator("#invite-input").fill("@guest")  # agentchat's way of writing ids too
        await host.locator("#invite-btn").click()
        await expect(host.locator("#invite-note")).to_have_text("Invited guest.")
        await guest.locator('#other-channels button.join[data-channel="#inner"]').click()
        await expect(guest.locator("#conv-title")).to_have_text("#inner")
        await expect(guest.locator("#invite-form")).to_be_hidden()
        await expect(guest.locator("#conv-denied")).to_have_text(
            "You cannot invite to #inner: your capabilities do not include channel/invite "
            "for #inner."
        )
        # a refused invitation is answered where it was asked
        await host.locator("#invite-input").fill("bad/id")
        await host.locator("#invite-btn").click()
        await expect(host.locator("#toast")).to_contain_text("Could not invite bad/id to #inner")
    finally:
        await stop_gateway(gw)
