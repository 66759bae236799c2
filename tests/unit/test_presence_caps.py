"""Presence names capability lists by digest only where every listener has the list (issue 21,
item 11): a property test of :class:`AnnouncedCapabilities` against a model of who knows what."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from hubbub.server.state.presence_caps import AnnouncedCapabilities
from tests.strength import examples

PEOPLE = ["a", "b", "c", "d"]
LISTS = ["d1", "d2", "d3"]

OPS = st.lists(
    st.tuples(
        st.sampled_from(["connect", "disconnect", "change", "status", "channel-join"]),
        st.sampled_from(PEOPLE),
        st.sampled_from(LISTS),
    ),
    max_size=60,
)


def _entry(pid: str, digest: str) -> dict[str, Any]:
    return {"id": pid, "capabilities": [digest], "capabilities_digest": digest}


@settings(max_examples=examples(500), deadline=None)
@given(ops=OPS)
def test_an_entry_without_its_list_goes_only_to_listeners_who_have_it(
    ops: list[tuple[str, str, str]],
) -> None:
    record = AnnouncedCapabilities()
    lists = dict.fromkeys(PEOPLE, "d1")  # each participant's current list (by digest)
    online: set[str] = set()
    known: dict[str, set[str]] = {}  # listener -> the lists (digests) it has been sent
    sent_lists = 0

    def announce(event: str, pid: str, channel: str | None = None) -> None:
        nonlocal sent_lists
        entry = record.presence_entry(event, _entry(pid, lists[pid]), channel)
        for listener in online - {pid}:
            if "capabilities" in entry:
                known[listener].add(entry["capabilities_digest"])
            elif event != "leave":
                assert entry["capabilities_digest"] in known[listener], (listener, pid)
        sent_lists += "capabilities" in entry

    for op, pid, digest in ops:
        if op == "connect" and pid not in online:
            lists[pid] = digest  # it may come back with another list
            record.welcomed(pid)
            online.add(pid)
            known[pid] = {lists[p] for p in online}  # the welcome lists who is online
            announce("join", pid)
        elif op == "disconnect" and pid in online:
            online.discard(pid)
            announce("leave", pid)
        elif op == "change" and pid in online:
            lists[pid] = digest
            announce("update", pid)
        elif op == "status" and pid in online:
            announce("update", pid)
        elif op == "channel-join" and pid in online:
            announce("join", pid, channel="#general")


def test_a_reconnect_loop_sends_the_list_once() -> None:
    record = AnnouncedCapabilities()
    record.welcomed("listener")
    carried = []
    for _ in range(20):
        record.welcomed("mallory")
        carried.append("capabilities" in record.presence_entry("join", _entry("mallory", "big")))
        carried.append("capabilities" in record.presence_entry("leave", _entry("mallory", "big")))
    assert carried == [True] + [False] * 39
