"""Where spaces are led: with W live nodes and S spaces, each node leads ⌊S/W⌋ or ⌈S/W⌉.

Sans-I/O: every node applies these rules to what it knows at each tick of its supervision
(the live nodes, who leads each space), and the leases in Redis keep any two nodes from
leading one space at once. See docs/cluster.md ("Placement").
"""

from __future__ import annotations

from collections.abc import Mapping


def shares(spaces: int, leads: Mapping[str, int]) -> dict[str, int]:
    """How many spaces each live node should lead: ⌈S/W⌉ for the S mod W nodes that lead most
    now (ties by name), ⌊S/W⌋ for the others, so the fewest leads move."""
    if not leads:
        return {}
    order = sorted(leads, key=lambda n: (-leads[n], n))
    base, extra = divmod(spaces, len(order))
    return {node: base + (i < extra) for i, node in enumerate(order)}


def surplus(me: str, spaces: int, leads: Mapping[str, int]) -> int:
    """How many of its spaces node ``me`` should hand over now (0: none)."""
    have = leads.get(me, 0)
    return max(0, have - shares(spaces, leads).get(me, have))


def may_take(me: str, spaces: int, leads: Mapping[str, int], free_ms: float, lease_ms: int) -> bool:
    """Whether node ``me`` takes a space whose lease has been free for ``free_ms``: at once
    while it leads fewer than its share; any node once the space was free a whole lease time
    (so no space stays without a leader, whatever the nodes believe)."""
    if free_ms >= lease_ms:
        return True
    have = leads.get(me, 0)
    return have < shares(spaces, leads).get(me, have + 1)
