"""How long the web chat takes to render hostile Markdown, in headless Chromium (issue 21).

Usage::

    .venv/bin/python benchmarks/markdown_render.py [--module PATH] [--sizes 9000,36000]
        [--cases heading,stars] [--max-seconds 20]

Loads the chat's Markdown module (``src/hubbub/server/web/chat/markdown.js``, or ``--module``:
e.g. an older version written out with ``git show REV:src/...``) into a blank page of Debian's
chromium, served over HTTP from the folder above the module's own (so that its imports, such
as ``../common/mentions.js``, resolve: write an older version out with its neighbours), and
times ``renderMarkdown`` on each adversarial message at each size (median of 3;
one run past 100 ms). A case that took more than ``--max-seconds`` / 16 is not measured at the
next size (a quadratic parser would take 16 times as long at 4 times the size). The time is
how long the tab of every reader of such a message is frozen. Numbers:
docs/reliability.md#hostile-markdown.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
from pathlib import Path

from aiohttp import web
from playwright.async_api import async_playwright

CHROMIUM = os.environ.get("HUBBUB_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
"""Debian's chromium, as the browser tests use it."""
MODULE = Path(__file__).resolve().parents[1] / "src/hubbub/server/web/chat/markdown.js"

CASES: dict[str, str] = {
    "heading": "'# a' + ' '.repeat(n) + 'b'",
    "fence": "'```' + ' '.repeat(n) + '`'",
    "stars": "'*a '.repeat(n / 3)",
    "underscores": "'_a '.repeat(n / 3)",
    "doubles": "'**a '.repeat(n / 4)",
    "brackets": "'['.repeat(n)",
    "links": "'[a]('.repeat(n / 4)",
    "bare-urls": "'http://['.repeat(n / 8)",
    "closing-parens": "'https://a.example/' + ')'.repeat(n)",
    "trailing-dots": "'https://a.example/' + '.'.repeat(n) + 'x'",
}

TIME = """async ([url, expr, n]) => {
  const { renderMarkdown } = await import(url);
  const text = eval(expr);
  const runs = [];
  for (let k = 0; k < 3; k++) {
    const start = performance.now();
    document.createElement("div").append(renderMarkdown(text));
    runs.push(performance.now() - start);
    if (runs[k] > 100) break;
  }
  runs.sort((a, b) => a - b);
  return runs[Math.floor(runs.length / 2)];
}"""


async def main() -> None:
    """Time every case at every size and print a table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--module", type=Path, default=MODULE)
    parser.add_argument("--sizes", default="9000,36000")
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--max-seconds", type=float, default=20.0)
    args = parser.parse_args()
    module = args.module.resolve()
    if not module.is_file():
        raise SystemExit(f"{module}: no such file (--module names a markdown.js)")
    sizes = [int(s) for s in args.sizes.split(",")]
    app = web.Application()
    app.router.add_static("/", module.parent.parent)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    base = f"http://127.0.0.1:{port}"
    url = f"{base}/{module.parent.name}/{module.name}"
    try:
        await _time_cases(url, base, sizes, args)
    finally:
        await runner.cleanup()


async def _time_cases(url: str, base: str, sizes: list[int], args: argparse.Namespace) -> None:
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, headless=True)
        page = await browser.new_page()
        await page.goto(f"{base}/")  # same origin as the module (a 404 page is fine)
        print(f"{'case':<16}" + "".join(f"{'n=' + str(n):>14}" for n in sizes))
        for name in args.cases.split(","):
            row = f"{name:<16}"
            for n in sizes:
                ms = await page.evaluate(TIME, [url, CASES[name], n])
                row += f"{ms:>11.1f} ms"
                if ms / 1000 > args.max_seconds / 16:
                    row += "  (larger skipped)"
                    break
            print(row, flush=True)
        await browser.close()


if __name__ == "__main__":
    asyncio.run(main())
