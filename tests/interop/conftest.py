"""Interop fixtures: raw MEW peers on a real gateway."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.conftest import RunningGateway
from tests.interop.test_mew_client import MakePeer, MewPeer


@pytest.fixture
async def mew(gateway: RunningGateway) -> AsyncIterator[MakePeer]:
    """``await mew("id", capabilities=[...])``: a :class:`MewPeer` joined to the open space."""
    peers: list[MewPeer] = []

    async def make(pid: str, **options: Any) -> MewPeer:
        peer = await MewPeer.join(gateway, pid, **options)
        peers.append(peer)
        return peer

    yield make
    for peer in peers:
        await peer.ws.close()
