"""The gateway's notes on a person's message, in the web chat: "no agent took this" under an
open question nobody claimed (on a manual engine clock: no waiting), and an absent
addressee's note under a message to it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import Page, expect

from tests.conftest import stop_gateway
from tests.engines_live.conftest import EngineGateway, start_engine_gateway


@pytest.fixture
async def gw(tmp_path: Path) -> AsyncIterator[EngineGateway]:
    """The gateway the web chat fixtures use, on a manual engine clock."""
    gateway = await start_engine_gateway(tmp_path)
    yield gateway
    await stop_gateway(gateway)


async def _ask(page: Page, text: str) -> str:
    await page.locator("#composer-input").fill(text)
    await page.locator("#composer-input").press("Enter")
    question = page.locator("#messages li.msg", has_text=text)
    await expect(question).to_have_attribute("data-status", "sent")
    msg_id = await question.get_attribute("data-id")
    assert msg_id
    return msg_id


def _floor_line(page: Page, msg_id: str) -> Any:
    return page.locator(f'#messages li.msg[data-id="{msg_id}"] .floor-line')


async def test_an_open_question_nobody_took_says_so(gw: EngineGateway, person: Any) -> None:
    maths = await gw.mew("maths", kind="agent")
    dana = await person("dana")
    msg_id = await _ask(dana, "anyone know Lisbon?")
    await maths.next_where(lambda f: f.get("id") == msg_id)
    await gw.synced(maths)
    await expect(_floor_line(dana, msg_id)).to_have_count(0)
    gw.tick(31)
    await expect(_floor_line(dana, msg_id)).to_have_text(
        "no agent took this: nobody claimed or answered it within 30 s"
    )
    await maths.send(  # someone answers after all: the note gives way
        {
            "kind": "chat",
            "channel": "#general",
            "correlation_id": [msg_id],
            "payload": {"text": "Lisbon is lovely"},
        }
    )
    await expect(_floor_line(dana, msg_id)).to_have_count(0)


async def test_a_message_to_an_offline_agent_says_it_is_offline(
    gw: EngineGateway, person: Any
) -> None:
    travel = await gw.mew("travel", kind="agent")
    await travel.close()
    dana = await person("dana")
    msg_id = await _ask(dana, "@travel trains to Porto?")
    await expect(_floor_line(dana, msg_id)).to_have_text(
        "travel is offline; it will see this when it reconnects"
    )
