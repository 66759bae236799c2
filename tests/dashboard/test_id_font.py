"""Look-alike ids on the dashboard (issue 21, item 15): ``alice`` next to ``aIice``, ``#general``
next to ``#genera1``. Ids and channel names are shown in a monospace face, where I, l and 1 look
different, in Debian's chromium."""

from __future__ import annotations

from pathlib import Path

from playwright.async_api import expect

from hubbub.server.config import Limits
from tests.conftest import stop_gateway
from tests.dashboard.conftest import WatchedPage, start_dash_gateway
from tests.engines_live.conftest import EngineGateway

FONT_OF = "e => getComputedStyle(e).fontFamily"


async def test_ids_and_channel_names_are_shown_in_a_face_that_tells_i_from_l(
    tmp_path: Path, watched: WatchedPage
) -> None:
    # look-alikes are refused by default (test_lookalike_names.py); allowed here to show them
    limits = Limits(rate_per_s=0, allow_lookalike_names=True)
    dgw = await start_dash_gateway(tmp_path, limits=limits)
    try:
        await _shown_apart(dgw, watched)
    finally:
        await stop_gateway(dgw)


async def _shown_apart(dgw: EngineGateway, watched: WatchedPage) -> None:
    await dgw.mew("alice")
    lookalike = await dgw.mew("aIice")
    await lookalike.send({"kind": "channel/create", "payload": {"channel": "#genera1"}})
    await lookalike.expect("channel/joined")
    page = watched.page
    await page.goto(f"{dgw.http}/dashboard")
    await expect(page.locator("#conn")).to_have_attribute("data-state", "live")
    names = [
        page.locator('.participant[data-pid="alice"] .name'),
        page.locator('.participant[data-pid="aIice"] .name'),
        page.locator('.channel[data-channel="#general"] .name'),
        page.locator('.channel[data-channel="#genera1"] .name'),
        page.locator('.channel[data-channel="#genera1"] .members'),
    ]
    fonts = set()
    for name in names:
        await expect(name).to_be_visible()
        fonts.add(await name.evaluate(FONT_OF))
    assert len(fonts) == 1 and "monospace" in fonts.pop()
    body = await page.locator("body").evaluate(FONT_OF)
    assert "monospace" not in body  # the rest of the page keeps its face
