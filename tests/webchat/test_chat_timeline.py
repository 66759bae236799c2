"""How the web chat lays out a conversation: initials avatars, consecutive messages of one
sender grouped, day separators, the "New messages" line, and a short history sitting on the
message box.

The gateway stamps each message with its clock (``Router.clock``); these tests give it one
that they can set two days back for the older messages (a real gateway, a real page: only the
stamps move).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import Page, expect

from hubbub.protocol.ids import Clock
from hubbub.server.config import Limits
from tests.conftest import RunningGateway, WsClient, start_gateway, stop_gateway
from tests.engines_live.conftest import EngineGateway
from tests.webchat.conftest import OpenPage, sign_in

DAY_S = 86400


class ShiftedClock(Clock):
    """The gateway's wall clock, moved by ``offset_ms``."""

    __slots__ = ("offset_ms",)

    def __init__(self) -> None:
        super().__init__()
        self.offset_ms = 0

    def now_ms(self) -> int:  # type: ignore[override]
        """Unix ms, shifted."""
        return Clock.now_ms() + self.offset_ms


class ClockedGateway(RunningGateway):
    """A gateway whose message stamps a test moves (``advance``)."""

    stamps: ShiftedClock

    def advance(self, seconds: float) -> None:
        """Move the clock that stamps messages."""
        self.stamps.offset_ms += int(seconds * 1000)


@pytest.fixture
async def clocked(tmp_path: Path) -> AsyncIterator[ClockedGateway]:
    """An open-mode gateway whose message stamps the test moves."""
    gw = await start_gateway(tmp_path, limits=Limits(rate_per_s=0))
    gw.__class__ = ClockedGateway
    gw.stamps = ShiftedClock()  # type: ignore[attr-defined]
    gw.router.router.clock = gw.stamps  # type: ignore[attr-defined]  # the clock that stamps
    yield gw  # type: ignore[misc]
    await stop_gateway(gw)


async def _say(gw: ClockedGateway, who: WsClient, *texts: str) -> None:
    for text in texts:
        await who.send({"kind": "chat", "channel": "#general", "payload": {"text": text}})
    await EngineGateway.synced(who)


def _row(page: Page, text: str) -> Any:
    return page.locator("#messages li.msg", has_text=text)


async def _rows(page: Page) -> list[str]:
    """The timeline from the top: separators by their text, messages as `from: text`, with
    `+` before a message that continues its sender's group."""
    return list(
        await page.locator("#messages > li").evaluate_all(
            """rows => rows.map((r) => {
                if (!r.matches("li.msg")) return `-- ${r.innerText.trim()} --`;
                const body = r.querySelector(".body").innerText.trim();
                return `${r.classList.contains("cont") ? "+" : ""}${r.dataset.from}: ${body}`;
            })"""
        )
    )


async def test_groups_days_and_a_short_history_on_the_message_box(
    clocked: ClockedGateway, pages: OpenPage
) -> None:
    bob = await clocked.mew("bob.smith", kind="human")
    erin = await clocked.mew("erin", kind="human")
    clocked.advance(-2 * DAY_S)
    await _say(clocked, bob, "two days ago", "a minute later")
    await _say(clocked, erin, "erin then")
    clocked.advance(2 * DAY_S)
    await _say(clocked, erin, "erin today")
    await _say(clocked, bob, "bob today", "bob again")
    dana = await pages(f"{clocked.http}/chat")
    await sign_in(dana, "dana")
    await expect(_row(dana, "bob again")).to_be_visible()
    rows = await _rows(dana)
    then = rows[0]
    assert then.startswith("-- ") and then not in ("-- Today --", "-- Yesterday --"), rows
    assert rows[1:] == [
        "bob.smith: two days ago",
        "+bob.smith: a minute later",  # grouped: no name, no avatar
        "erin: erin then",
        "-- Today --",
        "erin: erin today",  # a new day starts a new group
        "bob.smith: bob today",
        "+bob.smith: bob again",
    ]
    first = _row(dana, "two days ago")
    await expect(first.locator(".avatar")).to_have_text("BS")  # initials: bob.smith
    await expect(first.locator(".meta .from")).to_be_visible()
    later = _row(dana, "a minute later")
    await expect(later.locator(".avatar")).to_be_hidden()
    await expect(later.locator(".meta")).to_be_hidden()
    await expect(_row(dana, "erin today").locator(".avatar")).to_have_text("E")
    # a short history sits on the message box, the free space above it
    timeline = await dana.locator("#timeline").bounding_box()
    messages = await dana.locator("#messages").bounding_box()
    assert timeline and messages
    gap_below = timeline["y"] + timeline["height"] - (messages["y"] + messages["height"])
    assert 0 <= gap_below < 20, (timeline, messages)
    assert messages["y"] - timeline["y"] > 100, (timeline, messages)


async def test_new_messages_are_marked_where_the_person_stopped_reading(
    clocked: ClockedGateway, pages: OpenPage
) -> None:
    bob = await clocked.mew("bob", kind="human")
    await _say(clocked, bob, "before dana")
    dana = await pages(f"{clocked.http}/chat")
    await sign_in(dana, "dana")
    await expect(_row(dana, "before dana")).to_be_visible()
    # a first visit: everything is new, so no line
    await expect(dana.locator("#messages > li.new-marker")).to_have_count(0)
    await dana.locator('#people .person[data-pid="bob"] button.name').click()
    await expect(dana.locator("#conv-title")).to_have_text("bob (direct)")
    await _say(clocked, bob, "while you were away", "and this too")
    general = dana.locator('#channel-list button.conv[data-conv="#general"]')
    await expect(general.locator(".unread")).to_contain_text("2")
    await general.click()
    await expect(_row(dana, "and this too")).to_be_visible()
    assert await _rows(dana) == [
        "-- Today --",
        "bob: before dana",
        "-- New messages --",
        "bob: while you were away",  # the line starts a new group
        "+bob: and this too",
    ]
    await dana.locator("#composer-input").fill("back now")
    await dana.locator("#composer-input").press("Enter")  # answering reads them: the line goes
    await expect(_row(dana, "back now")).to_have_attribute("data-status", "sent")
    await expect(dana.locator("#messages > li.new-marker")).to_have_count(0)
    # on the next visit after more came, the line is where dana stopped reading
    await dana.locator('#people .person[data-pid="bob"] button.name').click()
    await _say(clocked, bob, "one more")
    await expect(general.locator(".unread")).to_contain_text("1")
    await general.click()
    marker = dana.locator("#messages > li.new-marker")
    await expect(marker).to_have_count(1)
    assert (await _rows(dana))[-2:] == ["-- New messages --", "bob: one more"]
