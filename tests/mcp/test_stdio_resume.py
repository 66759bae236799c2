"""``hubbub mcp`` (stdio) restarted, as Claude Code, Codex and Gemini CLI do per session:
the new process resumes where the last one's ``listen`` stopped (the cursor the gateway
keeps, as for ``/mcp``), so channel messages sent between runs arrive, once."""

from __future__ import annotations

import pytest

from tests.conftest import RunningGateway
from tests.mcp.conftest import SHORT, call, stdio_session

pytestmark = [pytest.mark.slow, pytest.mark.timeout(90)]  # `hubbub mcp` processes


@pytest.fixture(autouse=True)
def short_listen(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in SHORT.items():
        monkeypatch.setenv(name, value)


async def _texts(s: object, n: int) -> list[str]:
    """Listen until ``n`` messages came; then one more listen must bring nothing."""
    texts: list[str] = []
    while len(texts) < n:
        got = await call(s, "listen", timeout_s=10)  # type: ignore[arg-type]
        assert not got["nudge"], f"only {texts} came"
        texts += [m["text"] for m in got["messages"]]
    again = await call(s, "listen", timeout_s=0.3)  # type: ignore[arg-type]
    assert again["nudge"] and again["messages"] == [], again
    return texts


async def test_a_restarted_hubbub_mcp_gets_what_its_channels_missed_once(
    gateway: RunningGateway,
) -> None:
    bob = await gateway.mew("bob", kind="human")
    await bob.send({"kind": "channel/create", "payload": {"channel": "#ops"}})
    await bob.expect("channel/joined")

    async def post(channel: str, text: str) -> None:
        await bob.send({"kind": "chat", "channel": channel, "payload": {"text": text}})

    async with stdio_session(gateway.url, "claude") as s:
        await call(s, "join", channel="#ops")  # joined by the tool, not by --channel
        await post("#general", "one")
        assert await _texts(s, 1) == ["one"]
        await post("#general", "two")  # reaches this process; never listened for
    await post("#general", "three")  # while no hubbub mcp runs
    await post("#ops", "ops-three")
    await gateway.settle()
    async with stdio_session(gateway.url, "claude") as s:
        texts = await _texts(s, 3)
        assert sorted(texts) == ["ops-three", "three", "two"]
        assert [t for t in texts if t != "ops-three"] == ["two", "three"]
        await post("#ops", "live")
        assert await _texts(s, 1) == ["live"]
    async with stdio_session(gateway.url, "claude") as s:  # nothing of the above again
        await post("#general", "four")
        assert await _texts(s, 1) == ["four"]
