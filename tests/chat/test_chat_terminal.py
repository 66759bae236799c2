"""`hubbub chat` as a person uses it: a real gateway, the program in a pseudo-terminal, and
SDK participants on the other side. Every wait is for something to appear on the screen
(or to arrive at an SDK client), never a sleep."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import mcp.types as mt
import pytest

from hubbub.errors import ProposalRejected
from hubbub.sdk import Client, Participant
from hubbub.server.config import Limits, ParticipantConfig, SpaceConfig, hash_token
from tests.chat.terminal import START_TIMEOUT, TIMEOUT, Terminal
from tests.conftest import MakeGateway, RunningGateway, start_gateway, stop_gateway
from tests.ports import reserve_port
from tests.sdk.conftest import FAST, PROPOSER_CAPS

pytestmark = pytest.mark.slow  # `hubbub chat` in a pseudo-terminal

PAGE_UP, PAGE_DOWN, CTRL_N, CTRL_C, CTRL_D = "\x1b[5~", "\x1b[6~", "\x0e", "\x03", "\x04"

StartChat = Callable[..., Any]


@pytest.fixture
async def gw(gateways: MakeGateway) -> RunningGateway:
    """An open-mode gateway (channels #general and #dev) with no rate limit."""
    space = SpaceConfig(open=True, channels=["#general", "#dev"])
    space.validate()
    return await gateways(spaces=[space], limits=Limits(rate_per_s=0))


@pytest.fixture
async def sdk(gw: RunningGateway) -> AsyncIterator[Callable[..., Any]]:
    """``await sdk("bob")``: a connected Client (``participant=True``: a Participant)."""
    made: list[Client | Participant] = []

    async def make(
        pid: str, *, participant: bool = False, setup: Any = None, **options: Any
    ) -> Any:
        cls = Participant if participant else Client
        obj = cls(gateway=gw.url, participant_id=pid, **{**FAST, **options})
        made.append(obj)
        if setup is not None:
            setup(obj)
        await obj.connect()
        return obj

    yield make
    for obj in reversed(made):
        await obj.disconnect()


@pytest.fixture
async def start_chat(gw: RunningGateway) -> AsyncIterator[StartChat]:
    """``await start_chat("alice", "--channel", "#dev")``: `hubbub chat` on the screen,
    returned once it shows its first channel."""
    terminals: list[Terminal] = []

    async def start(
        pid: str = "alice", *args: str, wait: str | None = "— joined", **kw: Any
    ) -> Terminal:
        term = Terminal(["--url", gw.url, "--id", pid, *args], **kw)
        terminals.append(term)
        if wait is not None:
            await term.wait_for(wait, START_TIMEOUT)
        return term

    yield start
    for term in terminals:
        term.close()


async def chat_from(client: Client, sender: str) -> asyncio.Future[Any]:
    """A future for the next chat envelope from ``sender`` (taken before it is sent)."""
    return client.expect("chat", lambda e: e.from_ == sender)


async def say(client: Client, text: str, channel: str = "#general") -> None:
    await client.send({"kind": "chat", "channel": channel, "payload": {"text": text}})


# ---------------------------------------------------------------------- messages


async def test_history_is_shown_after_join(sdk: Any, start_chat: StartChat) -> None:
    bob = await sdk("bob")
    for text in ("first words", "second words", "third words"):
        await say(bob, text)
    term = await start_chat("alice")
    # The screen is redrawn in pieces: wait for the whole frame (history, status, prompt).
    screen = await term.wait_until(
        lambda s: (
            "third words" in s
            and "#general · online: alice, bob" in s
            and term.screen.lines()[-1].startswith("#general>")
        ),
        "the history, the status line and the prompt",
    )
    rows = [r for r in screen.splitlines() if "words" in r or "joined" in r]
    assert [re.sub(r"^\d\d:\d\d ", "", r) for r in rows] == [
        "bob: first words",
        "bob: second words",
        "bob: third words",
        "— joined #general with bob —",
    ]
    assert "#general · online: alice, bob" in screen
    assert term.screen.lines()[-1].startswith("#general>")


async def test_typed_message_reaches_another_client(sdk: Any, start_chat: StartChat) -> None:
    bob = await sdk("bob")
    term = await start_chat("alice")
    arrived = await chat_from(bob, "alice")
    term.type("hello bob, from the terminal\r")
    message = await asyncio.wait_for(arrived, TIMEOUT)
    assert message.channel == "#general"
    assert message.payload["text"] == "hello bob, from the terminal"
    await term.wait_for("alice: hello bob, from the terminal")


async def test_a_mention_puts_the_mentioned_id_in_to(sdk: Any, start_chat: StartChat) -> None:
    bob = await sdk("bob")
    await sdk("maths")
    term = await start_chat("alice")
    await term.wait_for("maths")  # in the People line: its id is known
    arrived = await chat_from(bob, "alice")
    term.type("@Maths and @nobody: what is 6*7?\r")
    message = await asyncio.wait_for(arrived, TIMEOUT)
    assert message.channel == "#general" and message.to == ["maths"]
    arrived = await chat_from(bob, "alice")
    term.type("no mention here\r")
    assert (await asyncio.wait_for(arrived, TIMEOUT)).to is None


async def test_tab_completes_a_mention_with_its_trailing_space(
    sdk: Any, start_chat: StartChat
) -> None:
    bob = await sdk("bob")
    await sdk("maths")
    term = await start_chat("alice")
    await term.wait_for("maths")
    arrived = await chat_from(bob, "alice")
    term.type("hi @ma\t")
    term.type("what is 6*7?\r")
    message = await asyncio.wait_for(arrived, TIMEOUT)
    assert message.payload["text"] == "hi @maths what is 6*7?" and message.to == ["maths"]


async def test_message_from_another_client_appears(sdk: Any, start_chat: StartChat) -> None:
    bob = await sdk("bob")
    term = await start_chat("alice")
    await say(bob, "live from bob @alice")
    await term.wait_for("bob: live from bob @alice")


async def test_direct_messages_both_ways(sdk: Any, start_chat: StartChat) -> None:
    bob = await sdk("bob")
    term = await start_chat("alice")
    arrived = await chat_from(bob, "alice")
    term.type("/dm bob just between us\r")
    dm = await asyncio.wait_for(arrived, TIMEOUT)
    assert dm.channel is None and dm.to == ["bob"] and dm.payload["text"] == "just between us"
    await term.wait_for("[DM] alice → bob: just between us")
    await bob.send(
        {"kind": "chat", "to": ["alice"], "private": True, "payload": {"text": "got it"}}
    )
    await term.wait_for("[DM] bob → alice: got it")


async def test_an_error_from_the_gateway_is_shown(start_chat: StartChat) -> None:
    term = await start_chat("alice")
    term.type("/dm nobody hello?\r")
    await term.wait_for("error (unknown_participant): no participant 'nobody'")


# ---------------------------------------------------------------------- presence and floor


async def test_presence_of_a_second_participant(sdk: Any, start_chat: StartChat) -> None:
    term = await start_chat("alice")
    await term.wait_for("#general · online: alice")
    carol = await sdk("carol")
    await term.wait_for("→ carol joined #general")
    await term.wait_for("#general · online: alice, carol")
    await carol.send({"kind": "participant/status", "payload": {"presence": "away"}})
    await term.wait_for("#general · online: alice · away: carol")
    await say(carol, "@@sleep:90s@@")
    await term.wait_until(
        lambda s: re.search(r"sleeping: carol \(wakes in \d+s\)", s) is not None,
        "carol sleeping with a countdown",
    )
    term.type("/who\r")
    await term.wait_until(
        lambda s: re.search(r"carol \[agent\] sleeping, wakes in \d+s", s) is not None,
        "/who with carol's wake time",
    )
    await carol.disconnect()
    await term.wait_for("← carol went offline")
    await term.wait_for("#general · online: alice\n")


async def test_who_is_responding_shows_until_the_claimant_answers(
    sdk: Any, start_chat: StartChat
) -> None:
    bob = await sdk("bob")
    carol = await sdk("carol")
    term = await start_chat("alice")
    question = await chat_from(bob, "carol")
    await say(carol, "what is 6*7?")
    msg = await asyncio.wait_for(question, TIMEOUT)
    await term.wait_for("carol: what is 6*7?")
    claim = {"msg_id": msg.id, "started_at": int(time.time() * 1000)}
    await bob.send({"kind": "floor/responding-to", "channel": "#general", "payload": claim})
    await term.wait_for("bob is responding…")
    await say(bob, "42")
    await term.wait_until(
        lambda s: "bob: 42" in s and "responding" not in s, "the answer without the claim"
    )


async def reasoning(client: Client, kind: str, **where: Any) -> None:
    """Send a ``reasoning/*`` event as an agent's runtime does (to #general by default)."""
    if "to" not in where:
        where.setdefault("channel", "#general")
    await client.send({"kind": f"reasoning/{kind}", "payload": {"message": "…"}, **where})


async def test_typing_shows_until_the_answer_arrives(sdk: Any, start_chat: StartChat) -> None:
    maths = await sdk("maths")
    term = await start_chat("alice")
    await reasoning(maths, "start")
    await term.wait_until(
        lambda s: "[#general] · maths is typing…" in s, "maths typing on the status line"
    )
    await say(maths, "6*7 = 42")
    await term.wait_until(
        lambda s: "maths: 6*7 = 42" in s and "typing" not in s, "the answer without typing"
    )


async def test_typing_in_a_dm_and_in_the_channel(sdk: Any, start_chat: StartChat) -> None:
    maths = await sdk("maths")
    chef = await sdk("chef")
    term = await start_chat("alice")
    await reasoning(maths, "start", to=["alice"])
    await reasoning(chef, "start")
    await term.wait_for("chef and maths are typing…")
    await maths.send(
        {"kind": "chat", "to": ["alice"], "private": True, "payload": {"text": "psst, 42"}}
    )
    await term.wait_until(
        lambda s: "[DM] maths → alice: psst, 42" in s and "· chef is typing…" in s,
        "maths's DM, only chef typing",
    )
    await reasoning(chef, "cancel")
    await term.wait_until(lambda s: "typing" not in s, "nobody typing")


# ---------------------------------------------------------------------- proposals


def offer_add(calc: Participant) -> None:
    @calc.tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b


async def test_approving_a_proposal_runs_the_tool(sdk: Any, start_chat: StartChat) -> None:
    await sdk("calc", participant=True, kind="service", setup=offer_add)
    agent: Participant = await sdk("agent", participant=True, capabilities=PROPOSER_CAPS)
    term = await start_chat("alice")
    call = asyncio.create_task(agent.call_tool("calc", "add", {"a": 2, "b": 3}, timeout=30))
    await term.wait_for("proposal #1: agent proposes tools/call add on calc")
    term.type("/proposals\r")
    await term.wait_for('#1 [pending] agent → calc: tools/call add args {"a": 2, "b": 3}')
    term.type("/approve 1\r")
    await term.wait_for("✓ calc answered: 5")
    result = await asyncio.wait_for(call, TIMEOUT)
    assert result.content == [mt.TextContent(text="5")]
    term.type("/approve 1\r")
    await term.wait_for("proposal #1 is approved; only a pending one can be approved")


async def test_a_proposal_loaded_from_history_is_numbered_and_approved(
    sdk: Any, start_chat: StartChat
) -> None:
    await sdk("calc", participant=True, kind="service", setup=offer_add)
    agent: Participant = await sdk("agent", participant=True, capabilities=PROPOSER_CAPS)
    bob = await sdk("bob")
    proposed = bob.expect("mcp/proposal", lambda e: e.from_ == "agent")
    call = asyncio.create_task(agent.call_tool("calc", "add", {"a": 4, "b": 5}, timeout=30))
    await asyncio.wait_for(proposed, TIMEOUT)  # made before alice came: she sees it in history
    term = await start_chat("alice")
    await term.wait_for("proposal #1: agent proposes tools/call add on calc")
    term.type("/approve 1\r")
    await term.wait_for("✓ calc answered: 9")
    result = await asyncio.wait_for(call, TIMEOUT)
    assert result.content == [mt.TextContent(text="9")]


async def test_rejecting_a_proposal_tells_the_proposer(sdk: Any, start_chat: StartChat) -> None:
    await sdk("calc", participant=True, kind="service", setup=offer_add)
    agent: Participant = await sdk("agent", participant=True, capabilities=PROPOSER_CAPS)
    term = await start_chat("alice")
    call = asyncio.create_task(agent.call_tool("calc", "add", {"a": 1, "b": 1}, timeout=30))
    await term.wait_for("proposal #1: agent proposes")
    term.type("/reject 1 not today\r")
    with pytest.raises(ProposalRejected, match="not today"):
        await asyncio.wait_for(call, TIMEOUT)
    await term.wait_for("you rejected proposal #1: not today")


# ---------------------------------------------------------------------- channels and scrolling


async def test_channels_switch_join_and_leave(sdk: Any, start_chat: StartChat) -> None:
    bob = await sdk("bob", channels=("#general", "#dev"))
    term = await start_chat("alice", "--channel", "general", "--channel", "#dev")
    await term.wait_for("[#general] #dev")
    await say(bob, "in dev", channel="#dev")
    await term.wait_for("[#general] #dev(1)")
    term.type(CTRL_N)
    await term.wait_until(
        lambda s: (
            "bob: in dev" in s
            and "#general [#dev]" in s
            and term.screen.lines()[-1].startswith("#dev>")
        ),
        "#dev with bob's message, selected, with its prompt",
    )
    term.type("/leave\r")
    await term.wait_for("— you left #dev —")
    await term.wait_until(lambda s: s.splitlines()[-1].startswith("#general>"), "#general prompt")
    term.type("/join #dev\r")
    await term.wait_for("#general [#dev]")
    term.type("/sw\t")  # Tab completes commands and channel names
    await term.wait_for("#dev> /switch")
    term.type("#g\t")
    await term.wait_for("#dev> /switch #general")
    term.type("\r")
    await term.wait_for("[#general] #dev")
    term.type("/join #nope\r")
    await term.wait_for("error (unknown_channel): channel #nope does not exist")
    term.type("/create #nope\r")
    await term.wait_for("— joined #nope (nobody else is here) —")


async def test_page_up_scrolls_back_and_loads_older_messages(
    sdk: Any, start_chat: StartChat
) -> None:
    bob = await sdk("bob")
    for n in range(1, 81):
        await say(bob, f"note {n:02d}")
    term = await start_chat("alice")
    await term.wait_for("bob: note 80")

    def oldest(screen: str) -> int:
        found = [int(n) for n in re.findall(r"bob: note (\d\d)", screen)]
        return min(found) if found else 0

    seen = oldest(term.screen.text())
    assert seen > 1  # only the last 50 came with the join
    for _ in range(10):
        if "note 01" in term.screen.text():
            break
        term.type(PAGE_UP)
        screen = await term.wait_until(
            lambda s, before=seen: 0 < oldest(s) < before or "note 01" in s, "older notes"
        )
        seen = oldest(screen)
    await term.wait_until(
        lambda s: "— the beginning of #general —" in s and "scrolled back" in s,
        "the beginning of the channel, scrolled back",
    )
    for _ in range(10):
        if "scrolled back" not in term.screen.text():
            break
        top = oldest(term.screen.text())
        term.type(PAGE_DOWN)
        await term.wait_until(lambda s, top=top: oldest(s) > top, "newer notes")
    await term.wait_until(
        lambda s: "bob: note 80" in s and "scrolled back" not in s, "the newest note, live again"
    )


async def test_a_restarted_gateway_is_rejoined_without_losing_messages(tmp_path: Path) -> None:
    gw = await start_gateway(tmp_path, limits=Limits(rate_per_s=0))
    term = Terminal(["--url", gw.url, "--id", "alice"])
    try:
        await term.wait_for("— joined #general", START_TIMEOUT)
        port = gw.port
        await stop_gateway(gw)
        await term.wait_for("reconnecting")
        gw = await start_gateway(tmp_path, limits=Limits(rate_per_s=0), port=port)
        async with Client(gateway=gw.url, participant_id="bob", **FAST) as bob:
            await say(bob, "said while alice was away")
            await term.wait_for("— rejoined #general", 2 * START_TIMEOUT)
            await term.wait_for("bob: said while alice was away")
            screen = await term.wait_until(
                lambda s: "reconnecting" not in s and "said while alice was away" in s,
                "the message, no longer reconnecting",
            )
            assert screen.count("said while alice was away") == 1
    finally:
        term.close()
        await stop_gateway(gw)


# ---------------------------------------------------------------------- leaving


@pytest.mark.parametrize("how", ["/quit\r", CTRL_D, CTRL_C])
async def test_quitting_is_clean(sdk: Any, start_chat: StartChat, how: str) -> None:
    bob = await sdk("bob")
    term = await start_chat("alice")
    left = bob.expect(
        "system/presence",
        lambda e: (
            e.payload.get("event") == "leave"
            and (e.payload.get("participant") or {}).get("id") == "alice"
        ),
    )
    term.type(how)
    assert await term.exit_status() == 0
    await asyncio.wait_for(left, TIMEOUT)
    assert "Traceback" not in term.output


# ---------------------------------------------------------------------- errors


async def failure(term: Terminal, code: int = 1) -> str:
    """What the program printed before exiting with ``code`` (one line, no traceback)."""
    assert await term.exit_status() == code, term.output
    assert "Traceback" not in term.output
    lines = [line for line in term.output.splitlines() if line.strip()]
    assert len([line for line in lines if line.startswith("Error")]) == 1, term.output
    return term.output


async def test_an_unreachable_gateway_is_one_clear_line() -> None:
    term = Terminal(["--url", f"ws://127.0.0.1:{reserve_port()}/ws", "--id", "alice"])
    try:
        out = await failure(term)
    finally:
        term.close()
    assert "could not connect to ws://127.0.0.1:" in out
    assert "hubbub serve" in out and "check --gateway" in out


async def test_a_bad_channel_name_names_the_fix() -> None:
    term = Terminal(["--id", "alice", "--channel", "#bad name"])  # more cases: test_cli_chat
    try:
        out = await failure(term, code=2)
    finally:
        term.close()
    assert "'#bad name' is not a channel name: write '#' then 1-31" in " ".join(out.split())


async def test_an_unknown_channel_is_one_clear_line(
    gw: RunningGateway, start_chat: StartChat
) -> None:
    term = await start_chat("alice", "--channel", "#nope", wait=None)
    out = await failure(term)
    assert "cannot join #nope: channel #nope does not exist" in " ".join(out.split())


async def test_tokens_are_checked(tmp_path: Path) -> None:
    secret = "hb_the-right-token"
    space = SpaceConfig(
        participants={"alice": ParticipantConfig(kind="human", token_hash=hash_token(secret))}
    )
    space.validate()
    gw = await start_gateway(tmp_path, spaces=[space])
    try:
        wrong = Terminal(["--url", gw.url, "--id", "alice", "--token", "hb_wrong"])
        try:
            out = " ".join((await failure(wrong)).split())
        finally:
            wrong.close()
        assert f"{gw.url} refused 'alice': unknown token" in out
        assert "--token or HUBBUB_TOKEN" in out
        right = Terminal(["--url", gw.url, "--id", "alice"], env={"HUBBUB_TOKEN": secret})
        try:
            await right.wait_for("— joined #general (nobody else is here) —", START_TIMEOUT)
            right.type("/quit\r")
            assert await right.exit_status() == 0
        finally:
            right.close()
    finally:
        await stop_gateway(gw)
