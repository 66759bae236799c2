"""Look-alike ids in the web chat (issue 21, item 15): ``alice`` next to ``aIice``,
``#general`` next to ``#genera1``. Ids and channel names are shown in a monospace face, where
I, l and 1 look different, in Debian's chromium."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.async_api import expect

from hubbub.server.config import Limits
from tests.conftest import MakeGateway, RunningGateway

FONT_OF = "e => getComputedStyle(e).fontFamily"


@pytest.fixture
async def gw(gateways: MakeGateway) -> RunningGateway:
    """Look-alikes are refused by default (test_lookalike_names.py); allowed here to show them."""
    return await gateways(limits=Limits(rate_per_s=0, allow_lookalike_names=True))


async def test_ids_and_channel_names_are_shown_in_a_face_that_tells_i_from_l(
    gw: RunningGateway, person: Any
) -> None:
    alice = await gw.mew("alice")
    await alice.send({"kind": "channel/create", "payload": {"channel": "#genera1"}})
    await alice.expect("channel/joined")
    page = await person("aIice")
    await alice.send({"kind": "chat", "channel": "#general", "payload": {"text": "hi @aIice"}})
    names = [
        page.locator("#me"),
        page.locator("#conv-title"),
        page.locator('.person[data-pid="alice"] .name'),
        page.locator('.person[data-pid="aIice"] .name'),
        page.locator('#messages li.msg[data-from="alice"] .from'),
        page.locator('#messages li.msg[data-from="alice"] .mention'),
        page.locator('#channel-list .conv[data-conv="#general"] .label'),
        page.locator("#other-channels .label", has_text="#genera1"),
    ]
    fonts = set()
    for name in names:
        await expect(name).to_have_count(1)
        fonts.add(await name.evaluate(FONT_OF))
    assert len(fonts) == 1 and "monospace" in fonts.pop()
    body = await page.locator("body").evaluate(FONT_OF)
    assert "monospace" not in body  # the rest of the page keeps its face
