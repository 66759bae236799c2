"""The sequencer: the second stage of the pipeline, where an admitted message gets its place.

Channels and the DM stream go through one path (:meth:`Sequencer.accept`): the next ``seq``
of the place, the message's id remembered (so a resend is answered with the original,
:meth:`Sequencer.resent`), the stored bytes queued with the next group commit, and — once
that commit is durable — the place's delivered ``seq`` and recent cache moved on and the
message handed to :class:`~hubbub.server.core.delivery.Delivery`. The same state serves the
readers: a join reads the history and enters the live stream without a gap
(:meth:`Sequencer.join`), a reconnect gets the DMs it missed (:meth:`Sequencer.replay_dms`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Final

import msgspec

from hubbub.protocol.envelope import PROTOCOL, Envelope, encode
from hubbub.protocol.ids import DM_STREAM, Clock
from hubbub.server.admission.admit import Destination
from hubbub.server.admission.sender import Sender
from hubbub.server.config import Limits
from hubbub.server.core import pages
from hubbub.server.core.delivery import Delivery
from hubbub.server.core.dm_marks import DmMarks
from hubbub.server.core.pages import Page
from hubbub.server.core.tasks import Tasks
from hubbub.server.state.metrics import Metrics
from hubbub.server.state.space import Channel, Session, SpaceState
from hubbub.store.base import MessageRef, Store

HISTORY_CACHE: Final = 512
"""Recent messages of each channel kept in memory for joins and resumes."""
MAX_SEQ: Final = 2**62
"""Sequence numbers sent by clients are clamped to [0, MAX_SEQ] (SQLite integers are 64-bit)."""

After = Callable[[], None] | None
"""What follows a message's delivery (the observers, the sender's sleep), if anything."""


def clamp_seq(value: int) -> int:
    """A client's ``seq`` clamped to what the store can hold."""
    return max(0, min(value, MAX_SEQ))


class _ChannelRun:
    """Consecutive messages of one channel, with nothing else to do after their delivery, that
    one commit makes durable: one callback delivers them all, one write per member."""

    __slots__ = ("ch", "datas", "envs", "sequencer", "space")

    def __init__(
        self, sequencer: Sequencer, space: SpaceState, ch: Channel, env: Envelope, data: bytes
    ) -> None:
        self.sequencer = sequencer
        self.space = space
        self.ch = ch
        self.envs = [env]
        self.datas = [data]

    def __call__(self) -> None:
        self.sequencer._run_committed(self)


class Sequencer:
    """Numbers, stores and releases the messages of every channel and the DM stream."""

    def __init__(
        self,
        store: Store,
        limits: Limits,
        metrics: Metrics,
        delivery: Delivery,
        marks: DmMarks,
        tasks: Tasks,
        clock: Clock,
    ) -> None:
        self.store = store
        self.limits = limits
        self.metrics = metrics
        self.delivery = delivery
        self.marks = marks
        self.tasks = tasks
        self.clock = clock
        self.epoch = ""
        """The store's history identity, sent in every welcome (see docs/reliability.md)."""
        self._run: _ChannelRun | None = None
        """The newest run of channel messages waiting for their commit, which the next message
        of its channel joins while it is the store's last callback (nothing queued after it)."""

    # ------------------------------------------------------------------ lifecycle

    async def load(self, space: SpaceState) -> None:
        """Continue each channel's and the DM stream's numbering where it stopped, and
        recognise the last day's message ids again."""
        horizon = self.clock.now_ms() - space.ids.window_ms
        self.store.forget_refs(space.id, horizon)  # ids older than the window are pruned
        for ref in await self.store.message_refs(space.id, horizon, space.ids.cap):
            space.ids.add(ref)
        seqs = await self.store.last_seqs(space.id)
        names = dict.fromkeys(space.config.channels)  # ordered, O(1) membership
        names.update(dict.fromkeys(await self.store.channels(space.id)))
        for name in names:
            space.channels[name] = Channel(name, seqs.get(name, 0), HISTORY_CACHE)
        space.dm_seq = space.dm_assigned = seqs.get(DM_STREAM, 0)
        await self.marks.load(space)

    # ------------------------------------------------------------------ writing

    def accept(
        self,
        sender: Sender,
        dest: Destination,
        env: Envelope,
        now: int,
        extra: Sequence[str] = (),
        after: After = None,
    ) -> None:
        """Number ``env`` in its place and queue it for storage; it is delivered once the
        commit holding it is done (acknowledged means durable)."""
        space = sender.space
        ch = dest.channel
        if ch is not None:
            env.channel = ch.name
            ch.assigned += 1
            env.seq = ch.assigned
            place = ch.name
        else:
            env.to = dest.to
            env.channel = None
            space.dm_assigned += 1
            env.seq = space.dm_assigned
            place = DM_STREAM
        data = encode(env)
        ref = MessageRef(env.id, sender.id, place, env.seq, now, dest.digest)
        space.ids.add(ref)
        horizon = space.ids.prune_due(now)
        if horizon is not None:  # the store's records follow the window while running
            self.store.forget_refs(space.id, horizon)
        if ch is not None:
            self.store.append(space.id, place, env.seq, data, ref)
            if extra or after is not None:
                self.store.after_commit(
                    lambda: self._channel_committed(space, ch, env, data, extra, after)
                )
                return
            run = self._run
            if run is not None and run.ch is ch and self.store.is_last_callback(run):
                run.envs.append(env)
                run.datas.append(data)
            else:
                self._run = run = _ChannelRun(self, space, ch, env, data)
                self.store.after_commit(run)
        else:
            self.store.append_dm(space.id, env.seq, [sender.id, *(env.to or ())], data, ref)
            self.store.after_commit(lambda: self._dm_committed(sender, env, data, extra, after))

    def _run_committed(self, run: _ChannelRun) -> None:
        """A run of one channel's messages is durable: shown to every member in one go."""
        if self._run is run:
            self._run = None
        ch = run.ch
        if ch.sleepers:  # the sleepers' hook sees each message between two deliveries
            for env, data in zip(run.envs, run.datas, strict=True):
                self._channel_committed(run.space, ch, env, data, (), None)
            return
        recent = ch.recent
        for env, data in zip(run.envs, run.datas, strict=True):
            ch.seq = env.seq or ch.seq
            recent.append((ch.seq, data))
        self.delivery.fanout_all(ch, run.envs, run.datas)

    def _channel_committed(
        self,
        space: SpaceState,
        ch: Channel,
        env: Envelope,
        data: bytes,
        extra: Sequence[str],
        after: After,
    ) -> None:
        """A channel message is durable: show it to every member, in ``seq`` order."""
        ch.seq = env.seq or ch.seq
        ch.recent.append((ch.seq, data))
        self.delivery.channel(space, ch, env, data, extra)
        if after is not None:
            after()

    def _dm_committed(
        self, sender: Sender, env: Envelope, data: bytes, extra: Sequence[str], after: After
    ) -> None:
        """A direct message is durable: write it to its online parties."""
        sender.space.dm_seq = env.seq or 0
        self.delivery.dm(sender, env, data, extra)
        if after is not None:
            after()

    # ------------------------------------------------------------------ resends

    def resent(self, sender: Sender, env: Envelope, ref: MessageRef) -> Envelope:
        """Answer a resend of an accepted message with its original (its lost echo is sent
        again once delivered); nothing is delivered twice."""
        self.metrics.resends += 1
        space = sender.space
        dm = ref.place == DM_STREAM
        delivered = ref.seq <= (space.dm_seq if dm else space.channels[ref.place].seq)
        if delivered and isinstance(sender, Session):
            self.tasks.spawn(self._echo_original(sender, ref), answer=sender)
        return Envelope(
            kind=env.kind,
            protocol=PROTOCOL,
            id=ref.id,
            ts=self.clock.iso(ref.ts_ms),
            from_=sender.id,
            channel=None if dm else ref.place,
            seq=ref.seq,
            payload=env.payload,
        )

    async def _echo_original(self, s: Session, ref: MessageRef) -> None:
        """Send a resending participant its original message again (its lost echo)."""
        space = s.space
        if ref.place == DM_STREAM:
            rows = await self.store.dm_history(space.id, s.id, after_seq=ref.seq - 1, limit=1)
        else:
            rows = await self.store.history(space.id, ref.place, after_seq=ref.seq - 1, limit=1)
        if rows and rows[0].seq == ref.seq and space.online.get(s.id) is s:
            self.delivery.send(s, msgspec.json.decode(rows[0].data, type=Envelope))

    # ------------------------------------------------------------------ reading

    async def join(
        self,
        s: Session,
        ch: Channel,
        after_seq: int | None,
        *,
        announce: bool = True,
        reset: str | None = None,
    ) -> None:
        """Add ``s`` to ``ch`` and send ``channel/joined`` with history; no message is lost
        between the history and the live stream (the last step runs without awaiting).

        ``s`` is a member from the first moment (a message it sends right after its join is
        accepted) but receives live messages only from the ``channel/joined`` on. A resume
        point past the channel's end, or ``reset`` (another history epoch), makes this a
        fresh join that says ``history_reset``."""
        name = ch.name
        ch.add_joining(s)
        if after_seq is not None:
            after_seq = clamp_seq(after_seq)
            if after_seq > ch.seq:
                reset, after_seq = "past_end", None
        collected: list[tuple[int, bytes]] = []
        has_more = False
        max_bytes = self.limits.history_page_bytes
        if after_seq is None:
            # a fresh join: the newest messages that fit one page (older ones: history/request)
            n = self.limits.history_on_join
            if ch.seq <= len(ch.recent) or len(ch.recent) >= n:
                tail = ch.cached_after(max(0, ch.seq - n)) or []
                collected = [(seq, data) for seq, data in tail if seq <= ch.seq]
                collected.reverse()
                page = Page(n, max_bytes)
                collected = [row for row in collected if page.fits(row[1])]
                collected.reverse()
            else:
                rows, _ = await pages.backward(
                    lambda before, k: self.store.history(
                        s.space.id, name, before_seq=before, limit=k
                    ),
                    None,
                    n,
                    max_bytes,
                )
                collected = [(r.seq, r.data) for r in rows]
                # what was committed while the store was read follows without a gap
                last = collected[-1][0] if collected else 0
                while (gap := ch.cached_after(last)) is None:
                    rows = await self.store.history(
                        s.space.id, name, after_seq=last, limit=self.limits.history_page_max
                    )
                    if not rows:
                        break
                    collected.extend((r.seq, r.data) for r in rows)
                    last = rows[-1].seq
                collected.extend(gap or ())
        else:
            # a resume: what was missed, one page of it (the client pages the rest)
            page = Page(self.limits.resume_max, max_bytes)
            while not page.full:
                if s.space.online.get(s.id) is not s:
                    return  # disconnected while reading history
                cached = ch.cached_after(after_seq)
                if cached is not None:
                    for row in cached:
                        if not page.fits(row[1]):
                            break
                        collected.append(row)
                    break
                k = page.batch()
                rows = await self.store.history(s.space.id, name, after_seq=after_seq, limit=k)
                for r in rows:
                    if not page.fits(r.data):
                        break
                    collected.append((r.seq, r.data))
                if len(rows) < k or page.full:
                    break
                after_seq = rows[-1].seq
            has_more = page.full
        if s.space.online.get(s.id) is not s or ch.members.get(s.id) is not s:
            return  # disconnected, or left the channel, while the history was read
        # rows committed but not yet fanned out reach the new member live
        collected = [row for row in collected if row[0] <= ch.seq]
        ch.add(s)
        payload: dict[str, Any] = {
            "channel": name,
            "members": list(ch.members),
            "history": [msgspec.Raw(d) for _, d in collected],
            "seq": ch.seq,
        }
        identities = {m.id: who for m in ch.members.values() if (who := m.identity())}
        if identities:  # names and keys' ``verified`` of the members that have them
            payload["identities"] = identities
        if has_more:
            payload["has_more"] = True
        if ch.private:
            payload["private"] = True  # invite-only: members may invite (the web chat offers it)
        if reset is not None:
            payload["history_reset"] = {"reason": reset, "epoch": self.epoch}
        self.delivery.send(
            s, self.delivery.server_env("channel/joined", payload, to=[s.id], channel=name)
        )
        if announce:
            self.delivery.queue_presence(s.space, "join", s.summary(), channel=name)

    async def replay_dms(self, s: Session, mark: int, upto: int) -> None:
        """Send ``s`` the DMs it has not seen, ``mark < seq <= upto``, from the store."""
        space = s.space
        while mark < upto:
            rows = await self.store.dm_history(
                space.id, s.id, after_seq=mark, limit=self.limits.history_page_max
            )
            if space.online.get(s.id) is not s:
                return
            rows = [r for r in rows if r.seq <= upto]
            if not rows:
                break
            for row in rows:
                env = msgspec.json.decode(row.data, type=Envelope)
                hook = self.delivery.sleepers
                if s.asleep and hook is not None:
                    hook.to_sleeper(s, env)
                else:
                    self.delivery.send(s, env)
            mark = rows[-1].seq
        self.marks.advance(s, upto)
