"""Hostile Markdown (issue 21, item 7): no message may freeze its readers' tabs.

The chat's Markdown (``web/chat/markdown.js``) used to find where a span closes by scanning
from every opener, and matched headings with a backtracking regex: ``"# a" + " " * 9000 +
"b"`` froze every viewer's tab for 39 s, and every later viewer's too (history replays it);
60 KB of ``[`` or of ``*a `` took seconds. The parser is now linear. Each case below took
seconds to minutes before (the test then fails on its time limit: there is no timed assertion)
and renders at once now; a seeded fuzz corpus checks that whatever renders stays inert.
"""

from __future__ import annotations

import random
from typing import Any

from playwright.async_api import expect

from tests.conftest import RunningGateway
from tests.webchat.conftest import OpenPage

SIZE = 60_000
"""Characters per adversarial message (the gateway's payload limit is 64 KiB)."""

ADVERSARIAL: dict[str, str] = {
    "heading": "# a" + " " * SIZE + "b",
    "fence": "```" + " " * SIZE + "`",
    "rule": "---" + " " * SIZE + "x",
    "stars": "*a " * (SIZE // 3),
    "underscores": "_a " * (SIZE // 3),
    "doubles": "**a " * (SIZE // 4),
    "strikes": "~~a " * (SIZE // 4),
    "brackets": "[" * SIZE,
    "links": "[a](" * (SIZE // 4),
    "images": "![a](" * (SIZE // 5),
    "backticks": "``a`" * (SIZE // 4),
    "autolinks": "<http://a" * (SIZE // 9),
    "bare-urls": "http://[" * (SIZE // 8),
    "closing-parens": "https://a.example/" + ")" * SIZE,
    "trailing-dots": "https://a.example/" + "." * SIZE + "x",
    "quotes": "> " * (SIZE // 2),
    "escapes": "\\" * SIZE,
    "mentions": "@a" * (SIZE // 2),
}

RENDER = """async (texts) => {
  const { renderMarkdown } = await import("/web/chat/markdown.js");
  return texts.map((text) => {
    const box = document.createElement("div");
    box.append(renderMarkdown(text, { me: "dana" }));
    return [box.textContent.length, [...box.querySelectorAll("*")].map((e) => e.tagName)];
  });
}"""

ALLOWED_TAGS = {"P", "BR", "STRONG", "EM", "DEL", "CODE", "PRE", "BLOCKQUOTE", "UL", "OL", "LI"}
ALLOWED_TAGS |= {"HR", "A", "SPAN"}


async def test_adversarial_messages_render_at_once(gw: RunningGateway, pages: OpenPage) -> None:
    page = await pages(f"{gw.http}/chat")
    rendered = await page.evaluate(RENDER, list(ADVERSARIAL.values()))
    for (name, text), (shown, tags) in zip(ADVERSARIAL.items(), rendered, strict=True):
        assert shown >= len(text) // 5, (name, shown)  # rendered, and not swallowed
        assert set(tags) <= ALLOWED_TAGS, (name, set(tags) - ALLOWED_TAGS)
    shown, tags = rendered[0]
    assert tags == ["P", "STRONG"] and shown == SIZE + 2  # a heading, all of it


async def test_a_freezing_heading_is_shown_live_and_from_history(
    gw: RunningGateway, person: Any
) -> None:
    mallory = await gw.mew("mallory")
    dana = await person("dana")
    texts = ["# a" + " " * 9000 + "b", ADVERSARIAL["brackets"], ADVERSARIAL["closing-parens"]]
    for text in texts:
        await mallory.send({"kind": "chat", "channel": "#general", "payload": {"text": text}})
    for page in (dana, await person("erin")):  # live, then replayed from history
        rows = page.locator('#messages li.msg[data-from="mallory"]')
        await expect(rows).to_have_count(len(texts))
        await expect(rows.nth(0).locator(".md-heading")).to_have_count(1)
        await page.locator("#composer-input").fill("still responsive")
        await page.locator("#composer-input").press("Enter")
        mine = page.locator("#messages li.msg", has_text="still responsive")
        await expect(mine).not_to_have_count(0)


TOKENS = [
    "*", "**", "_", "__", "~~", "`", "```", "[", "]", "(", ")", "![", "<", ">", "\\", "#", "# ",
    "> ", "- ", "1. ", "---", "\n", " ", "a", "b", "@dana", "@x", "http://", "https://a.b/",
    "mailto:x@y", "javascript:", "<script>", "\"", "'", "&#106;", "\t", "é",
]  # fmt: skip


def _fuzz_corpus(seed: int, count: int) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choices(TOKENS, k=rng.randint(1, 400))) for _ in range(count)]


async def test_fuzzed_markdown_renders_only_inert_elements(
    gw: RunningGateway, pages: OpenPage
) -> None:
    page = await pages(f"{gw.http}/chat")
    corpus = _fuzz_corpus(21, 600)
    rendered = await page.evaluate(RENDER, corpus)
    for text, (_, tags) in zip(corpus, rendered, strict=True):
        assert set(tags) <= ALLOWED_TAGS, (text, set(tags) - ALLOWED_TAGS)
    links = await page.evaluate(
        """async (texts) => {
          const { renderMarkdown } = await import("/web/chat/markdown.js");
          const box = document.createElement("div");
          for (const text of texts) box.append(renderMarkdown(text));
          return [...box.querySelectorAll("a")].map((a) => [new URL(a.href).protocol, a.rel]);
        }""",
        corpus,
    )
    assert links, "the corpus makes some links"
    for protocol, rel in links:
        assert protocol in ("http:", "https:", "mailto:") and "noopener" in rel
