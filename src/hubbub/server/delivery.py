"""Delivery: writing envelopes to the sessions connected to this process.

One place for every write to a participant: to one session in its dialect, to every member
of a channel (encoded once per dialect, the same bytes to all), and presence changes queued
per space and sent as few frames. The router and coordination both deliver through a
:class:`Delivery`; neither writes to a connection itself. Nothing here decides who may send
what (admission) or numbers and stores messages (sequencing and storage): it is handed
envelopes that are already accepted, and durable where they must be.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from hubbub.protocol.agentchat import AgentchatDialect
from hubbub.protocol.dialect import Dialect
from hubbub.protocol.envelope import PROTOCOL, Envelope, encode
from hubbub.protocol.errors import ProtocolError
from hubbub.protocol.ids import SERVER_ID, Clock, UlidGenerator
from hubbub.protocol.mew import MewDialect
from hubbub.server import observe  # dashboard feed
from hubbub.server.activity import Activity
from hubbub.server.config import Limits
from hubbub.server.connection import ws_text_frame, ws_text_frames
from hubbub.server.metrics import Metrics
from hubbub.server.space import Channel, Session, SpaceState

DIALECTS: dict[str, Dialect] = {"mew": MewDialect(), "agentchat": AgentchatDialect()}
"""The codec of each dialect, by name."""


def _send_to_listeners(ch: Channel, dialect: str, buf: bytes) -> int:
    """Queue ``buf`` for every awake member of ``ch`` on ``dialect`` (one call per group of
    connections); how many members that is. Sending only queues, so the lists stay put."""
    conns, groups = ch.by_dialect[dialect], ch.groups[dialect]
    for conn in conns.values():
        conn.send(buf)
    n = len(conns)
    for group, members in groups.items():
        group.send_many(buf, members.values())
        n += len(members)
    return n


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
    ) -> None:
        self.limits = limits
        self.metrics = metrics
        self.activity = activity
        self.clock = clock
        self.ids = ids
        self.shutting_down = shutting_down
        """Whether the server is closing every connection (presence is then not announced)."""

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
        s.conn.send_payloads(payloads)
        self.metrics.messages_out += 1

    def send_shared(self, s: Session, env: Envelope, frames: dict[str, bytes]) -> None:
        """Write ``env`` to ``s``, encoded once per dialect across the calls sharing
        ``frames`` (dialect name → framed bytes; an empty entry: not expressible there)."""
        dname = s.conn.dialect.name
        buf = frames.get(dname)
        if buf is None:
            buf = frames[dname] = ws_text_frames(s.conn.dialect.encode(env))
        if buf:
            s.conn.send(buf)
            self.metrics.messages_out += 1

    def error(self, s: Session, exc: ProtocolError) -> None:
        """Answer a problem to the participant that caused it."""
        self.metrics.errors[exc.code.value] += 1
        if self.activity.watched:  # dashboard feed: errors only while someone watches
            self.activity.publish(
                "error", s.space.id, participant=s.id, code=exc.code.value, message=exc.message
            )
        payload: dict[str, Any] = {"error": exc.code.value, "message": exc.message, **exc.extra}
        cid = [exc.correlation_id] if exc.correlation_id else None
        self.send(s, self.server_env("system/error", payload, to=[s.id], correlation_id=cid))

    def fanout(self, ch: Channel, env: Envelope, data: bytes | None = None) -> None:
        """Write one envelope to every awake member: encoded once per dialect, same bytes to
        all (``data``: its MEW encoding, when the caller has it)."""
        n = 0
        if ch.by_dialect["mew"] or ch.groups["mew"]:
            frame = ws_text_frame(data if data is not None else encode(env))
            n += _send_to_listeners(ch, "mew", frame)
        if ch.by_dialect["agentchat"] or ch.groups["agentchat"]:
            buf = ws_text_frames(DIALECTS["agentchat"].encode(env))
            if buf:
                n += _send_to_listeners(ch, "agentchat", buf)
        self.metrics.messages_out += n

    def fanout_all(self, ch: Channel, envs: Sequence[Envelope]) -> None:
        """Write several envelopes to every awake member, in order, one write per member."""
        if len(envs) == 1:
            self.fanout(ch, envs[0])
            return
        n = 0
        for dname, conns in ch.by_dialect.items():
            if not conns and not ch.groups[dname]:
                continue
            if dname == "mew":
                buf = b"".join(ws_text_frame(encode(e)) for e in envs)
            else:
                dialect = DIALECTS[dname]
                buf = ws_text_frames([p for e in envs for p in dialect.encode(e)])
            if buf:
                n += _send_to_listeners(ch, dname, buf)
        self.metrics.messages_out += n * len(envs)

    # ------------------------------------------------------------------ presence

    def queue_presence(
        self, space: SpaceState, event: str, entry: dict[str, Any], channel: str | None = None
    ) -> None:
        """Announce a presence change (``join``, ``leave``, ``update``; in ``channel`` or the
        whole space) with the next presence flush of ``space``."""
        if self.shutting_down():
            return  # everyone is leaving: announcing each departure to the rest is O(N²)
        entry = space.announced.presence_entry(event, entry, channel)  # issue 21: list or digest
        observe.presence(self.activity, space.id, event, entry, channel)  # dashboard feed
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
        for event, channel, entries in runs:
            # MEW clients read payload.participant of every presence: a run keeps its first
            payload: dict[str, Any] = {"event": event, "participant": entries[0]}
            if len(entries) > 1:
                payload["participants"] = entries
            if channel is not None:
                payload["channel"] = channel
                ch = space.channels.get(channel)
                recipients: Iterable[Session] = ch.members.values() if ch else ()
            else:
                recipients = space.online.values()
            env = self.server_env("system/presence", payload)
            membership = event in ("join", "leave")
            frames: dict[str, bytes] = {}
            for s in list(recipients):
                dialect = s.conn.dialect
                if membership and dialect.channel_presence:
                    continue  # told per channel, below
                self.send_shared(s, env, frames)
            if membership:
                self._membership_by_channel(space, event, channel, entries)

    def _membership_by_channel(
        self, space: SpaceState, event: str, channel: str | None, entries: list[dict[str, Any]]
    ) -> None:
        """Send join/leave events to the channel-scoped dialects: per channel, to its members
        only, never to the participant the event is about."""
        by_channel: dict[str, list[dict[str, Any]]] = {}
        if channel is not None:
            by_channel[channel] = entries
        else:
            for entry in entries:
                for name in entry.get("channels", ()):
                    by_channel.setdefault(name, []).append(entry)
        for name, people in by_channel.items():
            ch = space.channels.get(name)
            if ch is None:
                continue
            # per dialect: each person's frames, so that a subject can be left out of its own
            pieces: dict[str, list[tuple[str, bytes]]] = {}
            for s in list(ch.members.values()):
                dialect = s.conn.dialect
                if not dialect.channel_presence:
                    continue
                mine = pieces.get(dialect.name)
                if mine is None:
                    mine = pieces[dialect.name] = [
                        (str(e.get("id")), self._membership_frames(dialect, event, e, name))
                        for e in people
                    ]
                buf = b"".join(frames for pid, frames in mine if pid != s.id)
                if buf:
                    s.conn.send(buf)
                    self.metrics.messages_out += 1

    def _membership_frames(
        self, dialect: Dialect, event: str, entry: dict[str, Any], channel: str
    ) -> bytes:
        env = self.server_env(
            "system/presence", {"event": event, "participant": entry, "channel": channel}
        )
        return ws_text_frames(dialect.encode(env))
