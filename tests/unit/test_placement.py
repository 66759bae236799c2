"""Placement of space leaders, on a simulated cluster with a simulated clock: the nodes tick
every third of the lease as `Node._place` does, leases expire, and after a start, a join or a
death every node leads ⌊S/W⌋ or ⌈S/W⌉ spaces within two lease times."""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st

from hubbub.cluster import placement
from tests.strength import examples

LEASE_MS = 3000
TICK_MS = LEASE_MS // 3
STEP_MS = 10


@dataclass
class SimNode:
    name: str
    next_tick: int
    alive: bool = True
    free_since: dict[str, int] = field(default_factory=dict)


@dataclass
class Sim:
    """Redis' lease keys and registry, and the nodes' supervision ticks."""

    spaces: list[str]
    now: int = 0
    leases: dict[str, tuple[str, int]] = field(default_factory=dict)
    seen: dict[str, int] = field(default_factory=dict)
    nodes: dict[str, SimNode] = field(default_factory=dict)
    moves: int = 0

    def leader(self, space: str) -> str | None:
        held = self.leases.get(space)
        return held[0] if held is not None and held[1] > self.now else None

    def start(self, name: str) -> None:
        self.seen[name] = self.now  # registers, then waits a tick before taking anything
        self.nodes[name] = SimNode(name, self.now + TICK_MS)

    def kill(self, name: str) -> None:
        self.nodes[name].alive = False

    def tick(self, node: SimNode) -> None:
        me, total = node.name, len(self.spaces)
        self.seen[me] = self.now
        live = [n for n, t in self.seen.items() if t >= self.now - LEASE_MS]
        for sp in self.spaces:
            holder = self.leader(sp)
            if holder == me:
                self.leases[sp] = (me, self.now + LEASE_MS)
            elif holder is None:
                node.free_since.setdefault(sp, self.now)
            else:
                node.free_since.pop(sp, None)

        def leads() -> dict[str, int]:
            counts = dict.fromkeys(live, 0) | {me: 0}
            for sp in self.spaces:
                holder = self.leader(sp)
                if holder is not None:
                    counts[holder] = counts.get(holder, 0) + 1
            return counts

        for sp in self.spaces:
            since = node.free_since.get(sp)
            if since is None or self.leader(sp) is not None:
                continue
            if placement.may_take(me, total, leads(), self.now - since, LEASE_MS):
                self.leases[sp] = (me, self.now + LEASE_MS)
                del node.free_since[sp]
        extra = placement.surplus(me, total, leads())
        mine = [sp for sp in self.spaces if self.leader(sp) == me]
        for sp in mine[:extra]:  # a graceful hand-off: commit, then release
            del self.leases[sp]
            self.moves += 1

    def run_until(self, end: int) -> None:
        while self.now < end:
            self.now += STEP_MS
            for node in list(self.nodes.values()):
                if node.alive and node.next_tick <= self.now:
                    node.next_tick += TICK_MS
                    self.tick(node)

    def balanced(self) -> bool:
        live = [n.name for n in self.nodes.values() if n.alive]
        counts = dict.fromkeys(live, 0)
        for sp in self.spaces:
            holder = self.leader(sp)
            if holder is None or holder not in counts:
                return False
            counts[holder] += 1
        low, high = len(self.spaces) // len(live), -(-len(self.spaces) // len(live))
        return all(low <= c <= high for c in counts.values())

    def stays_balanced(self, until: int) -> bool:
        while self.now < until:
            if not self.balanced():
                return False
            self.run_until(self.now + STEP_MS)
        return True


def test_shares_are_floor_or_ceiling_and_the_extra_goes_to_who_leads_most() -> None:
    got = placement.shares(8, {"a": 0, "b": 5, "c": 3})
    assert got == {"b": 3, "c": 3, "a": 2}
    assert placement.surplus("b", 8, {"a": 0, "b": 5, "c": 3}) == 2
    assert placement.surplus("a", 8, {"a": 0, "b": 5, "c": 3}) == 0


def test_a_node_at_its_share_leaves_a_free_space_to_others_for_one_lease() -> None:
    leads = {"a": 2, "b": 1}
    assert not placement.may_take("a", 4, leads, free_ms=100, lease_ms=LEASE_MS)
    assert placement.may_take("b", 4, leads, free_ms=0, lease_ms=LEASE_MS)
    assert placement.may_take("a", 4, leads, free_ms=LEASE_MS, lease_ms=LEASE_MS)


@settings(max_examples=examples(150), deadline=None)
@given(
    nodes=st.integers(1, 6),
    spaces=st.integers(1, 12),
    starts=st.lists(st.integers(0, 600), min_size=7, max_size=7),
    victim=st.integers(0, 5),
)
def test_leads_spread_within_two_leases_after_start_join_and_death(
    nodes: int, spaces: int, starts: list[int], victim: int
) -> None:
    sim = Sim([f"s{i}" for i in range(spaces)])
    pending = sorted((starts[i], f"n{i}") for i in range(nodes))
    for at, name in pending:
        sim.run_until(at)
        sim.start(name)
    sim.run_until(max(at for at, _ in pending) + 2 * LEASE_MS)
    assert sim.balanced(), sim.leases
    assert sim.stays_balanced(sim.now + 2 * LEASE_MS)  # and nothing moves back and forth

    sim.start("late")  # a node joins
    sim.run_until(sim.now + 2 * LEASE_MS)
    assert sim.balanced(), sim.leases
    assert sim.stays_balanced(sim.now + LEASE_MS)

    sim.kill(f"n{victim % nodes}")  # kill -9: its leases run out, its registry entry ages
    sim.run_until(sim.now + 2 * LEASE_MS)
    assert sim.balanced(), sim.leases
    assert sim.stays_balanced(sim.now + LEASE_MS)


def test_a_join_moves_only_the_leads_the_new_node_needs() -> None:
    sim = Sim([f"s{i}" for i in range(8)])
    for name in ("a", "b"):
        sim.start(name)
    sim.run_until(2 * LEASE_MS)
    assert sim.balanced()
    before = sim.moves
    sim.start("c")
    sim.run_until(sim.now + 2 * LEASE_MS)
    assert sim.balanced()
    assert sim.moves - before == 2  # 4 + 4 -> 3 + 3 + 2: two leads move, no more
