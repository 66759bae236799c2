"""Continuity, on the sans-I/O floor coordinator with an injected clock: within
``continuity_ms`` of an agent answering someone, that person's next unaddressed message goes
first to that agent (the first CSMA band) and every other agent defers; past it, or after a
person's or the server's reply, nobody has the first right."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from hubbub.protocol.ids import SERVER_ID
from hubbub.sdk.floor import FloorCoordinator, FloorSettings, Reply
from tests.strength import examples

PROPERTY = settings(max_examples=examples(200), deadline=None)
AGENTS = ["maths", "numbers", "chef"]
LO, HI, WINDOW = 2000, 8000, 180_000
FOLLOW_UP = "and what about 6*8?"


class Clock:
    """A manual clock in Unix milliseconds."""

    def __init__(self) -> None:
        self.now = 1_700_000_000_000.0

    def __call__(self) -> float:
        return self.now


def agents(clock: Clock, seed: int) -> dict[str, FloorCoordinator]:
    """Three agents that would all answer a sum (the same skill, the same confidence)."""
    fs = FloorSettings(csma_min_ms=LO, csma_max_ms=HI, skills=("math",), continuity_ms=WINDOW)
    return {a: FloorCoordinator(a, fs, clock=clock, rng=random.Random(seed + i)) for i, a in
            enumerate(AGENTS)}  # fmt: skip


def everyone_sees(
    floors: dict[str, FloorCoordinator], chat: Reply, replies_to: list[str], agent: bool
) -> None:
    for floor in floors.values():
        floor.spoke("#general", chat, replies_to, agent=agent)


@PROPERTY
@given(
    answerer=st.sampled_from(AGENTS),
    later_ms=st.floats(0, 2 * WINDOW),
    seed=st.integers(0, 2**32),
    n=st.integers(1, 4),
)
def test_the_follow_up_goes_first_to_who_answered_within_the_window(
    answerer: str, later_ms: float, seed: int, n: int
) -> None:
    clock = Clock()
    floors = agents(clock, seed)
    for k in range(n):  # earlier exchanges; the last answer decides
        who = answerer if k == n - 1 else AGENTS[(seed + k) % len(AGENTS)]
        everyone_sees(floors, Reply(f"q{k}", "ann", f"what is {k}*7?"), [], agent=False)
        everyone_sees(floors, Reply(f"a{k}", who, str(7 * k)), [f"q{k}"], agent=True)
    clock.now += later_ms
    delays = {
        a: f.open("f1", "#general", FOLLOW_UP, "ann", 0.9).delay_ms for a, f in floors.items()
    }
    if later_ms <= WINDOW:
        assert delays[answerer] <= LO + (HI - LO) / 6
        assert all(delays[answerer] <= d for a, d in delays.items() if a != answerer)
        assert all(f.last_answerer("#general", "ann") == answerer for f in floors.values())
    else:  # the window is over: everyone draws from the same ranked band
        assert all(f.continuity("#general", "ann") is None for f in floors.values())
        assert all(2300 <= d <= 3300 for d in delays.values())


def test_only_an_agents_answer_to_that_asker_gives_the_first_right() -> None:
    clock = Clock()
    floors = agents(clock, 1)
    everyone_sees(floors, Reply("q1", "ann", "what is 6*7?"), [], agent=False)
    everyone_sees(floors, Reply("a1", "bob", "42, I think"), ["q1"], agent=False)  # a person
    everyone_sees(floors, Reply("n1", SERVER_ID, "no agent took this"), ["q1"], agent=True)
    everyone_sees(floors, Reply("q1b", "ann", "anyone?"), ["q1"], agent=False)  # ann herself
    assert all(f.continuity("#general", "ann") is None for f in floors.values())
    everyone_sees(floors, Reply("a2", "maths", "42"), ["q1"], agent=True)
    assert floors["maths"].continuity("#general", "ann") is True
    assert floors["chef"].continuity("#general", "ann") is False
    assert floors["chef"].continuity("#general", "bob") is None  # bob was not answered
    assert floors["chef"].continuity("#other", "ann") is None  # nor was ann elsewhere


def test_no_continuity_when_it_is_off() -> None:
    clock = Clock()
    fs = FloorSettings(skills=("math",), continuity_ms=0)
    floor = FloorCoordinator("maths", fs, clock=clock, rng=random.Random(0))
    floor.spoke("#general", Reply("q1", "ann", "what is 6*7?"), [], agent=False)
    floor.spoke("#general", Reply("a1", "maths", "42"), ["q1"], agent=True)
    clock.now += 1
    assert floor.continuity("#general", "ann") is None
