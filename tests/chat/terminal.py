"""A real pseudo-terminal for ``hubbub chat`` tests: pexpect runs the program, and a small
VT100 screen model replays what it wrote, so tests read the screen as a person sees it.

prompt_toolkit redraws only the cells that changed, so the raw byte stream does not contain
the visible text in one piece; the :class:`Screen` applies the cursor movements and erasures
that prompt_toolkit's renderer uses and yields the rows as text.
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
from pathlib import Path
from typing import Any

import pexpect
from wcwidth import wcwidth

from hubbub.cli.options import GATEWAY_ENV, ID_ENV, SPACE_ENV, TOKEN_ENV
from tests.timing import WAIT

ROWS, COLS = 30, 120
ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 2 * WAIT
START_TIMEOUT = 6 * WAIT  # the first screen: Python and the SDK import slowly on a busy machine

_CSI = re.compile(r"\x1b\[([0-9;?<=>]*)([ -/]*)([@-~])")
_OSC = re.compile(r"\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)")


class Screen:
    """The rows and columns of a terminal, fed with what a program writes."""

    def __init__(self, rows: int = ROWS, cols: int = COLS) -> None:
        self.rows, self.cols = rows, cols
        self.cells = [[" "] * cols for _ in range(rows)]
        self.x = self.y = 0
        self._pending = ""

    def feed(self, data: str) -> None:
        """Apply output (escape sequences split across calls are kept for the next one)."""
        data = self._pending + data
        self._pending = ""
        i = 0
        while i < len(data):
            ch = data[i]
            if ch == "\x1b":
                match = _CSI.match(data, i) or _OSC.match(data, i)
                if match is None:
                    if len(data) - i < 64 and not data[i + 1 : i + 2].isalpha():
                        self._pending = data[i:]  # incomplete: wait for the rest
                        return
                    i += 2  # a two-character escape (ESC =, ESC >, ...): ignore
                    continue
                if match.re is _CSI:
                    self._csi(match.group(1), match.group(2), match.group(3))
                i = match.end()
                continue
            self._char(ch)
            i += 1

    def _char(self, ch: str) -> None:
        if ch == "\r":
            self.x = 0
        elif ch == "\n":
            self.y = min(self.rows - 1, self.y + 1)
        elif ch == "\b":
            self.x = max(0, self.x - 1)
        elif ch in "\x07\x00":
            pass
        else:
            width = wcwidth(ch)
            if width < 0:
                return
            if 0 <= self.y < self.rows and 0 <= self.x < self.cols:
                self.cells[self.y][self.x] = ch
                if width == 2 and self.x + 1 < self.cols:
                    self.cells[self.y][self.x + 1] = ""
            self.x = min(self.cols - 1, self.x + max(width, 1))

    def _csi(self, params: str, inter: str, final: str) -> None:
        if params.startswith("?") or inter:
            if params == "?1049":
                self._clear()  # entering or leaving the alternate screen
            return
        nums = [int(p) if p else 0 for p in params.split(";")] if params else []
        n = nums[0] if nums and nums[0] else 1
        if final == "H" or final == "f":
            row = nums[0] if nums and nums[0] else 1
            col = nums[1] if len(nums) > 1 and nums[1] else 1
            self.y, self.x = min(self.rows, row) - 1, min(self.cols, col) - 1
        elif final == "A":
            self.y = max(0, self.y - n)
        elif final == "B":
            self.y = min(self.rows - 1, self.y + n)
        elif final == "C":
            self.x = min(self.cols - 1, self.x + n)
        elif final == "D":
            self.x = max(0, self.x - n)
        elif final == "G":
            self.x = min(self.cols, n) - 1
        elif final == "K":
            mode = nums[0] if nums else 0
            row = self.cells[self.y]
            start, end = (self.x, self.cols) if mode == 0 else (0, self.x + 1)
            if mode == 2:
                start, end = 0, self.cols
            for col in range(start, end):
                row[col] = " "
        elif final == "J":
            mode = nums[0] if nums else 0
            if mode == 2:
                self._clear(home=False)
            else:
                self.cells[self.y][self.x :] = [" "] * (self.cols - self.x)
                for row in range(self.y + 1, self.rows):
                    self.cells[row] = [" "] * self.cols

    def _clear(self, home: bool = True) -> None:
        self.cells = [[" "] * self.cols for _ in range(self.rows)]
        if home:
            self.x = self.y = 0

    def lines(self) -> list[str]:
        """The rows as text, trailing blanks removed."""
        return ["".join(row).rstrip() for row in self.cells]

    def text(self) -> str:
        """The whole screen as text."""
        return "\n".join(self.lines())


class Terminal:
    """``hubbub chat`` running in a pseudo-terminal of ROWS×COLS."""

    def __init__(self, args: list[str], env: dict[str, str] | None = None) -> None:
        environ = {
            **os.environ,
            "TERM": "xterm",
            "PYTHONUNBUFFERED": "1",
            "PROMPT_TOOLKIT_NO_CPR": "1",
            "COLUMNS": str(COLS),
            "LINES": str(ROWS),
            **(env or {}),
        }
        for name in (*GATEWAY_ENV, *ID_ENV, *SPACE_ENV, *TOKEN_ENV):
            if name not in (env or {}):
                environ.pop(name, None)
        self.child = pexpect.spawn(
            sys.executable,
            ["-m", "hubbub", "chat", *args],
            env=environ,
            cwd=str(ROOT),
            dimensions=(ROWS, COLS),
            encoding="utf-8",
            codec_errors="replace",
            timeout=TIMEOUT,
        )
        self.screen = Screen()
        self.output = ""

    def _read(self, wait: float) -> str:
        try:
            return str(self.child.read_nonblocking(65536, timeout=wait))
        except pexpect.TIMEOUT:
            return ""

    async def pump(self, wait: float = 0.2) -> bool:
        """Read what the program wrote within ``wait`` seconds; False once it has exited."""
        try:
            data = await asyncio.to_thread(self._read, wait)
        except pexpect.EOF:
            return False
        self.output += data
        self.screen.feed(data)
        return True

    async def wait_for(self, text: str, timeout: float = TIMEOUT) -> str:
        """Wait until ``text`` is visible on the screen; return the screen."""
        return await self.wait_until(lambda screen: text in screen, f"{text!r}", timeout)

    async def wait_until(self, check: Any, what: str, timeout: float = TIMEOUT) -> str:
        """Wait until ``check(screen_text)`` holds; return the screen."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            screen = self.screen.text()
            if check(screen):
                return screen
            if loop.time() > deadline:
                raise AssertionError(f"{what} did not appear within {timeout}s; screen:\n{screen}")
            if not await self.pump():
                screen = self.screen.text()
                if check(screen):
                    return screen
                raise AssertionError(
                    f"hubbub chat exited before {what} appeared; output:\n{self.output[-3000:]}"
                )

    def row_with(self, text: str) -> str:
        """The first screen row containing ``text`` (empty if none)."""
        return next((row for row in self.screen.lines() if text in row), "")

    def type(self, text: str) -> None:
        """Type ``text`` (add ``\\r`` to press Enter)."""
        self.child.send(text)

    async def exit_status(self, timeout: float = TIMEOUT) -> int:
        """Wait for the program to end; its exit status."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while await self.pump():
            if loop.time() > deadline:
                raise AssertionError(f"hubbub chat did not exit; screen:\n{self.screen.text()}")
        await asyncio.to_thread(self.child.wait)
        self.child.close()
        status = self.child.exitstatus
        return status if status is not None else -(self.child.signalstatus or 1)

    def close(self) -> None:
        """Kill the program if it still runs."""
        if self.child.isalive():
            self.child.terminate(force=True)
        self.child.close()
