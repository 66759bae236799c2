"""People chat with each other and with agents at ``/chat``, in a real headless Chromium.

Every wait is on visible state (``expect``), never a fixed sleep. The agents are the demo's,
on the offline scripted model.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import Page, expect

from hubbub.errors import ProposalRejected
from hubbub.protocol.ids import ulid_time_ms
from hubbub.sdk import Participant
from hubbub.server.config import Limits
from tests.conftest import RunningGateway, WsClient, start_gateway, stop_gateway
from tests.dashboard.conftest import start_dash_gateway
from tests.sdk.conftest import FAST, PROPOSER_CAPS
from tests.webchat.conftest import GATEWAY_DOWN, PHONE, WAIT_S, OpenPage, sign_in


def _chat(text: str, channel: str = "#general") -> dict[str, Any]:
    return {"kind": "chat", "channel": channel, "payload": {"text": text}}


def _row(page: Page, text: str) -> Any:
    return page.locator("#messages li.msg", has_text=text)


async def _write(page: Page, text: str) -> None:
    await page.locator("#composer-input").fill(text)
    await page.locator("#composer-input").press("Enter")


async def _texts(page: Page, sender: str) -> list[str]:
    rows = page.locator(f'#messages li.msg[data-from="{sender}"] .body')
    return [t.strip() for t in await rows.all_inner_texts()]


async def test_two_people_chat_in_a_channel_and_by_dm(gw: RunningGateway, person: Any) -> None:
    bob = await gw.mew("bob", kind="human")
    dana = await person("dana")
    erin = await person("erin")
    await expect(dana.locator("#conv-info")).to_have_text("3 members")
    await _write(dana, "hello **erin**, see `make demo`")
    mine = _row(dana, "hello erin")
    await expect(mine).to_have_attribute("data-status", "sent")  # the gateway's echo: acked
    got = erin.locator('#messages li.msg[data-from="dana"]')
    await expect(got.locator(".body strong")).to_have_text("erin")
    await expect(got.locator(".body code")).to_have_text("make demo")
    said = await bob.next_where(lambda f: f.get("kind") == "chat" and f.get("from") == "dana")
    assert said["payload"]["text"] == "hello **erin**, see `make demo`"

    # erin writes to dana privately, from the people list, with the keyboard
    await erin.locator('#people .person[data-pid="dana"] button.name').click()
    await expect(erin.locator("#conv-title")).to_have_text("dana (direct)")
    await expect(erin.locator("#composer-input")).to_be_focused()
    await erin.keyboard.type("just between us")
    await erin.keyboard.press("Enter")
    await expect(_row(erin, "just between us")).to_have_attribute("data-status", "sent")
    dm = dana.locator('#dm-list button.conv[data-conv="@erin"]')
    await expect(dm.locator(".unread")).to_contain_text("1")
    await dm.click()
    await expect(_row(dana, "just between us")).to_be_visible()
    await expect(dm.locator(".unread")).to_have_count(0)
    await _write(dana, "agreed")
    await expect(_row(erin, "agreed")).to_have_attribute("data-from", "dana")
    await bob.silent(lambda f: f.get("kind") == "chat" and f.get("from") in ("dana", "erin"))

    # back in #general, erin's earlier message from dana is still there, read
    await erin.locator('#channel-list button.conv[data-conv="#general"]').click()
    await expect(_row(erin, "hello erin")).to_be_visible()


async def test_a_sign_in_is_remembered_per_gateway_until_sign_out(
    gw: RunningGateway, person: Any
) -> None:
    dana = await person("dana")
    await dana.reload()
    await expect(dana.locator("#conn")).to_have_attribute("data-state", "live")
    await expect(dana.locator("#me")).to_have_text("dana")
    await dana.locator("#signout").click()
    await expect(dana.locator("#signin-name")).to_be_visible()
    await dana.reload()
    await expect(dana.locator("#signin-name")).to_be_focused()  # forgotten
    await expect(dana.locator("#app")).to_be_hidden()


async def test_an_agent_answers_a_mention_and_is_answering_shows_then_clears(
    gw: RunningGateway, person: Any, cast: Any
) -> None:
    await cast("maths", 1.0)  # a second of "inference": long enough to be seen
    dana = await person("dana")
    box = dana.locator("#composer-input")
    await box.focus()
    await dana.keyboard.type("@ma")
    await expect(dana.locator("#mentions li")).to_have_count(1)
    await expect(dana.locator("#mentions li")).to_contain_text("@maths")
    await dana.keyboard.press("Enter")  # takes the suggestion
    await expect(box).to_have_value("@maths ")
    await dana.keyboard.type("how should we name the new project?")
    await dana.keyboard.press("Enter")
    question = _row(dana, "how should we name the new project?")
    await expect(question.locator(".mention")).to_have_text("@maths")
    await expect(dana.locator("#activity")).to_contain_text("maths is answering you…")
    await expect(question.locator(".floor-line")).to_have_text("maths is answering…")
    answer = dana.locator('#messages li.msg[data-from="maths"]')
    await expect(answer).to_contain_text("Call it Fermat, dana")
    await expect(dana.locator("#activity")).to_be_empty()
    await expect(question.locator(".floor-line")).to_have_count(0)


async def test_claims_and_yields_show_who_answers_and_who_yielded(
    gw: RunningGateway, person: Any
) -> None:
    host = await gw.mew("host", kind="service")
    first = await gw.mew("first")
    second = await gw.mew("second")
    dana = await person("dana")
    await host.send(_chat("anyone?"))
    asked = await first.expect("chat")
    t0 = ulid_time_ms(asked["id"])  # a claim may not start before the message itself
    for who, started in ((second, t0 + 2), (first, t0 + 1)):
        claim = {"msg_id": asked["id"], "started_at": started}
        await who.send({"kind": "floor/responding-to", "channel": "#general", "payload": claim})
    question = _row(dana, "anyone?")
    await expect(question.locator(".floor-line")).to_have_text(
        "first is answering… · second yielded to first"
    )
    await expect(dana.locator("#activity")).to_contain_text("first is answering host…")
    await expect(dana.locator("#activity")).to_contain_text("(second yielded)")
    await first.send({**_chat("me, I know"), "correlation_id": [asked["id"]]})
    await expect(question.locator(".floor-line")).to_have_text(
        "answered by first · second yielded to first"
    )
    await expect(dana.locator("#activity")).to_be_empty()


async def test_a_reconnect_in_a_burst_of_200_shows_all_once_in_order(
    gw: RunningGateway, person: Any
) -> None:
    sender = await gw.mew("burst")
    dana = await person("dana")
    # the test watches the connection chip, so a short "reconnecting…" is not missed
    await dana.evaluate(
        """() => {
        window.seen = [];
        const chip = document.getElementById("conn");
        new MutationObserver(() => window.seen.push(chip.textContent))
          .observe(chip, {childList: true, characterData: true, subtree: true});
    }"""
    )
    dropped = asyncio.Event()

    async def burst() -> None:
        for n in range(1, 201):
            await sender.send(_chat(f"burst {n}"))
            if n == 80:
                await dropped.wait()

    task = asyncio.create_task(burst())
    await expect(dana.locator('#messages li[data-from="burst"]').first).to_be_visible()
    # the network drops under the page (no close frame): messages in flight are lost to it
    dana_session = gw.router.spaces["default"].online["dana"]
    dana_session.conn.transport.abort()
    dropped.set()
    await asyncio.wait_for(task, WAIT_S)
    rows = dana.locator('#messages li[data-from="burst"]')
    await expect(rows).to_have_count(200)
    assert await _texts(dana, "burst") == [f"burst {n}" for n in range(1, 201)]
    await expect(dana.locator("#conn")).to_have_text("connected")
    seen = await dana.evaluate("window.seen")
    assert "reconnecting…" in seen, seen
    seqs = [int(s) for s in await rows.evaluate_all("rs => rs.map(r => r.dataset.seq)")]
    assert seqs == sorted(seqs) and len(set(seqs)) == 200


async def test_older_pages_load_on_scroll(gw: RunningGateway, person: Any) -> None:
    alice = await gw.mew("alice", kind="human")
    for n in range(1, 131):
        await alice.send(_chat(f"old message {n}\n\nwith a second paragraph"))
    await alice.send({"kind": "channel/list"})
    await alice.expect("channel/list-response")  # all 130 are stored
    dana = await person("dana")
    rows = dana.locator('#messages li[data-from="alice"]')
    await expect(rows).to_have_count(50)
    timeline = dana.locator("#timeline")
    for want in (100, 130):
        await timeline.evaluate("t => { t.scrollTop = 0; }")
        await expect(rows).to_have_count(want)
    await expect(dana.locator("#older-btn")).to_be_hidden()
    texts = await rows.locator(".body p:first-child").all_inner_texts()
    assert texts == [f"old message {n}" for n in range(1, 131)]


async def test_a_phone_sized_screen_in_dark_mode_with_less_motion(
    gw: RunningGateway, person: Any, tmp_path: Any
) -> None:
    await gw.mew("bob", kind="human")
    dana = await person(
        "dana", viewport=PHONE, is_mobile=True, color_scheme="dark", reduced_motion="reduce"
    )
    await _write(dana, "hello from a phone")
    await expect(_row(dana, "hello from a phone")).to_have_attribute("data-status", "sent")
    width = await dana.evaluate("document.documentElement.scrollWidth")
    assert width <= PHONE["width"], "the page scrolls sideways on a phone"
    sidebar = dana.locator("#sidebar")
    await expect(sidebar).not_to_be_in_viewport()
    toggle = dana.locator("#nav-toggle")
    await toggle.click()
    await expect(toggle).to_have_attribute("aria-expanded", "true")
    await expect(sidebar).to_be_in_viewport()
    await expect(dana.locator('#people .person[data-pid="bob"]')).to_be_visible()
    await dana.keyboard.press("Escape")
    await expect(sidebar).not_to_be_in_viewport()
    await expect(toggle).to_be_focused()
    # the top bar says who you are; the drawer has a close button (and says it too)
    await expect(dana.locator("#whoami")).to_be_in_viewport()
    await expect(dana.locator("#me")).to_have_text("dana")
    await toggle.click()
    await expect(sidebar).to_be_in_viewport()
    await expect(dana.locator("#drawer-me")).to_have_text("D dana")
    await dana.locator("#nav-close").click()
    await expect(sidebar).not_to_be_in_viewport()
    await expect(toggle).to_have_attribute("aria-expanded", "false")
    await expect(toggle).to_be_focused()
    background = await dana.evaluate("getComputedStyle(document.body).backgroundColor")
    assert background == "rgb(18, 21, 28)"  # the dark palette
    slide = await sidebar.evaluate("s => getComputedStyle(s).transitionDuration")
    assert slide == "0s"  # the drawer does not slide for people who asked for less motion
    await dana.screenshot(path=str(tmp_path / "chat-phone.png"))
    assert (tmp_path / "chat-phone.png").stat().st_size > 0


async def test_a_proposal_approved_inline_is_fulfilled(
    gw: RunningGateway, person: Any, cast: Any
) -> None:
    coder = await cast("coder")  # may list tools but not call them: it proposes
    await coder.wait_for_tools("calculator", timeout=WAIT_S)
    dana = await person("dana")
    await _write(dana, "@coder what is 1234+4321?")
    proposal = dana.locator(".entry.proposal")
    await expect(proposal.locator(".what")).to_contain_text("proposes tools/call add to calculator")
    args = proposal.locator("dl.args")  # the arguments as a list, not JSON
    await expect(args.locator("dt")).to_have_text(["a", "b"])
    await expect(args.locator("dd")).to_have_text(["1234", "4321"])
    waiting = dana.locator('#messages li.msg.activity[data-from="coder"]')
    await expect(waiting.locator(".meta .state")).to_have_text("waiting for approval…")
    before = await dana.locator("#messages > li").evaluate_all(
        "rows => rows.map((r) => r.dataset.id || r.className)"
    )
    await proposal.locator("button.approve").focus()
    await dana.keyboard.press("Enter")
    answer = dana.locator('#messages li.msg:not(.activity)[data-from="coder"]')
    await expect(answer).to_contain_text("5555")
    # the proposal keeps its place: its row is where it was, above the answer, now settled
    kept = dana.locator(".entry.proposal")
    await expect(kept).to_have_count(1)
    await expect(kept.locator(".outcome.ok")).to_have_text("calculator answered: 5555")
    await expect(waiting).to_have_count(1)
    await expect(waiting.locator(".meta .state")).to_have_count(0)
    after = await dana.locator("#messages > li").evaluate_all(
        "rows => rows.map((r) => r.dataset.id || r.className)"
    )
    assert after[: len(before)] == before, (before, after)
    fold = waiting.locator("details.fold")
    await expect(fold.locator("summary")).to_have_text("1 proposal · 2 thoughts")
    await expect(fold.locator(".entry.thought").last).to_contain_text("returned: 5555")


async def test_a_proposal_rejected_inline_with_the_keyboard(
    gw: RunningGateway, person: Any, cast: Any
) -> None:
    await cast("coder")  # brings the calculator
    asker = Participant(gateway=gw.url, participant_id="asker", capabilities=PROPOSER_CAPS, **FAST)
    async with asker:
        dana = await person("dana")
        call = asyncio.create_task(
            asker.call_tool("calculator", "add", {"a": 1, "b": 1}, timeout=WAIT_S)
        )
        proposal = dana.locator(".entry.proposal")
        await expect(proposal.locator("button.reject")).to_be_visible()
        await proposal.locator("button.reject").focus()
        await dana.keyboard.press("Enter")
        await expect(proposal.locator("input.reason")).to_be_focused()
        await dana.keyboard.type("not with my numbers")
        await dana.keyboard.press("Enter")
        await expect(proposal.locator(".outcome.bad")).to_have_text(
            "rejected by dana: not with my numbers"
        )
        with pytest.raises(ProposalRejected, match="not with my numbers"):
            await asyncio.wait_for(call, WAIT_S)


XSS = [
    "<script>window.pwned = 'script'</script>",
    "<img src=x onerror=\"window.pwned='img'\">",
    "<svg onload=\"window.pwned='svg'\"></svg>",
    "<iframe src=\"javascript:window.pwned='iframe'\"></iframe>",
    "<a href=\"javascript:window.pwned='a'\">a link</a>",
    "<b onmouseover=\"window.pwned='hover'\">hover me</b>",
    "<details open ontoggle=\"window.pwned='toggle'\">x</details>",
    "<style>body { display: none }</style>",
    "<<script>script>window.pwned='split'<</script>/script>",
    "[click me](javascript:window.pwned='link')",
    "[click me](JaVaScRiPt:window.pwned='case')",
    "[click me]( javascript:window.pwned='space')",
    "[click me](java\tscript:window.pwned='tab')",
    "[click me](&#106;avascript:window.pwned='entity')",
    "[click me](data:text/html,<script>window.pwned='data'</script>)",
    "[click me](vbscript:msgbox)",
    "[quote](https://example.invalid/a\"onmouseover=\"window.pwned='quote')",
    "![x](javascript:window.pwned='image')",
    "![x](x\" onerror=\"window.pwned='attr')",
    "![tracker](https://example.invalid/pixel.png)",
    "[![x](https://example.invalid/i.png)](javascript:window.pwned='nested')",
    "`<script>window.pwned='code'</script>`",
    "```\n<script>window.pwned='fence'</script>\n```",
    "**<img src=x onerror=window.pwned='bold'>**",
    "@<img src=x onerror=window.pwned='mention'>",
    "javascript:window.pwned='bare'",
]


async def test_an_xss_corpus_renders_inert(gw: RunningGateway, person: Any) -> None:
    mallory = await gw.mew("mallory")
    dana = await person("dana")
    dialogs: list[str] = []
    dana.on("dialog", lambda d: dialogs.append(d.message))
    for text in XSS:
        await mallory.send(_chat(text))
    rows = dana.locator('#messages li.msg[data-from="mallory"]')
    await expect(rows).to_have_count(len(XSS))
    for n in range(len(XSS)):
        await rows.nth(n).hover()  # mouse-over handlers, if any had survived
    messages = dana.locator("#messages")
    dangerous = "script, img, iframe, svg, style, object, embed, details, form, input, base"
    assert await messages.locator(dangerous).count() == 0
    handlers = await messages.evaluate(
        "m => [...m.querySelectorAll('*')].flatMap(e => [...e.attributes]"
        ".filter(a => a.name.startsWith('on')).map(a => e.tagName + ' ' + a.name))"
    )
    assert handlers == []
    links = await messages.locator("a").evaluate_all(
        "as => as.map(a => [new URL(a.href).protocol, a.rel, a.getAttribute('href')])"
    )
    assert links, "the safe links are still links"
    for protocol, rel, href in links:
        assert protocol == "https:" and "noopener" in rel, (protocol, rel, href)
    assert await dana.evaluate("window.pwned") is None
    assert dialogs == []
    # what was sent is shown as text
    await expect(rows.nth(0)).to_contain_text("<script>window.pwned = 'script'</script>")
    await expect(rows.nth(9)).to_contain_text("[click me](javascript:window.pwned='link')")
    await expect(rows.nth(19).locator("a.md-image")).to_have_text("image: tracker")


async def test_callbacks_pending_for_the_person_and_their_fire(
    tmp_path: Path, pages: OpenPage
) -> None:
    gw = await start_dash_gateway(
        tmp_path, limits=Limits(rate_per_s=0)
    )  # engines on a manual clock
    try:
        dana = await pages(f"{gw.http}/chat")
        await sign_in(dana, "dana")
        await _write(dana, "stretching soon @@cb:30s@@ time to stretch")
        mine = _row(dana, "stretching soon")
        await expect(mine).to_have_attribute("data-status", "sent")
        await expect(mine.locator(".body")).to_have_text("stretching soon")  # as others see it
        await expect(dana.locator("#callbacks")).to_have_text("1 callback pending")
        await _write(dana, "@@cb:60s@@ and drink water")  # only a marker: nothing is relayed
        kept = _row(dana, "and drink water")
        await expect(kept).to_have_attribute("data-status", "kept")
        await expect(kept.locator(".hint")).to_contain_text("relayed nothing")
        await expect(dana.locator("#callbacks")).to_have_text("2 callbacks pending")
        gw.tick(31)
        fired = dana.locator('#dm-list button.conv[data-conv="@system:gateway"]')
        await expect(fired).to_contain_text("gateway (callbacks)")
        await expect(fired.locator(".unread")).to_contain_text("1")
        await expect(dana.locator("#callbacks")).to_have_text("1 callback pending")
        await fired.click()
        await expect(dana.locator("#messages li.callback")).to_have_text(
            "callback yours: time to stretch"
        )
        await expect(dana.locator("#composer-input")).to_be_disabled()
    finally:
        await stop_gateway(gw)


async def test_channels_unread_counts_and_who_is_online_asleep_or_offline(
    gw: RunningGateway, person: Any
) -> None:
    sleeper = await gw.mew("sleeper")
    leaver = await gw.mew("leaver")
    dana = await person("dana")
    erin = await person("erin")
    # create a channel (it opens), erin joins it from the list of other channels
    await dana.locator("#browse summary").click()
    await dana.locator("#create-input").fill("ideas")
    await dana.locator("#create-input").press("Enter")
    await expect(dana.locator("#conv-title")).to_have_text("#ideas")
    await erin.locator("#browse summary").click()
    await erin.locator('#other-channels button.join[data-channel="#ideas"]').click()
    await expect(erin.locator("#conv-title")).to_have_text("#ideas")
    await expect(dana.locator("#conv-info")).to_have_text("2 members")
    # unread counts: erin writes in #general and #ideas; dana reads #ideas
    await _write(erin, "an idea")
    await expect(_row(dana, "an idea")).to_be_visible()
    await erin.keyboard.press("Alt+ArrowUp")  # the previous conversation: #general
    await expect(erin.locator("#conv-title")).to_have_text("#general")
    await _write(erin, "one for @dana")
    await _write(erin, "and another")
    general = dana.locator('#channel-list button.conv[data-conv="#general"]')
    await expect(general.locator(".unread")).to_contain_text("2")
    await expect(general.locator(".unread")).to_have_class("unread mention")  # she was named
    await expect(dana).to_have_title("(2) hubbub chat")
    await general.click()
    await expect(general.locator(".unread")).to_have_count(0)
    await expect(_row(dana, "one for @dana")).to_have_class("msg mention-me")
    # leave #ideas: it goes back to the list of other channels
    await dana.locator('#channel-list button.conv[data-conv="#ideas"]').click()
    await dana.locator("#leave-btn").click()
    await expect(dana.locator('#channel-list button.conv[data-conv="#ideas"]')).to_have_count(0)
    await expect(dana.locator("#conv-title")).to_have_text("#general")
    await erin.locator('#channel-list button.conv[data-conv="#ideas"]').click()
    await expect(erin.locator("#conv-info")).to_have_text("1 member")
    # presence: asleep with a countdown, then offline
    await sleeper.send(_chat("@@sleep:90s@@"))
    row = dana.locator('#people .person[data-pid="sleeper"]')
    await expect(row).to_have_attribute("data-presence", "sleeping")
    await expect(row.locator(".presence")).to_have_text(
        re.compile(r"^asleep · wakes in 1m [0-3]\ds$")
    )
    await leaver.close()
    await expect(dana.locator('#people .person[data-pid="leaver"]')).to_have_attribute(
        "data-presence", "offline"
    )


async def test_a_message_written_while_the_gateway_is_down_is_sent_once_it_is_back(
    tmp_path: Path, pages: OpenPage
) -> None:
    gw = await start_gateway(tmp_path, limits=Limits(rate_per_s=0))
    dana = await pages(f"{gw.http}/chat", allow=GATEWAY_DOWN)
    await sign_in(dana, "dana")
    await _write(dana, "before the restart")
    await expect(_row(dana, "before the restart")).to_have_attribute("data-status", "sent")
    await stop_gateway(gw)
    await expect(dana.locator("#conn")).to_have_text("reconnecting…")
    await expect(dana.locator("#banner")).to_contain_text("reconnecting")
    await _write(dana, "written while it was down")
    pending = _row(dana, "written while it was down")
    await expect(pending).to_have_attribute("data-status", "pending")
    await expect(pending.locator(".state")).to_have_text("sending…")
    gw = await start_gateway(tmp_path, limits=Limits(rate_per_s=0), port=gw.port)
    try:
        await expect(pending).to_have_attribute("data-status", "sent")
        await expect(dana.locator("#banner")).to_be_hidden()
        await expect(_row(dana, "before the restart")).to_have_count(1)
        bob = await gw.mew("bob")
        history = [m["payload"]["text"] for m in await _history(bob)]
        assert history == ["before the restart", "written while it was down"]
    finally:
        await stop_gateway(gw)


async def _history(client: WsClient) -> list[dict[str, Any]]:
    await client.send({"kind": "history/request", "payload": {"channel": "#general", "limit": 50}})
    answer = await client.expect("history/response")
    return [m for m in answer["payload"]["messages"] if m["kind"] == "chat"]


async def test_a_new_gateway_history_keeps_what_the_page_showed(
    tmp_path: Path, pages: OpenPage
) -> None:
    gw = await start_gateway(tmp_path / "first", limits=Limits(rate_per_s=0))
    dana = await pages(f"{gw.http}/chat", allow=GATEWAY_DOWN)
    await sign_in(dana, "dana")
    await _write(dana, "said in the old history")
    await expect(_row(dana, "said in the old history")).to_have_attribute("data-status", "sent")
    await stop_gateway(gw)
    # the gateway comes back on the same port with another data directory: a new epoch
    gw = await start_gateway(tmp_path / "second", limits=Limits(rate_per_s=0), port=gw.port)
    try:
        note = dana.locator("#messages li.note")
        await expect(note).to_contain_text("the gateway's history was replaced")
        await expect(_row(dana, "said in the old history")).to_have_count(1)  # still shown
        await _write(dana, "said in the new history")
        await expect(_row(dana, "said in the new history")).to_have_attribute("data-status", "sent")
        texts = await dana.locator("#messages li").all_inner_texts()
        order = [n for n, t in enumerate(texts) if "history" in t]
        assert order == sorted(order) and len(order) == 3
    finally:
        await stop_gateway(gw)
