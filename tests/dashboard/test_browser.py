"""The dashboard in a real headless Chromium (Debian's), driven by Playwright.

Every wait is on visible state (``expect``/``wait_for``), never a fixed sleep; engine timers
move only when a test calls ``gw.tick``. The ``watched`` fixture fails a test whose page
logged a console error or threw.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator
from typing import Any

import pytest
import websockets
from playwright.async_api import Page, expect

from hubbub.errors import ProposalRejected
from hubbub.protocol.ids import ulid_time_ms
from hubbub.sdk import Participant
from tests.conftest import WsClient
from tests.dashboard.conftest import TOKENS, WAIT_S, WatchedPage
from tests.engines_live.conftest import EngineGateway
from tests.sdk.conftest import FAST, PROPOSER_CAPS


def _chat(text: str, channel: str = "#general") -> dict[str, Any]:
    return {"kind": "chat", "channel": channel, "payload": {"text": text}}


def _dm(to: str, text: str) -> dict[str, Any]:
    return {"kind": "chat", "to": [to], "private": True, "payload": {"text": text}}


async def _open(wp: WatchedPage, gw: EngineGateway, query: str = "") -> Page:
    page = wp.page
    await page.goto(f"{gw.http}/dashboard{query}")
    await expect(page.locator("#conn")).to_have_attribute("data-state", "live")
    return page


async def _sleep(gw: EngineGateway, client: WsClient, marker: str) -> None:
    await client.send(_chat(marker))
    await gw.synced(client)


def _row(page: Page, pid: str) -> Any:
    return page.locator(f'.participant[data-pid="{pid}"]')


@pytest.fixture
async def sdk(dgw: EngineGateway) -> AsyncIterator[Any]:
    """``await sdk("id", **options)``: a connected SDK Participant, closed at teardown."""
    made: list[Participant] = []

    async def make(pid: str, *, connect: bool = True, **options: Any) -> Participant:
        p = Participant(gateway=dgw.url, participant_id=pid, **{**FAST, **options})
        made.append(p)
        if connect:
            await p.connect()
        return p

    yield make
    for p in reversed(made):
        await p.disconnect()


async def _calculator(sdk: Any) -> Participant:
    calc: Participant = await sdk("calc", connect=False, kind="service")

    @calc.tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    await calc.connect()
    return calc


async def _console(page: Page, pid: str = "operator") -> None:
    await page.fill("#console-id", pid)
    await page.press("#console-id", "Enter")
    await expect(page.locator("#console-main")).to_be_visible()
    await expect(page.locator("#console-log")).to_contain_text(f"connected as {pid}")
    await expect(page.locator("#console-input")).to_be_focused()


# ---------------------------------------------------------------------- tests


async def test_the_page_loads_without_errors_in_open_mode(
    dgw: EngineGateway, watched: WatchedPage
) -> None:
    await dgw.mew("alice", kind="human")
    await dgw.mew("helper")
    page = await _open(watched, dgw)
    await expect(page.locator("#space")).to_have_text("space default")
    await expect(page.locator("#who")).to_have_text("open mode")
    await expect(_row(page, "alice")).to_have_attribute("data-presence", "online")
    await expect(_row(page, "helper").locator(".kind")).to_have_text("agent")
    await expect(page.locator('.channel[data-channel="#general"] .members')).to_have_text(
        "alice, helper"
    )
    await expect(page.locator('#feed li[data-event="connect"]')).to_have_count(2)
    await expect(page.locator("#floor-empty")).to_be_visible()
    await expect(page.locator("#proposals-empty")).to_be_visible()
    await page.screenshot(path=str(dgw.data_dir / "dashboard.png"))


async def test_a_token_from_the_url_is_kept_out_of_the_address_bar(
    team: EngineGateway, watched: WatchedPage
) -> None:
    page = await _open(watched, team, f"?token={TOKENS['ops']}")
    assert "token=" not in page.url
    await expect(page.locator("#who")).to_have_text("ops · observer")
    await expect(page.locator("button.kick")).to_have_count(0)  # observers have no kill switch
    await page.reload()  # the token was kept in this browser's storage
    await expect(page.locator("#conn")).to_have_attribute("data-state", "live")
    await expect(page.locator("#who")).to_have_text("ops · observer")


async def test_a_missing_token_asks_for_one(team: EngineGateway, browser: Any) -> None:
    page = await browser.new_page()
    await page.goto(f"{team.http}/dashboard")
    await expect(page.locator("#notice")).to_contain_text("needs an observer or admin token")
    await expect(page.locator("#token-input")).to_be_focused()
    await page.fill("#token-input", TOKENS["boss"])
    await page.press("#token-input", "Enter")
    await expect(page.locator("#conn")).to_have_attribute("data-state", "live")
    await expect(page.locator("#who")).to_have_text("boss · admin")
    await expect(page.locator("#notice")).to_be_hidden()
    await page.close()


async def test_a_sleeping_agent_counts_down_and_wakes(
    dgw: EngineGateway, watched: WatchedPage
) -> None:
    sleeper = await dgw.mew("sleeper")
    alice = await dgw.mew("alice", kind="human")
    await _sleep(dgw, sleeper, "@@sleep:90s@@")
    for n in range(3):
        await alice.send(_dm("sleeper", f"dm {n}"))
    await dgw.synced(alice)
    page = await _open(watched, dgw)
    row = _row(page, "sleeper")
    await expect(row).to_have_attribute("data-presence", "sleeping")
    await expect(row.locator(".sleeping-badge")).to_have_text("sleeping")
    countdown = row.locator(".countdown")
    await expect(countdown).to_have_text(re.compile(r"^wakes in (1m [0-3]\ds|[5-9]\ds)$"))
    first = await countdown.text_content()
    await expect(countdown).not_to_have_text(first or "")  # it ticks in the page
    await expect(row.locator(".wake-time")).to_have_text(re.compile(r"^at \d\d:\d\d:\d\d$"))
    await expect(row.locator(".buffered")).to_have_text("3 DMs buffered")
    await expect(page.locator('.channel[data-channel="#general"] .asleep')).to_have_text(
        "sleeper (asleep)"
    )
    await alice.send(_dm("sleeper", "one more"))
    await expect(row.locator(".buffered")).to_have_text("4 DMs buffered")

    dgw.tick(91)
    await expect(row).to_have_attribute("data-presence", "online")
    await expect(row.locator(".countdown")).to_have_count(0)
    await expect(row.locator(".presence")).to_have_text("online")
    await expect(page.locator('#feed li[data-event="wake"]')).to_contain_text(
        "sleeper woke (timer): 4 buffered messages delivered"
    )
    await expect(page.locator('#feed li[data-event="sleep"]')).to_have_count(1)


async def test_claims_and_yields_appear_in_the_feed(
    dgw: EngineGateway, watched: WatchedPage
) -> None:
    alice = await dgw.mew("alice", kind="human")
    first = await dgw.mew("first")
    second = await dgw.mew("second")
    page = await _open(watched, dgw)
    await alice.send(_chat("anyone?"))
    question = await first.expect("chat")
    t0 = ulid_time_ms(question["id"])  # a claim may not start before the message itself
    for who, started in ((second, t0 + 2), (first, t0 + 1)):
        claim = {"msg_id": question["id"], "started_at": started}
        await who.send({"kind": "floor/responding-to", "channel": "#general", "payload": claim})
    feed = page.locator("#feed")
    await expect(feed.locator('li[data-event="message"]')).to_contain_text(
        "#general alice: anyone?"
    )
    await expect(feed.locator('li[data-event="yield"]')).to_contain_text("second yields to first")
    await expect(feed.locator('li[data-event="claim"]')).to_have_count(2)
    await expect(feed.locator('li[data-event="claim"]').first).to_contain_text(
        "first claims the floor"
    )
    await expect(page.locator("#floor-rows tr")).to_have_count(1)
    await expect(page.locator("#floor-rows tr td").first).to_have_text("first")
    await expect(_row(page, "first").locator(".floor-held")).to_contain_text("holds the floor")
    # the filters: by participant, then by channel
    await page.select_option("#filter-agent", "alice")
    await expect(feed.locator('li[data-event="yield"]')).to_have_count(0)
    await expect(feed.locator('li[data-event="message"]')).to_have_count(1)
    await page.select_option("#filter-agent", "")
    await page.uncheck("#filter-messages")
    await expect(feed.locator('li[data-event="message"]')).to_have_count(0)
    await expect(feed.locator('li[data-event="yield"]')).to_have_count(1)


async def test_reasoning_traffic_is_shown_only_on_request(
    dgw: EngineGateway, watched: WatchedPage
) -> None:
    thinker = await dgw.mew("thinker")
    await dgw.mew("helper")
    page = await _open(watched, dgw)
    await thinker.send({"kind": "reasoning/start", "channel": "#general", "payload": {}})
    await thinker.send(
        {"kind": "reasoning/thought", "to": ["helper"], "private": True, "payload": {"text": "hm"}}
    )
    await thinker.send(_chat("thought it through"))
    feed = page.locator("#feed")
    await expect(feed.locator('li[data-event="message"]')).to_have_count(1)
    await expect(feed.locator('li[data-event="message"]')).to_contain_text("thought it through")
    await page.check("#filter-traffic")
    await expect(feed.locator('li[data-group="traffic"]')).to_have_count(2)
    await expect(feed.locator('li[data-group="traffic"]').first).to_contain_text(
        "thinker → helper (direct reasoning/thought)"
    )
    await expect(feed.locator('li[data-group="traffic"]').last).to_contain_text(
        "thinker in #general: reasoning/start"
    )


async def test_the_operator_approves_a_proposal_without_connecting_the_console_first(
    dgw: EngineGateway, watched: WatchedPage, sdk: Any
) -> None:
    await _calculator(sdk)
    agent: Participant = await sdk("agent", capabilities=PROPOSER_CAPS)
    page = await _open(watched, dgw)
    call = asyncio.create_task(agent.call_tool("calc", "add", {"a": 2, "b": 3}, timeout=WAIT_S))
    item = page.locator("#proposals .proposal")
    await expect(item).to_have_count(1)
    await expect(item.locator(".what")).to_have_text("tools/call add")
    await expect(item.locator(".args")).to_have_text('{"a":2,"b":3}')
    await expect(item.locator(".meta")).to_have_text("from agent · to calc · #general")
    await expect(page.locator("#proposals-count")).to_have_text("1")
    await expect(page.locator("#console-main")).to_be_hidden()  # nobody connected the console
    await item.locator("button.approve").click()  # it connects on demand, then approves
    await expect(page.locator("#console-log")).to_contain_text("connected as operator")
    done = page.locator("#proposals-settled .proposal")
    await expect(done.locator(".outcome")).to_have_text("calc answered: 5")
    await expect(page.locator('#feed li[data-event="proposal-result"]')).to_contain_text(
        "calc answered proposal"
    )
    await expect(page.locator('#feed li[data-event="proposal-approved"]')).to_contain_text(
        "operator approved proposal"
    )
    await expect(page.locator("#console-log")).to_contain_text("calc answered: 5")
    result = await asyncio.wait_for(call, WAIT_S)
    assert result.content[0].text == "5"  # type: ignore[union-attr]
    # settled, it folds away from the pending list
    await expect(page.locator("#proposals-count")).to_have_text("")
    await expect(page.locator("#proposals .proposal")).to_have_count(0)
    await expect(page.locator("#proposals-empty")).to_be_visible()
    await expect(done).to_be_hidden()  # folded
    await expect(page.locator("#proposals-done-count")).to_have_text("1")
    await page.locator("#proposals-done summary").click()
    await expect(done).to_be_visible()


async def test_a_withdrawn_proposal_folds_away_and_reject_connects_the_console(
    dgw: EngineGateway, watched: WatchedPage, sdk: Any
) -> None:
    await _calculator(sdk)
    agent: Participant = await sdk("agent", capabilities=PROPOSER_CAPS)
    page = await _open(watched, dgw)
    first = asyncio.create_task(agent.call_tool("calc", "add", {"a": 1, "b": 2}, timeout=WAIT_S))
    item = page.locator("#proposals .proposal")
    await expect(item).to_have_count(1)
    proposal_id = await item.get_attribute("data-id")
    assert proposal_id
    await agent.withdraw(proposal_id, "changed my mind")
    await expect(item).to_have_count(0)
    withdrawn = page.locator(f'#proposals-settled .proposal[data-id="{proposal_id}"]')
    await expect(withdrawn.locator(".outcome")).to_have_text("withdrawn by agent (changed my mind)")
    with contextlib.suppress(Exception):  # the call ends with its withdrawal
        await asyncio.wait_for(first, WAIT_S)
    second = asyncio.create_task(agent.call_tool("calc", "add", {"a": 3, "b": 4}, timeout=WAIT_S))
    await expect(item).to_have_count(1)
    await item.locator("button.reject").click()  # the reason first; the console when sent
    await expect(item.locator("input.reason")).to_be_focused()
    await page.keyboard.type("not now")
    await page.keyboard.press("Enter")
    await expect(page.locator("#console-log")).to_contain_text("connected as operator")
    with pytest.raises(ProposalRejected, match="not now"):
        await asyncio.wait_for(second, WAIT_S)
    await expect(item).to_have_count(0)
    await expect(page.locator("#proposals-done-count")).to_have_text("2")


async def test_the_operator_rejects_with_the_keyboard(
    dgw: EngineGateway, watched: WatchedPage, sdk: Any
) -> None:
    await _calculator(sdk)
    agent: Participant = await sdk("agent", capabilities=PROPOSER_CAPS)
    page = await _open(watched, dgw)
    await _console(page)
    call = asyncio.create_task(agent.call_tool("calc", "add", {"a": 1, "b": 1}, timeout=WAIT_S))
    item = page.locator("#proposals .proposal")
    await expect(item).to_have_attribute("aria-selected", "true")
    await page.keyboard.press("Escape")  # leave the message box: keys are shortcuts now
    await page.keyboard.press("j")
    await expect(item).to_be_focused()
    await page.keyboard.press("r")
    reason = item.locator("input.reason")
    await expect(reason).to_be_focused()
    await page.keyboard.type("not with my numbers")
    await page.keyboard.press("Enter")
    await expect(item).to_have_count(0)  # settled: folded away from the pending list
    await expect(page.locator("#proposals-settled .proposal .outcome")).to_have_text(
        "rejected by operator: not with my numbers"
    )
    with pytest.raises(ProposalRejected, match="not with my numbers"):
        await asyncio.wait_for(call, WAIT_S)
    await expect(page.locator('#feed li[data-event="proposal-rejected"]')).to_contain_text(
        "operator rejected proposal"
    )


async def test_the_console_reads_history_and_sends_with_enter(
    dgw: EngineGateway, watched: WatchedPage
) -> None:
    alice = await dgw.mew("alice", kind="human")
    for n in range(1, 61):
        await alice.send(_chat(f"old message {n}"))
    await dgw.synced(alice)
    page = await _open(watched, dgw)
    await _console(page)
    log = page.locator("#console-log")
    await expect(log.locator('li[data-kind="chat"]')).to_have_count(50)
    await expect(log.locator('li[data-seq="10"]')).to_have_count(0)
    await page.click("#console-older")
    await expect(log.locator('li[data-kind="chat"]')).to_have_count(60)
    await expect(log.locator('li[data-seq="1"]')).to_contain_text("old message 1")
    await expect(page.locator("#console-older")).to_be_hidden()
    await page.fill("#console-input", "hello from the console")
    await page.press("#console-input", "Enter")
    got = await alice.next_where(lambda f: f.get("kind") == "chat" and f.get("from") == "operator")
    assert got["payload"]["text"] == "hello from the console"
    await expect(log.locator("li.mine")).to_contain_text("hello from the console")
    await expect(page.locator("#console-input")).to_have_value("")
    await alice.send(_chat("welcome, operator"))
    await expect(log).to_contain_text("welcome, operator")


async def test_the_kill_switch_disconnects_a_sleeping_agent(
    dgw: EngineGateway, watched: WatchedPage
) -> None:
    sleeper = await dgw.mew("sleeper")
    await _sleep(dgw, sleeper, "@@sleep:300s@@")
    page = await _open(watched, dgw)
    row = _row(page, "sleeper")
    await expect(row).to_have_attribute("data-presence", "sleeping")
    await row.locator("button.kick").click()
    await expect(row).to_have_attribute("data-presence", "offline")
    await expect(row.locator(".countdown")).to_have_count(0)
    await expect(page.locator('#feed li[data-event="kick"]')).to_contain_text(
        "sleeper was disconnected by an admin while sleeping"
    )
    await expect(page.locator('#feed li[data-event="sleep-cancelled"]')).to_have_count(1)
    with pytest.raises(websockets.ConnectionClosed) as info:
        while True:
            await asyncio.wait_for(sleeper.ws.recv(), WAIT_S)
    assert info.value.rcvd is not None and info.value.rcvd.code == 4001
    await row.locator("button.ban").click()
    await expect(row.locator(".banned-badge")).to_have_text("banned")
    await row.locator("button.unban").click()
    await expect(row.locator(".banned-badge")).to_have_count(0)


async def test_a_human_participant_token_gets_the_console_only(
    team: EngineGateway, watched: WatchedPage
) -> None:
    bot = await team.mew("bot", space="team", token=TOKENS["bot"])
    page = watched.page
    await page.goto(f"{team.http}/dashboard?token={TOKENS['eve']}")
    await expect(page.locator("#conn")).to_have_text("console only")
    await expect(page.locator("#notice")).to_contain_text("can use the operator console")
    await expect(page.locator("#console-id")).to_have_value("eve")
    await expect(page.locator("#console-id")).to_be_disabled()
    await page.click("#console-connect-btn")
    await expect(page.locator("#console-log")).to_contain_text("connected as eve")
    await page.fill("#console-input", "/dm bot are you there?")
    await page.press("#console-input", "Enter")
    got = await bot.next_where(lambda f: f.get("kind") == "chat" and f.get("from") == "eve")
    assert got["to"] == ["bot"] and got["payload"]["text"] == "are you there?"
    await expect(page.locator("#console-tabs button[data-channel='@dm']")).to_be_visible()
    await expect(page.locator("button.kick")).to_have_count(0)


async def test_the_console_shows_reasoning_and_errors_as_sentences(
    dgw: EngineGateway, watched: WatchedPage
) -> None:
    thinker = await dgw.mew("thinker")
    said = {"message": "Working on alice's message"}
    await thinker.send({"kind": "reasoning/start", "channel": "#general", "payload": said})
    await thinker.send(
        {
            "kind": "reasoning/cancel",
            "channel": "#general",
            "payload": {"reason": "yielded", "message": "yielded to maths"},
        }
    )
    await dgw.synced(thinker)
    page = await _open(watched, dgw)
    await _console(page)
    log = page.locator("#console-log")
    await expect(log.locator('li[data-kind="reasoning/start"] .body')).to_have_text(
        "Working on alice's message"
    )
    await expect(log.locator('li[data-kind="reasoning/cancel"] .body')).to_have_text(
        "stopped: yielded to maths"
    )
    await thinker.send(
        {"kind": "reasoning/conclusion", "channel": "#general", "payload": {"message": "answered"}}
    )
    await expect(log.locator('li[data-kind="reasoning/conclusion"] .body')).to_have_text(
        "done: answered"
    )
    await page.fill("#console-input", "/join #bad name")
    await page.press("#console-input", "Enter")
    await expect(log.locator("li.error")).to_contain_text("commands: /dm id text")
    await page.fill("#console-input", "/dm nobody@x hi")
    await page.press("#console-input", "Enter")
    await expect(log.locator("li.error").last).to_contain_text("nobody@x")
    for text in await log.locator("li .body").all_inner_texts():
        assert "{" not in text, text  # sentences, not JSON


async def test_a_phone_sized_dashboard_fits_the_screen_and_approves(
    dgw: EngineGateway, watched: WatchedPage, sdk: Any
) -> None:
    await _calculator(sdk)
    agent: Participant = await sdk("agent", capabilities=PROPOSER_CAPS)
    for pid in ("a-rather-long-participant-id", "another-long-id-here"):
        await dgw.mew(pid)
    page = watched.page
    await page.set_viewport_size({"width": 390, "height": 844})
    await _open(watched, dgw)
    call = asyncio.create_task(agent.call_tool("calc", "add", {"a": 2, "b": 3}, timeout=WAIT_S))
    item = page.locator("#proposals .proposal")
    await expect(item).to_have_count(1)
    await expect(page.locator(".participant")).to_have_count(4)
    width = await page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
    assert width[0] <= width[1] == 390, width  # no horizontal overflow
    await item.locator("button.approve").click()
    await expect(page.locator("#proposals-settled .proposal .outcome")).to_have_text(
        "calc answered: 5"
    )
    await asyncio.wait_for(call, WAIT_S)
    width = await page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
    assert width[0] <= width[1], width


async def test_a_large_proposal_is_loaded_when_opened_and_approved(
    dgw: EngineGateway, watched: WatchedPage, sdk: Any
) -> None:
    """Issue 21 item 8: the board lists a large proposal by a preview of its arguments; opening
    it loads the payload (GET /dashboard/proposals/{id}), and approving it sends all of it."""
    calc: Participant = await sdk("calc", connect=False, kind="service")

    @calc.tool
    def size(text: str) -> int:
        """Count the characters of a text."""
        return len(text)

    await calc.connect()
    agent: Participant = await sdk("agent", capabilities=PROPOSER_CAPS)
    page = await _open(watched, dgw)
    loads: list[str] = []
    page.on("request", lambda r: loads.append(r.url) if "/dashboard/proposals/" in r.url else None)
    text = "y" * 7800
    call = asyncio.create_task(agent.call_tool("calc", "size", {"text": text}, timeout=WAIT_S))
    item = page.locator("#proposals .proposal")
    await expect(item).to_have_count(1)
    args = item.locator(".args")
    await expect(args).to_have_class(re.compile(r"\bpreview\b"))
    preview = await args.text_content()
    assert preview is not None and preview.startswith('{"text":"yyy') and len(preview) <= 200
    await item.click()  # opened: the payload is loaded
    await expect(item.locator(".args")).not_to_have_class(re.compile(r"\bpreview\b"))
    await expect(item.locator(".args")).to_have_text(f'{{"text":"{text}"}}')
    assert len(loads) == 1
    await item.locator("button.approve").click()
    done = page.locator("#proposals-settled .proposal")
    await expect(done.locator(".outcome")).to_have_text("calc answered: 7800")
    result = await asyncio.wait_for(call, WAIT_S)
    assert result.content[0].text == "7800"  # type: ignore[union-attr]
