"""A person asks in the web chat, one agent answers: the demo's four agents (maths, travel,
chef, coder on the offline model, with the calculator) on a real gateway, a person in
Chromium.

The page records every "is answering" line that appears above the message box (a
MutationObserver), so that a test can say how often each agent appeared, not only what the
page shows at the end. Every wait is on visible state or on the agents' own decisions.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.async_api import Page, expect

from hubbub.demo.cast import SKILLS
from hubbub.protocol.ids import iso_to_ms
from hubbub.sdk import Agent
from tests.conftest import RunningGateway
from tests.floor.test_agents import settled
from tests.webchat.conftest import WAIT_S

RECORD = """() => {
  window.appeared = [];
  const box = document.getElementById("activity");
  let shown = new Set();
  new MutationObserver(() => {
    const now = new Set([...box.querySelectorAll(".answering")].map((row) => row.dataset.pid));
    for (const pid of now) if (!shown.has(pid)) window.appeared.push(pid);
    shown = now;
  }).observe(box, { childList: true, subtree: true });
}"""
"""Record in ``window.appeared`` each agent every time its "is answering" line appears."""


async def _four(cast: Any) -> list[Agent]:
    agents = [await cast(name, 0.5) for name in SKILLS]
    for agent in agents:
        await agent.wait_for_tools("calculator", timeout=WAIT_S)
    return agents


async def _decided(agents: list[Agent], msg_id: str) -> dict[str, list[str]]:
    """Once every agent has decided about ``msg_id`` and settled: the rules each applied."""
    await agents[0].wait_until(
        lambda: all(any(r.envelope.id == msg_id for r in a.decisions) for a in agents), WAIT_S
    )
    await settled(*agents, timeout=WAIT_S)
    return {a.id: [r.decision.rule for r in a.decisions if r.envelope.id == msg_id] for a in agents}


async def _ask(page: Page, text: str) -> str:
    await page.evaluate(RECORD)
    await page.locator("#composer-input").fill(text)
    await page.locator("#composer-input").press("Enter")
    question = page.locator("#messages li.msg", has_text=text)
    await expect(question).to_have_attribute("data-status", "sent")
    msg_id = await question.get_attribute("data-id")
    assert msg_id
    return msg_id


def _answers(page: Page) -> Any:
    names = ",".join(f'#messages li.msg:not(.activity)[data-from="{n}"]' for n in SKILLS)
    return page.locator(names)


async def test_a_person_mentions_maths_among_four_agents_and_maths_alone_answers(
    gw: RunningGateway, person: Any, cast: Any
) -> None:
    agents = await _four(cast)
    watcher = await gw.mew("watcher", kind="human")
    dana = await person("dana")
    msg_id = await _ask(dana, "@maths what is 6*7?")
    sent = await watcher.next_where(lambda f: f.get("id") == msg_id)
    assert sent["to"] == ["maths"]  # the page addressed it to the one it mentions
    question = dana.locator(f'#messages li.msg[data-id="{msg_id}"]')
    await expect(question.locator(".mention")).to_have_text("@maths")
    await expect(_answers(dana)).to_have_count(1)
    await expect(_answers(dana)).to_have_attribute("data-from", "maths")
    await expect(_answers(dana).locator(".body")).to_have_text("6 * 7 = 42.")
    await expect(dana.locator("#activity")).to_be_empty()
    rules = await _decided(agents, msg_id)
    assert rules == {
        "maths": ["direct"],  # in `to`: addressed directly
        "travel": ["addressed_to_others"],
        "chef": ["addressed_to_others"],
        "coder": ["addressed_to_others"],
    }
    assert await dana.evaluate("window.appeared") == ["maths"]  # the indicator, once
    await expect(_answers(dana)).to_have_count(1)  # and still one answer once all settled


@pytest.mark.parametrize(
    ("text", "who"),
    [("hello everyone, who can help me plan dinner?", "chef"), ("what is 12*7?", "maths")],
)
async def test_a_persons_open_question_is_answered_once_by_the_skilled_agent(
    gw: RunningGateway, person: Any, cast: Any, text: str, who: str
) -> None:
    agents = await _four(cast)
    dana = await person("dana")
    msg_id = await _ask(dana, text)
    await expect(_answers(dana)).to_have_count(1)
    await expect(_answers(dana)).to_have_attribute("data-from", who)
    await expect(dana.locator("#activity")).to_be_empty()
    rules = await _decided(agents, msg_id)
    assert all(r == ["classifier"] for r in rules.values()), rules
    assert await dana.evaluate("window.appeared") == [who]
    await expect(_answers(dana)).to_have_count(1)


def _floor_line(page: Page, msg_id: str) -> Any:
    return page.locator(f'#messages li.msg[data-id="{msg_id}"] .floor-line')


async def test_a_late_joiner_sees_who_answered_an_earlier_question(
    gw: RunningGateway, person: Any, cast: Any
) -> None:
    agents = await _four(cast)
    dana = await person("dana")
    msg_id = await _ask(dana, "what is 12*7?")
    await expect(_answers(dana)).to_have_count(1)
    await expect(_floor_line(dana, msg_id)).to_have_text(re.compile(r"^answered by maths\b"))
    await _decided(agents, msg_id)
    seen_live = await _floor_line(dana, msg_id).inner_text()
    erin = await person("erin")  # signs in afterwards: the page has only the history
    await expect(erin.locator(f'#messages li.msg[data-id="{msg_id}"]')).to_be_visible()
    await expect(_floor_line(erin, msg_id)).to_have_text(seen_live)


async def test_the_floor_line_from_history_names_who_yielded(
    gw: RunningGateway, person: Any
) -> None:
    maths, chef, travel = [await gw.mew(name) for name in ("maths", "chef", "travel")]
    dana = await person("dana")
    msg_id = await _ask(dana, "who can help?")
    asked = await maths.next_where(lambda f: f.get("id") == msg_id)
    t0 = iso_to_ms(asked["ts"])
    for agent, start in ((maths, 10), (chef, 30), (travel, 20)):
        await agent.send(
            {
                "kind": "floor/responding-to",
                "channel": "#general",
                "payload": {"msg_id": msg_id, "started_at": t0 + start},
            }
        )
    await chef.expect("floor/yield")
    await travel.expect("floor/yield")
    await maths.send(
        {
            "kind": "chat",
            "channel": "#general",
            "correlation_id": [msg_id],
            "payload": {"text": "me"},
        }
    )
    line = "answered by maths · chef, travel yielded to maths"
    await expect(_floor_line(dana, msg_id)).to_have_text(line)
    erin = await person("erin")
    await expect(_floor_line(erin, msg_id)).to_have_text(line)


async def test_people_who_left_stay_people_in_the_list(gw: RunningGateway, person: Any) -> None:
    erin = await person("erin")
    maths = await gw.mew("maths")
    dana = await person("dana")
    row = 'li.person[data-pid="{}"]'
    await expect(dana.locator(row.format("erin"))).to_have_attribute("data-presence", "online")
    await erin.context.close()  # erin closes the browser
    await maths.close()
    for page in (dana, await person("fay")):  # fay loads the page afterwards
        for pid in ("erin", "maths"):
            await expect(page.locator(row.format(pid))).to_have_attribute(
                "data-presence", "offline"
            )
        await expect(page.locator(row.format("erin")).locator(".badge")).to_have_count(0)
        await expect(page.locator(row.format("maths")).locator(".badge")).to_have_text("agent")
