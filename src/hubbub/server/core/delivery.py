"""Delivery: writing envelopes to the sessions connected to this process.

The last stage of the pipeline (admission → sequencer → delivery) and one place for every
write to a participant: to one session in its dialect, a committed channel message to every
member (encoded once per dialect, the same bytes to all), a committed direct message to its
parties (moving their DM marks), and presence changes queued per space and sent as few
frames. The sessions, requests and coordination all deliver through a :class:`Delivery`;
none writes to a connection itself. Nothing here decides who may send what (admission) or
numbers and stores messages (the sequencer): it is handed envelopes that are already
accepted, and durable where they must be. Sleeping members are handed to the coordination
engines' :class:`SleepHook`; which dialect a member speaks is asked of the dialect itself.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

from hubbub.protocol.dialect import Dialect
from hubbub.protocol.dialects import DIALECTS as DIALECTS
from hubbub.protocol.envelope import PROTOCOL, Envelope
from hubbub.protocol.errors import ProtocolError
from hubbub.protocol.ids import SERVER_ID, Clock, UlidGenerator
from hubbub.server.admission.sender import Sender
from hubbub.server.config import Limits
from hubbub.server.core.dm_marks import DmMarks
from hubbub.server.core.events import Events
from hubbub.server.state.activity import Activity
from hubbub.server.state.connection import ws_text_frame, ws_text_frames
from hubbub.server.state.metrics import Metrics
from hubbub.server.state.port import Sent
from hubbub.server.state.space import Channel, Session, SpaceState
from hubbub.server.state.visibility import announced_channels, sees_channel


class SleepHook(Protocol):
    """The coordination engines' say over what reaches a sleeping member (buffer or drop)."""

    def to_sleepers(self, space: SpaceState, ch: Channel, env: Envelope) -> None:
        """A channel message reached ``ch``'s sleeping members."""
        ...

    def to_sleeper(self, s: Session, env: Envelope) -> None:
        """A direct message reached sleeping ``s``."""
        ...


def _send_to_listeners(ch: Channel, dialect: str, buf: bytes, sent: Sent) -> int:
    """Queue ``buf`` (made from ``sent``) for every awake member of ``ch`` on ``dialect``
    (one call per group of connections); how many members that is. Sending only queues, so
    the lists stay put."""
    conns, groups = ch.by_dialect[dialect], ch.groups[dialect]
    for conn in conns.values():
        conn.send(buf, sent)
    n = len(conns)
    for group, members in groups.items():
        group.send_many(buf, members)
        n += len(members)
    return n


def _announced(
    space: SpaceState, entry: dict[str, Any], seen: Sequence[str] = ()
) -> dict[str, Any]:
    """A presence entry as a listener hears it: its ``channels`` list names the public
    channels and, of the private ones, those in ``seen`` (the ones the listener may see:
    ``state/visibility.py``); the entry itself when nothing is left out."""
    names = entry.get("channels")
    if not names:
        return entry
    shown = sorted({*announced_channels(space, names), *(n for n in names if n in seen)})
    return entry if len(shown) == len(names) else entry | {"channels": shown}


def _private_channels(space: SpaceState, entries: Iterable[dict[str, Any]]) -> list[str]:
    """The private channels the ``channels`` lists of ``entries`` name, sorted."""
    named = {n for e in entries for n in e.get("channels", ())}
    return sorted(named.difference(announced_channels(space, named)))


class _Variant:
    """One wording of a presence run (the channels its listeners may see), framed once per
    dialect for all of them."""

    __slots__ = ("each", "entries", "env", "frames")

    def __init__(self, env: Envelope, entries: list[dict[str, Any]]) -> None:
        self.env = env
        self.entries = entries
        self.frames: dict[str, bytes] = {}
        self.each: dict[str, tuple[bytes, list[Envelope]]] = {}


def _frames(dialect: Dialect, env: Envelope, data: bytes | None = None) -> bytes:
    """``env`` framed for ``dialect`` (``data``: its stored JSON, sent as it is where the
    dialect's frames are envelopes); empty when the dialect cannot express it."""
    if data is not None and dialect.frames_are_envelopes:
        return ws_text_frame(data)
    return ws_text_frames(dialect.encode(env))


class Delivery:
    """Writes envelopes to this process's sessions: one, a channel's members, presence."""

    def __init__(
        self,
        limits: Limits,
        metrics: Metrics,
        activity: Activity,
        clock: Clock,
        ids: UlidGenerator,
        shutting_down: Callable[[], bool] = lambda: False,
        marks: DmMarks | None = None,
        events: Events | None = None,
    ) -> None:
        self.limits = limits
        self.metrics = metrics
        self.activity = activity
        self.clock = clock
        self.ids = ids
        self.shutting_down = shutting_down
        """Whether the server is closing every connection (presence is then not announced)."""
        self.marks = marks
        """Where DMs written to their parties are noted (None: not noted, as in unit tests)."""
        self.events = events or Events()
        self.sleepers: SleepHook | None = None
        """The engines' hook for sleeping members (the gateway wires coordination in)."""

    # ------------------------------------------------------------------ envelopes

    def server_env(
        self,
        kind: str,
        payload: dict[str, Any],
        *,
        to: list[str] | None = None,
        channel: str | None = None,
        correlation_id: list[str] | None = None,
    ) -> Envelope:
        """A new envelope from the server itself (``from`` is ``system:gateway``)."""
        now = self.clock.now_ms()
        return Envelope(
            kind=kind,
            protocol=PROTOCOL,
            id=self.ids.new(now),
            ts=self.clock.iso(now),
            from_=SERVER_ID,
            to=to,
            channel=channel,
            correlation_id=correlation_id,
            payload=payload,
        )

    # ------------------------------------------------------------------ writing

    def send(self, s: Session, env: Envelope) -> None:
        """Write ``env`` to one session in its dialect."""
        if env.kind == "system/welcome":
            payloads = s.conn.dialect.welcome(env)
        else:
            payloads = s.conn.dialect.encode(env)
        s.conn.send_payloads(payloads, env)
        self.metrics.messages_out += 1

    def send_shared(
        self, s: Session, env: Envelope, frames: dict[str, bytes], data: bytes | None = None
    ) -> None:
        """Write ``env`` to ``s``, encoded once per dialect across the calls sharing
        ``frames`` (dialect name → framed bytes; an empty entry: not expressible there;
        ``data``: the envelope's JSON, when the caller has it)."""
        dialect = s.conn.dialect
        buf = frames.get(dialect.name)
        if buf is None:
            buf = frames[dialect.name] = _frames(dialect, env, data)
        if buf:
            s.conn.send(buf, env)
            self.metrics.messages_out += 1

    def error(self, s: Session, exc: ProtocolError) -> None:
        """Answer a problem to the participant that caused it."""
        self.metrics.errors[exc.code.value] += 1
        if self.activity.watched:  # dashboard feed: errors only while someone watches
            self.activity.publish(
                "error", s.space.id, participant=s.id, code=exc.code.value, message=exc.message
            )
        self.send(s, self.error_env(s.id, exc))

    def error_env(self, pid: str, exc: ProtocolError) -> Envelope:
        """The ``system/error`` that tells participant ``pid`` of ``exc``."""
        cid = [exc.correlation_id] if exc.correlation_id else None
        return self.server_env("system/error", exc.payload(), to=[pid], correlation_id=cid)

    def deliver_to(self, s: Session, env: Envelope) -> None:
        """Send a stored or server-made envelope to one session (a DM counts as read)."""
        self.send(s, env)
        if env.channel is None and env.seq is not None and self.marks is not None:
            self.marks.advance(s, env.seq)  # a DM held for a sleeper, delivered at its wake

    # ------------------------------------------------------------------ committed messages

    def channel(
        self, space: SpaceState, ch: Channel, env: Envelope, data: bytes, extra: Sequence[str]
    ) -> None:
        """A committed channel message: every awake member, the sleepers' hook, and the
        ``extra`` recipients outside the channel (a proposer hearing its proposal's outcome)."""
        self.fanout(ch, env, data)
        if ch.sleepers and self.sleepers is not None:
            self.sleepers.to_sleepers(space, ch, env)
        for pid in extra:
            other = space.online.get(pid)
            if other is not None and pid not in ch.members and sees_channel(ch, pid):
                self.send(other, env)

    def dm(self, sender: Sender, env: Envelope, data: bytes, extra: Sequence[str]) -> None:
        """A committed direct message: written to its online parties (sleepers buffer it; the
        offline get it from the store when they come back), each party's mark moved."""
        space = sender.space
        seq = env.seq or 0
        to = env.to or []
        frames: dict[str, bytes] = {}
        targets = [space.online[p] for p in to if p in space.online]
        if (
            isinstance(sender, Session)
            and sender.id not in to
            and space.online.get(sender.id) is sender
        ):
            targets.append(sender)
        targets.extend(
            space.online[p] for p in extra if p in space.online and p not in to and p != sender.id
        )
        for s in targets:
            if s.asleep and self.sleepers is not None:
                self.sleepers.to_sleeper(s, env)
                continue
            self.send_shared(s, env, frames, data)
            if (s.id in to or s is sender) and self.marks is not None:
                self.marks.advance(s, seq)

    def fanout(self, ch: Channel, env: Envelope, data: bytes | None = None) -> None:
        """Write one envelope to every awake member: encoded once per dialect, same bytes to
        all (``data``: its MEW encoding, when the caller has it)."""
        n = 0
        groups = ch.groups
        for dname, conns in ch.by_dialect.items():
            if conns or groups[dname]:
                dialect = DIALECTS[dname]
                if data is not None and dialect.frames_are_envelopes:
                    buf = ws_text_frame(data)
                else:
                    buf = ws_text_frames(dialect.encode(env))
                if buf:
                    n += _send_to_listeners(ch, dname, buf, env)
        self.metrics.messages_out += n

    def fanout_all(
        self, ch: Channel, envs: Sequence[Envelope], datas: Sequence[bytes] | None = None
    ) -> None:
        """Write several envelopes to every awake member, in order, one write per member
        (``datas``: their MEW encodings, when the caller has them: a committed run)."""
        if len(envs) == 1:
            self.fanout(ch, envs[0], datas[0] if datas is not None else None)
            return
        n = 0
        for dname, conns in ch.by_dialect.items():
            if not conns and not ch.groups[dname]:
                continue
            dialect = DIALECTS[dname]
            if datas is None:
                framed = [_frames(dialect, e) for e in envs]
            else:
                framed = [_frames(dialect, e, d) for e, d in zip(envs, datas, strict=True)]
            frames = [f for f in framed if f]  # those the dialect can express
            if frames:
                sent = envs
                if len(frames) != len(envs):
                    sent = [e for e, f in zip(envs, framed, strict=True) if f]
                n += _send_to_listeners(ch, dname, b"".join(frames), sent) * len(frames)
        self.metrics.messages_out += n

    # ------------------------------------------------------------------ the whole space

    def space(self, space: SpaceState, env: Envelope, but: str | None = None) -> None:
        """Write a server envelope to everyone connected to ``space`` (an invitation into
        the space), ``but`` one, encoded once per dialect; not stored."""
        self.to_each([s for s in list(space.online.values()) if s.id != but], env)

    def to_each(self, recipients: Iterable[Session], env: Envelope) -> None:
        """Write a server envelope to each of ``recipients`` (a stream's audience, chosen by
        ``state/visibility.py``), encoded once per dialect; not stored."""
        frames: dict[str, bytes] = {}
        for s in recipients:
            self.send_shared(s, env, frames)

    def stream_frame(self, recipients: Iterable[Session], data: bytes) -> None:
        """Relay a stream data frame as it arrived to ``recipients`` (the stream's audience,
        chosen by ``state/visibility.py``), on the dialects that carry stream frames;
        sleeping members skip it."""
        buf = ws_text_frame(data)
        n = 0
        for s in recipients:
            if s.conn.dialect.stream_frames and not s.asleep:
                s.conn.send(buf)
                n += 1
        self.metrics.messages_out += n

    # ------------------------------------------------------------------ presence

    def queue_presence(
        self, space: SpaceState, event: str, entry: dict[str, Any], channel: str | None = None
    ) -> None:
        """Announce a presence change (``join``, ``leave``, ``update``; in ``channel`` or the
        whole space) with the next presence flush of ``space``."""
        if self.shutting_down():
            return  # everyone is leaving: announcing each departure to the rest is O(N²)
        entry = space.announced.presence_entry(event, entry, channel)  # list or digest
        self.events.presence(space.id, event, entry, channel)
        space.pending_presence.append((event, entry, channel))
        if not space.presence_scheduled:
            space.presence_scheduled = True
            delay = self.limits.presence_coalesce_ms / 1000
            asyncio.get_running_loop().call_later(delay, self.flush_presence, space)

    def flush_presence(self, space: SpaceState) -> None:
        """Send queued presence events, consecutive events of one kind as one frame."""
        space.presence_scheduled = False
        pending, space.pending_presence = space.pending_presence, []
        runs: list[tuple[str, str | None, list[dict[str, Any]]]] = []
        for event, entry, channel in pending:
            if runs and runs[-1][0] == event and runs[-1][1] == channel:
                runs[-1][2].append(entry)
            else:
                runs.append((event, channel, [entry]))
        for event, channel, full in runs:
            # a participant's channels, heard by everyone: the public ones, and to each
            # listener the private ones it may see (most hear one shared variant)
            hidden = _private_channels(space, full)
            variants: dict[tuple[str, ...], _Variant] = {}
            if channel is not None:
                ch = space.channels.get(channel)
                recipients: Iterable[Session] = ch.members.values() if ch else ()
            else:
                recipients = space.online.values()
            membership = event in ("join", "leave")
            scoped = membership or event == "update"
            per_channel = False  # someone online hears of it per channel (below)
            for s in list(recipients):
                dialect = s.conn.dialect
                if scoped and dialect.channel_presence:
                    per_channel = True
                    continue  # told per channel, below
                seen = tuple(n for n in hidden if sees_channel(space.channels[n], s.id))
                v = variants.get(seen)
                if v is None:
                    v = variants[seen] = self._variant(space, event, channel, full, seen)
                if len(v.entries) > 1 and not s.presence_lists:
                    self._send_each(s, event, channel, v.entries, v.each)
                else:
                    self.send_shared(s, v.env, v.frames)
            public = [_announced(space, e) for e in full]
            if membership:
                self._membership_by_channel(space, event, channel, full, public)
            elif event == "update" and per_channel:
                self._update_to_co_members(space, public)

    def _variant(
        self,
        space: SpaceState,
        event: str,
        channel: str | None,
        full: list[dict[str, Any]],
        seen: tuple[str, ...],
    ) -> _Variant:
        """A run of presence events as the listeners who may see the private channels
        ``seen`` (of those the entries name) hear it."""
        entries = [_announced(space, e, seen) for e in full]
        # MEW clients read payload.participant of every presence: a run keeps its first
        payload: dict[str, Any] = {"event": event, "participant": entries[0]}
        if len(entries) > 1:
            payload["participants"] = entries
        if channel is not None:
            payload["channel"] = channel
        return _Variant(self.server_env("system/presence", payload), entries)

    def _send_each(
        self,
        s: Session,
        event: str,
        channel: str | None,
        entries: list[dict[str, Any]],
        each: dict[str, tuple[bytes, list[Envelope]]],
    ) -> None:
        """A run of presence events as one frame per participant, for a client that reads
        one participant per frame (MEW's ``MEWAgent`` reads only the first of a list)."""
        dialect = s.conn.dialect
        cached = each.get(dialect.name)
        if cached is None:
            parts, envs = [], []
            for entry in entries:
                payload: dict[str, Any] = {"event": event, "participant": entry}
                if channel is not None:
                    payload["channel"] = channel
                env = self.server_env("system/presence", payload)
                part = _frames(dialect, env, None)
                if part:
                    parts.append(part)
                    envs.append(env)
            cached = each[dialect.name] = (b"".join(parts), envs)
        buf, sent = cached
        if buf:
            s.conn.send(buf, sent)
            self.metrics.messages_out += len(entries)

    def _membership_by_channel(
        self,
        space: SpaceState,
        event: str,
        channel: str | None,
        full: list[dict[str, Any]],
        entries: list[dict[str, Any]],
    ) -> None:
        """Send join/leave events to the channel-scoped dialects: per channel (of the
        ``full`` entries' lists), to its members only, never to the participant the event is
        about; each carries its announced entry (``entries``: public channels only)."""
        by_channel: dict[str, list[dict[str, Any]]] = {}
        if channel is not None:
            by_channel[channel] = entries
        else:
            for whole, entry in zip(full, entries, strict=True):
                for name in whole.get("channels", ()):
                    by_channel.setdefault(name, []).append(entry)
        for name, people in by_channel.items():
            ch = space.channels.get(name)
            if ch is None:
                continue
            # per dialect: each person's frames, so that a subject can be left out of its own
            pieces: dict[str, list[tuple[str, bytes, Envelope]]] = {}
            for s in list(ch.members.values()):
                dialect = s.conn.dialect
                if not dialect.channel_presence:
                    continue
                mine = pieces.get(dialect.name)
                if mine is None:
                    mine = pieces[dialect.name] = [
                        (str(e.get("id")), *self._membership_frames(dialect, event, e, name))
                        for e in people
                    ]
                theirs = [(frames, env) for pid, frames, env in mine if pid != s.id]
                buf = b"".join(frames for frames, _ in theirs)
                if buf:
                    s.conn.send(buf, [env for _, env in theirs])
                    self.metrics.messages_out += 1

    def _update_to_co_members(self, space: SpaceState, entries: list[dict[str, Any]]) -> None:
        """Send presence updates to the channel-scoped dialects: to those who share a channel
        with the participant, never to the participant itself (agentchat's
        ``PRESENCE_CHANGED``)."""
        for entry in entries:
            pid = entry.get("id")
            subject = space.online.get(pid) if isinstance(pid, str) else None
            if subject is None:
                continue  # gone meanwhile: its leave tells the rest
            env = self.server_env("system/presence", {"event": "update", "participant": entry})
            frames: dict[str, bytes] = {}
            told = {subject.id}
            for name in sorted(subject.channels):
                ch = space.channels.get(name)
                for s in list(ch.members.values()) if ch is not None else ():
                    if s.id in told or not s.conn.dialect.channel_presence:
                        continue
                    told.add(s.id)
                    self.send_shared(s, env, frames)

    def _membership_frames(
        self, dialect: Dialect, event: str, entry: dict[str, Any], channel: str
    ) -> tuple[bytes, Envelope]:
        env = self.server_env(
            "system/presence", {"event": event, "participant": entry, "channel": channel}
        )
        return ws_text_frames(dialect.encode(env)), env
