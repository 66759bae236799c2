"""The ids of a space's recent messages: idempotent resends and ``duplicate_id`` refusals.

A sender that does not know whether its message landed (the connection dropped before the
echo or the ``202``) sends it again with the same ``id``; the gateway recognises it here and
answers with the original instead of delivering it twice. An ``id`` another sender already
used is refused. The window is bounded three ways: ids older than ``window_ms`` (24 h) are
forgotten, a sender's ids beyond its newest ``per_sender`` (10,000), and the space's beyond
its newest ``cap`` (the ``limits.idempotency_ids`` setting).
"""

from __future__ import annotations

from collections import OrderedDict, deque

from hubbub.store.base import MessageRef

DAY_MS = 24 * 3600 * 1000


class MessageIds:
    """Recent message ids of one space, oldest first."""

    def __init__(self, *, window_ms: int = DAY_MS, per_sender: int = 10_000, cap: int) -> None:
        self.window_ms = window_ms
        self.per_sender = per_sender
        self.cap = cap
        self._refs: OrderedDict[str, MessageRef] = OrderedDict()
        self._by_sender: dict[str, deque[str]] = {}

    def __len__(self) -> int:
        return len(self._refs)

    def get(self, msg_id: str) -> MessageRef | None:
        """The record of ``msg_id`` if it is still in the window."""
        return self._refs.get(msg_id)

    def add(self, ref: MessageRef) -> None:
        """Remember a new message's id (the caller checked it is not known)."""
        self._refs[ref.id] = ref
        ids = self._by_sender.get(ref.sender)
        if ids is None:
            ids = self._by_sender[ref.sender] = deque()
        ids.append(ref.id)
        if len(ids) > self.per_sender:
            self._drop(ids.popleft(), ref.sender)
        refs = self._refs
        horizon = ref.ts_ms - self.window_ms
        while refs:
            oldest = next(iter(refs.values()))
            if len(refs) <= self.cap and oldest.ts_ms >= horizon:
                break
            refs.popitem(last=False)
            self._forget_sender_id(oldest)

    def _drop(self, msg_id: str, sender: str) -> None:
        ref = self._refs.get(msg_id)
        if ref is not None and ref.sender == sender:
            del self._refs[msg_id]

    def _forget_sender_id(self, ref: MessageRef) -> None:
        ids = self._by_sender.get(ref.sender)
        if ids and ids[0] == ref.id:
            ids.popleft()
            if not ids:
                del self._by_sender[ref.sender]
