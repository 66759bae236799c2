"""DMs load as channels do: the last page on page load, older pages on scroll, resume by seq.

The DMs of a person are one stream (numbered per space), so a page of them may hold several
conversations; a person scrolling up in one gets pages until it has older messages there.
"""

from __future__ import annotations

from typing import Any

from playwright.async_api import Page, expect

from tests.conftest import RunningGateway, WsClient


def _dm(to: str, text: str) -> dict[str, Any]:
    return {"kind": "chat", "to": [to], "private": True, "payload": {"text": text}}


async def _send_dms(sender: WsClient, pid: str, texts: list[str]) -> None:
    """``pid`` writes ``texts`` to dana, each acknowledged (stored) before this returns."""
    for text in texts:
        await sender.send(_dm("dana", text))
    for _ in texts:
        await sender.next_where(lambda f: f.get("kind") == "chat" and f.get("from") == pid)


async def _texts(page: Page, sender: str) -> list[str]:
    rows = page.locator(f'#messages li.msg[data-from="{sender}"] .body')
    return [t.strip() for t in await rows.all_inner_texts()]


async def _open_dm(page: Page, pid: str) -> None:
    await page.locator(f'#people .person[data-pid="{pid}"] button.name').click()
    await expect(page.locator("#conv-title")).to_have_text(f"{pid} (direct)")


async def test_dms_load_the_last_page_then_older_pages_on_scroll_and_resume_by_seq(
    gw: RunningGateway, person: Any
) -> None:
    dana = await person("dana")  # known to the space: DMs to her are stored
    old, bob, carol = [await gw.mew(pid) for pid in ("old", "bob", "carol")]
    # her DM stream: old 1-5, bob 6-205, carol 206-215
    await _send_dms(old, "old", [f"old {n}" for n in range(1, 6)])
    await _send_dms(bob, "bob", [f"bob {n}" for n in range(1, 201)])
    await _send_dms(carol, "carol", [f"carol {n}" for n in range(1, 11)])
    carol_dm = dana.locator('#dm-list button.conv[data-conv="@carol"]')
    await expect(carol_dm.locator(".unread")).to_contain_text("10")

    # a new page load: the last page only (50 DMs: bob 161-200 and carol's 10)
    await dana.reload()
    await expect(dana.locator("#conn")).to_have_attribute("data-state", "live")
    await expect(carol_dm.locator(".unread")).to_contain_text("10")
    await expect(dana.locator('#dm-list button.conv[data-conv="@old"]')).to_have_count(0)
    await _open_dm(dana, "bob")
    rows = dana.locator('#messages li.msg[data-from="bob"]')
    await expect(rows).to_have_count(40)
    assert await _texts(dana, "bob") == [f"bob {n}" for n in range(161, 201)]
    older = dana.locator("#older-btn")
    await expect(older).to_be_visible()
    timeline = dana.locator("#timeline")
    await timeline.evaluate("t => { t.scrollTop = 0; }")
    await expect(rows).to_have_count(90)

    # old's DMs are three pages further back: opening their conversation looks back for them
    await _open_dm(dana, "old")
    await expect(dana.locator('#messages li.msg[data-from="old"]')).to_have_count(5)
    assert await _texts(dana, "old") == [f"old {n}" for n in range(1, 6)]
    await expect(older).to_be_hidden()  # the start of her DMs
    await dana.locator('#dm-list button.conv[data-conv="@bob"]').click()
    await expect(rows).to_have_count(200)  # the pages between came on the way

    # a dropped connection resumes by DM seq: what came meanwhile once, in order
    dana_session = gw.router.spaces["default"].online["dana"]
    dana_session.conn.transport.abort()
    await _send_dms(bob, "bob", ["late 1", "late 2", "late 3"])
    await expect(rows).to_have_count(203)
    await expect(dana.locator("#conn")).to_have_text("connected")
    texts = await _texts(dana, "bob")
    assert texts == [f"bob {n}" for n in range(1, 201)] + ["late 1", "late 2", "late 3"]
    seqs = [int(s) for s in await rows.evaluate_all("rs => rs.map(r => r.dataset.seq)")]
    assert seqs == sorted(seqs) and len(set(seqs)) == 203
