"""The full-screen prompt_toolkit application of ``hubbub chat``.

A message pane (scrolls with PageUp/PageDown, loads older messages at the top), a status
line (channels, connection, who is responding or typing, pending proposals), a presence line
and an input line. All state lives in :class:`~hubbub.chat.view.ChatView`; this module wires
it to a connected :class:`~hubbub.sdk.Participant` and to the terminal.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Coroutine, Iterable
from typing import Any, Final

from prompt_toolkit.application import Application
from prompt_toolkit.buffer import Buffer
from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.data_structures import Point
from prompt_toolkit.document import Document
from prompt_toolkit.formatted_text import StyleAndTextTuples
from prompt_toolkit.history import InMemoryHistory
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from prompt_toolkit.layout import Float, FloatContainer, HSplit, Layout, Window
from prompt_toolkit.layout.controls import FormattedTextControl
from prompt_toolkit.layout.menus import CompletionsMenu
from prompt_toolkit.styles import Style
from prompt_toolkit.utils import get_cwidth
from prompt_toolkit.widgets import TextArea

from hubbub.chat.commands import (
    HELP,
    Approve,
    Command,
    Create,
    Dm,
    Help,
    History,
    Invalid,
    Join,
    Leave,
    Proposals,
    Quit,
    Reject,
    Say,
    SetPresence,
    Switch,
    Who,
    completions,
    parse,
)
from hubbub.chat.format import notice, tool_result_line
from hubbub.chat.view import HISTORY_PAGE, ChatView
from hubbub.errors import GatewayError, HubbubError, NotConnected, RequestFailed
from hubbub.protocol.addressing import mentioned, names_of
from hubbub.protocol.envelope import Envelope
from hubbub.sdk import Disconnected, Participant, Reconnecting
from hubbub.sdk.proposals import Proposal

STYLE: Final = Style.from_dict(
    {
        "time": "#888888",
        "from": "bold #5f87ff",
        "from.me": "bold #5faf5f",
        "from.server": "italic #888888",
        "to": "#888888",
        "mention": "bold #ffaf00",
        "dm": "#d787d7",
        "dm.tag": "bold",
        "notice": "#888888",
        "presence": "#5f8787",
        "floor": "italic #5f8787",
        "error": "bold #ff5f5f",
        "proposal": "#ffaf00",
        "proposal.hint": "#888888",
        "result": "bold #5faf5f",
        "result.error": "bold #ff5f5f",
        "status": "reverse",
        "status.current": "reverse bold",
        "status.warn": "reverse bold #ff5f5f",
        "status.claim": "reverse bold #ffaf00",
        "status.typing": "reverse #5faf5f",
        "status.proposal": "reverse #ffaf00",
        "presence-line": "#5f8787",
        "prompt": "bold",
    }
)
MAX_RENDERED: Final = 1000
"""Lines of a pane handed to prompt_toolkit at once (older ones need scrolling)."""
APPROVE_TIMEOUT: Final = 30.0
CONTROL_TIMEOUT: Final = 10.0


class _Completer(Completer):
    """Tab completion of commands, channels and participant ids."""

    def __init__(self, view: ChatView) -> None:
        self.view = view

    def get_completions(
        self, document: Document, complete_event: CompleteEvent
    ) -> Iterable[Completion]:
        """Candidates for the word before the cursor."""
        view = self.view
        people = sorted(set(view.people) - {view.me})
        known = sorted(view.known_channels)
        words, typed = completions(document.text_before_cursor, known, view.channels, people)
        for word in words:
            yield Completion(word, start_position=-typed)


class _NoticeLog(logging.Handler):
    """Shows warnings of the SDK as lines in the pane instead of writing over the screen."""

    def __init__(self, chat: ChatApp) -> None:
        super().__init__(logging.WARNING)
        self.chat = chat

    def emit(self, record: logging.LogRecord) -> None:
        """Show one log record as a line."""
        self.chat.say(f"{record.levelname.lower()}: {record.getMessage()}", "error")


class ChatApp:
    """The terminal UI around a :class:`ChatView` and a connected :class:`Participant`.

    Construct it before connecting, so that the history of the first join is shown.
    """

    def __init__(
        self,
        participant: Participant,
        view: ChatView,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.participant = participant
        self.view = view
        self.clock = clock
        self.scroll = 0
        """Lines of the pane hidden below the window (0: following the newest)."""
        self._pages_waiting = 0
        """PageUps pressed at the top while older messages were loading: applied on arrival."""
        self._app: Application[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._cursor = Point(x=0, y=0)
        self._pane = Window(
            FormattedTextControl(
                self._pane_text, get_cursor_position=lambda: self._cursor, focusable=False
            ),
            wrap_lines=True,
            dont_extend_height=True,
            always_hide_cursor=True,
        )
        self.input = TextArea(
            height=1,
            multiline=False,
            wrap_lines=False,
            prompt=self._prompt,
            history=InMemoryHistory(),
            accept_handler=self._accept,
            completer=_Completer(view),
            complete_while_typing=False,
        )
        participant.on("message", self._on_envelope)
        participant.on("disconnected", self._on_disconnected)
        participant.on("reconnecting", self._on_reconnecting)

    # ------------------------------------------------------------------ events

    def _on_envelope(self, env: Envelope) -> None:
        pane = self.view.lines()
        before = len(pane)
        self.view.handle(env, self.clock())
        if self.scroll and env.kind != "history/response" and self.view.lines() is pane:
            self.scroll += len(pane) - before  # scrolled back: keep the view where it is
        if env.kind == "history/response" and self._pages_waiting:
            waiting, self._pages_waiting = self._pages_waiting, 0
            for _ in range(waiting):  # no keypress is lost while a page loads
                self.page(1)
            return
        self.refresh()

    def _on_disconnected(self, info: Disconnected) -> None:
        if info.will_reconnect:
            self.view.connection = "reconnecting…"
        else:
            why = f"code {info.code}" + (f": {info.reason}" if info.reason else "")
            self.view.connection = "disconnected"
            if self._app is not None:
                self.say(f"the connection closed for good ({why}); /quit to leave", "error")
        self.refresh()

    def _on_reconnecting(self, info: Reconnecting) -> None:
        self.view.connection = f"reconnecting (attempt {info.attempt})…"
        self.refresh()

    def say(self, text: str, style: str = "notice") -> None:
        """Show a local line in the current pane."""
        self.view.notice(text, style)
        self.refresh()

    def refresh(self) -> None:
        """Redraw soon (no-op before the application runs)."""
        if self._app is not None:
            self._app.invalidate()

    # ------------------------------------------------------------------ layout

    def _pane_text(self) -> StyleAndTextTuples:
        lines = self.view.lines()
        self.scroll = max(0, min(self.scroll, self._max_scroll(len(lines))))
        end = len(lines) - self.scroll
        fragments: StyleAndTextTuples = []
        for i, line in enumerate(lines[max(0, end - MAX_RENDERED) : end]):
            if i:
                fragments.append(("", "\n"))
            fragments.extend(line.fragments)
        text = "".join(fragment[1] for fragment in fragments)
        last = text.rsplit("\n", 1)[-1]
        self._cursor = Point(x=get_cwidth(last), y=text.count("\n"))
        return fragments

    def _status_text(self) -> StyleAndTextTuples:
        return list(self.view.status_fragments(self.clock(), scrolled=self.scroll > 0))

    def _presence_text(self) -> StyleAndTextTuples:
        return list(self.view.presence_fragments(self.clock()))

    def _prompt(self) -> StyleAndTextTuples:
        return [("class:prompt", f"{self.view.current or ''}> ")]

    def _pane_height(self) -> int:
        """Rows the messages may use: the screen less the status, presence and input lines."""
        if self._app is None:
            return 20
        return max(1, self._app.output.get_size().rows - 3)

    def _max_scroll(self, total: int) -> int:
        """Scrolled this far, the oldest loaded line is at the top of the pane."""
        return max(0, total - self._pane_height())

    def build(self) -> Application[None]:
        """The prompt_toolkit application (full screen)."""
        messages = HSplit(
            [
                Window(),  # takes the space the messages do not need: they sit at the bottom
                self._pane,
                Window(FormattedTextControl(self._status_text), height=1, style="class:status"),
                Window(
                    FormattedTextControl(self._presence_text),
                    height=1,
                    style="class:presence-line",
                ),
                self.input,
            ]
        )
        menu = Float(xcursor=True, ycursor=True, content=CompletionsMenu(max_height=8))
        body = FloatContainer(messages, floats=[menu])
        return Application(
            layout=Layout(body, focused_element=self.input),
            key_bindings=self._keys(),
            style=STYLE,
            full_screen=True,
            mouse_support=False,
            refresh_interval=1.0,
            enable_page_navigation_bindings=False,
        )

    def _keys(self) -> KeyBindings:
        kb = KeyBindings()

        @kb.add("c-c", eager=True)
        @kb.add("c-d", eager=True)
        def _quit(event: KeyPressEvent) -> None:
            self.exit()

        @kb.add("pageup")
        def _up(event: KeyPressEvent) -> None:
            self.page(1)

        @kb.add("pagedown")
        def _down(event: KeyPressEvent) -> None:
            self.page(-1)

        @kb.add("c-n", eager=True)
        def _next(event: KeyPressEvent) -> None:
            self._cycle(1)

        @kb.add("c-p", eager=True)
        def _previous(event: KeyPressEvent) -> None:
            self._cycle(-1)

        return kb

    # ------------------------------------------------------------------ actions

    def page(self, direction: int) -> None:
        """Scroll a page up (``1``) or down (``-1``); at the top, load older messages."""
        step = max(1, self._pane_height() - 1)
        top = self._max_scroll(len(self.view.lines()))
        wanted = self.scroll + direction * step
        current = self.view.current
        if direction > 0 and self.scroll >= top and current and self.view.log(current).loading:
            self._pages_waiting += 1  # already at the top: scroll once the page has come
        elif direction > 0 and wanted >= top and current:
            self._spawn(self._history(current, HISTORY_PAGE, quiet=True))
        if direction < 0:
            self._pages_waiting = 0
        self.scroll = max(0, min(wanted, top))
        self.refresh()

    def _cycle(self, step: int) -> None:
        if self.view.cycle(step) is not None:
            self.scroll = 0
            self.refresh()

    def exit(self) -> None:
        """Leave the application (the caller disconnects)."""
        app = self._app
        if app is not None and app.is_running and app.future is not None and not app.future.done():
            app.exit()

    def _accept(self, buffer: Buffer) -> bool:
        command = parse(buffer.text)
        if command is not None:
            self.execute(command)
        return False  # clear the input line

    def execute(self, command: Command) -> None:
        """Carry out one parsed command."""
        now = self.clock()
        match command:
            case Say(text):
                self._spawn(self._say(text))
            case Dm(to, text):
                self._spawn(self._send(Envelope(kind="chat", to=[to], payload={"text": text})))
            case Join(channel):
                self._spawn(self._join(channel))
            case Create(channel):
                self._spawn(self._create(channel))
            case Leave(channel):
                self._spawn(self._leave(channel))
            case Switch(channel):
                if self.view.switch(channel):
                    self.scroll = 0
                else:
                    self.say(f"you are not in {channel}; /join {channel} first", "error")
            case Who():
                self.view.show(self.view.who_lines(now))
            case Help():
                self.view.show([notice(f"{usage:<20} {what}") for usage, what in HELP])
            case Proposals():
                self.view.show(self.view.proposal_listing())
            case History(count):
                if self.view.current is None:
                    self.say("not in a channel: /join #general", "error")
                else:
                    self._spawn(self._history(self.view.current, count))
            case Approve(number):
                self._spawn(self._approve(number))
            case Reject(number, reason):
                self._spawn(self._reject(number, reason))
            case SetPresence(presence):
                payload = {"presence": presence}
                self._spawn(self._send(Envelope(kind="participant/status", payload=payload)))
                self.say(f"you are now {presence}")
            case Quit():
                self.exit()
            case Invalid(message):
                self.say(message, "error")
        self.refresh()

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(self._guard(coro))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _guard(self, coro: Coroutine[Any, Any, None]) -> None:
        try:
            await coro
        except GatewayError:
            pass  # the gateway's system/error is shown as it arrives
        except (HubbubError, ValueError, OSError) as exc:
            self.say(str(exc), "error")
        except Exception as exc:  # a bug: show it, keep the chat running
            logging.getLogger("hubbub.chat").debug("command failed", exc_info=exc)
            self.say(f"internal error: {exc!r}", "error")

    async def _send(self, env: Envelope) -> None:
        try:
            await self.participant.client.send(env)
        except NotConnected as exc:
            self.say(f"not sent: {exc}", "error")

    async def _say(self, text: str) -> None:
        channel = self.view.current
        if channel is None:
            self.say("not in a channel: /join #general first", "error")
            return
        self.scroll = 0
        names = names_of(self.view.people.values())  # @id or @display name: the one rule
        to = [pid for pid in mentioned(text, names) if pid != self.view.me]
        chat = Envelope(kind="chat", channel=channel, to=to or None, payload={"text": text})
        await self._send(chat)

    async def _join(self, channel: str) -> None:
        if channel not in self.view.channels:
            try:
                await self.participant.client.join(channel, timeout=CONTROL_TIMEOUT)
            except GatewayError as exc:
                if exc.code == "unknown_channel":
                    self.say(f"(/create {channel} makes it, if you may create channels)")
                return
        self.view.switch(channel)
        self.scroll = 0
        self.refresh()

    async def _create(self, channel: str) -> None:
        client = self.participant.client
        request = Envelope(kind="channel/create", id=client.new_id(), payload={"channel": channel})
        joined = client.expect("channel/joined", lambda e: e.payload.get("channel") == channel)
        refused = client.expect("system/error", lambda e: request.id in e.correlation_ids())
        try:
            await client.send(request)
            await asyncio.wait(
                {joined, refused}, timeout=CONTROL_TIMEOUT, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            for future in (joined, refused):
                future.cancel()
        if channel in self.view.channels:
            self.view.switch(channel)
            self.scroll = 0
            self.refresh()

    async def _leave(self, channel: str | None) -> None:
        channel = channel or self.view.current
        if channel is None or channel not in self.view.channels:
            self.say(f"you are not in {channel or 'a channel'}", "error")
            return
        await self.participant.client.leave(channel, timeout=CONTROL_TIMEOUT)
        self.scroll = 0

    async def _history(self, channel: str, count: int, quiet: bool = False) -> None:
        log = self.view.log(channel)
        if quiet and log.exhausted:
            return
        payload = self.view.history_request(channel, count)
        if payload is None:
            self.refresh()
            return
        try:
            await self.participant.client.send(Envelope(kind="history/request", payload=payload))
        except NotConnected as exc:
            log.loading = False
            self.say(f"cannot load history: {exc}", "error")

    async def _approve(self, number: int) -> None:
        entry = self.view.proposal(number)
        if entry is None:
            self.say(f"there is no proposal #{number} (see /proposals)", "error")
            return
        if entry.status != "pending":
            self.say(f"proposal #{number} is {entry.status}; only a pending one can be approved")
            return
        target = ", ".join(entry.envelope.to or []) or "?"
        entry.status = "approved"
        self.say(f"approved proposal #{number}; waiting for {target}…", "proposal")
        try:
            # a proposal loaded from history is not in the SDK's inbox of live ones
            proposal = self.participant.proposals.get(entry.id) or Proposal(entry.envelope)
            result = await self.participant.approve(proposal, timeout=APPROVE_TIMEOUT)
        except RequestFailed as exc:
            self.say(f"✗ proposal #{number}: {exc}", "result.error")
            return
        except (HubbubError, ValueError) as exc:
            self.say(f"✗ proposal #{number} was not run: {exc}", "result.error")
            return
        channel = entry.envelope.channel
        line = tool_result_line(target, result)
        self.view.log(channel if channel in self.view.channels else None).add(line)
        self.refresh()

    async def _reject(self, number: int, reason: str) -> None:
        entry = self.view.proposal(number)
        if entry is None:
            self.say(f"there is no proposal #{number} (see /proposals)", "error")
            return
        if entry.status != "pending":
            self.say(f"proposal #{number} is {entry.status}; only a pending one can be rejected")
            return
        try:
            proposal = self.participant.proposals.get(entry.id) or Proposal(entry.envelope)
            await self.participant.reject(proposal, reason)
        except ValueError as exc:
            self.say(f"proposal #{number}: {exc}", "error")

    # ------------------------------------------------------------------ running

    async def run(self) -> None:
        """Run until /quit, Ctrl-D or Ctrl-C (the participant stays connected)."""
        app = self.build()
        self._app = app
        handler = _NoticeLog(self)
        root = logging.getLogger()
        root.addHandler(handler)
        try:
            await app.run_async()
        finally:
            root.removeHandler(handler)
            self._app = None
            for task in list(self._tasks):
                task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.gather(*self._tasks, return_exceptions=True)


__all__ = ["STYLE", "ChatApp"]
