"""Requests: the kinds the gateway answers itself (the kind table's ``request`` rows).

Channel membership, channel listing, history pages, capability changes, heartbeats and floor
claims. Each handler checks what is particular to its kind and acts through the public calls
of the other parts (admission's channel access, the sequencer's join and DM stream, the
sessions' capabilities, the engines' claim); answers go out after what the sender sent before
them is delivered, so a connection's answers come in the order of its frames.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import msgspec

from hubbub.protocol.capabilities import CapabilityError, validate_capabilities
from hubbub.protocol.envelope import Envelope
from hubbub.protocol.errors import ErrorCode, ProtocolError
from hubbub.protocol.ids import DM_STREAM, is_channel, is_participant_id
from hubbub.protocol.kinds import REQUEST_KINDS
from hubbub.server.admission.admit import Admission, Destination
from hubbub.server.admission.auth import Authenticator
from hubbub.server.admission.authorization import (
    changed_capabilities,
    check_grant,
    invalid_channel,
)
from hubbub.server.admission.grants import Grants
from hubbub.server.admission.invitations import Invitations
from hubbub.server.admission.sender import Sender
from hubbub.server.admission.space_invites import SpaceInvites
from hubbub.server.config import Limits
from hubbub.server.core import pages
from hubbub.server.core.coordination import Coordination
from hubbub.server.core.delivery import Delivery
from hubbub.server.core.mcp_cursors import ListenCursors
from hubbub.server.core.moderation import Moderation
from hubbub.server.core.sequencer import HISTORY_CACHE, Sequencer, clamp_seq
from hubbub.server.core.sessions import Sessions
from hubbub.server.core.streams import Streams
from hubbub.server.core.tasks import Tasks
from hubbub.server.core.verifications import VERIFY_TIMEOUT_MS, Verifications
from hubbub.server.state.space import Channel, Session
from hubbub.server.state.visibility import sees_channel, sees_name
from hubbub.store.base import Store, StoredMessage

Handler = Callable[[Sender, Envelope, int], None]


def _session(sender: Sender, kind: str) -> Session:
    """``sender`` as a connected session; these requests need one."""
    if not isinstance(sender, Session):
        raise ProtocolError(ErrorCode.INVALID_ENVELOPE, f"{kind} needs a WebSocket connection")
    return sender


class Requests:
    """Answers the control kinds; one handler per kind of the kind table's ``request`` rows."""

    def __init__(
        self,
        limits: Limits,
        store: Store,
        admission: Admission,
        sequencer: Sequencer,
        sessions: Sessions,
        grants: Grants,
        delivery: Delivery,
        coordination: Coordination,
        tasks: Tasks,
        invitations: Invitations,
        moderation: Moderation,
        auth: Authenticator,
        streams: Streams,
        space_invites: SpaceInvites,
    ) -> None:
        self.limits = limits
        self.store = store
        self.admission = admission
        self.sequencer = sequencer
        self.sessions = sessions
        self.grants = grants
        self.delivery = delivery
        self.coordination = coordination
        self.tasks = tasks
        self.invitations = invitations
        self.moderation = moderation
        self.auth = auth
        self.space_invites = space_invites
        self.verifications = Verifications()
        self.cursors = ListenCursors(store)
        """Where each MCP participant's listen stopped (``/mcp`` and ``mcp/cursor``)."""
        self.handlers: dict[str, Handler] = {
            "floor/responding-to": self._claim,
            "channel/join": self._join,
            "channel/leave": self._leave,
            "channel/create": self._create,
            "channel/invite": self._invite,
            "chat/typing": self._typing,
            "identity/verify-request": self._verify_request,
            "identity/verify-response": self._verify_response,
            "admin/kick": self._moderate,
            "admin/ban": self._moderate,
            "admin/unban": self._moderate,
            "channel/list": self._list,
            "channel/members": self._members,
            "history/request": self._history,
            "mcp/cursor": self._cursor,
            "system/heartbeat": self._heartbeat,
            "capability/grant": self._capability,
            "capability/revoke": self._capability,
            "space/invite": self._space_invite,
        } | streams.handlers
        assert self.handlers.keys() == REQUEST_KINDS, "one handler per request kind"

    def handle(self, sender: Sender, env: Envelope, now: int) -> None:
        """Act on one admitted request."""
        self.handlers[env.kind](sender, env, now)

    def reply(self, sender: Sender, req: Envelope, kind: str, payload: dict[str, Any]) -> None:
        """Answer ``req`` once what ``sender`` sent before it is delivered (over HTTP: in
        the response)."""
        if isinstance(sender, Session):
            answer = self.delivery.server_env(
                kind, payload, to=[sender.id], correlation_id=[req.id]
            )
            self.store.after_commit(lambda: self.delivery.send(sender, answer))
        else:
            sender.answer = payload

    # ------------------------------------------------------------------ channels

    def _join(self, sender: Sender, env: Envelope, now: int) -> None:
        s = _session(sender, "channel/join")
        name = env.payload.get("channel")
        after = env.payload.get("after_seq")
        if after is not None and (
            not isinstance(after, int) or isinstance(after, bool) or after < 0
        ):
            raise ProtocolError(
                ErrorCode.INVALID_ENVELOPE, "after_seq must be a non-negative integer"
            )
        ch = self.admission.channel_for(s, name, member=False)
        rejoin = s.id in ch.members  # answered again (with history), announced only once
        ch.add_joining(s)  # a message sent right after the join frame is accepted

        async def join() -> None:
            checked = self.admission.channel_for(s, ch.name, member=False)  # still allowed
            await self.sequencer.join(s, checked, after, announce=not rejoin)

        self.tasks.spawn(join(), answer=s)

    def _leave(self, sender: Sender, env: Envelope, now: int) -> None:
        s = _session(sender, "channel/leave")
        name = env.payload.get("channel")
        try:
            ch = self.admission.channel_for(s, name, member=False)
        except ProtocolError as exc:
            exc.extra.setdefault("attempted_kind", "channel/leave")  # agentchat: no answer
            raise
        was_member = ch.remove(s)
        self.reply(s, env, "channel/left", {"channel": name})  # also when not a member
        if was_member:
            self.delivery.queue_presence(s.space, "leave", s.summary(), channel=name)

    def _create(self, sender: Sender, env: Envelope, now: int) -> None:
        name = env.payload.get("channel")
        if not isinstance(name, str) or not is_channel(name):
            raise invalid_channel(name)
        space = sender.space
        self.admission.names.check_channel(
            space.id, space.channels, name, lambda other: sees_name(space, other, sender.id)
        )
        most = self.limits.max_channels
        if len(space.channels) >= most:
            raise ProtocolError(
                ErrorCode.CHANNEL_LIMIT,
                f"space {space.id!r} has {len(space.channels)} channels, the most it may have "
                f"(limits.max_channels = {most}): join an existing channel (channel/list lists "
                "them) or ask the operator to raise HUBBUB_MAX_CHANNELS",
            )
        private = env.payload.get("private", False)
        if not isinstance(private, bool):
            raise ProtocolError(ErrorCode.INVALID_ENVELOPE, "'private' must be true or false")
        ch = space.channels[name] = Channel(name, 0, HISTORY_CACHE)
        self.store.put_channel(space.id, name)
        if private:
            self.invitations.make_private(space, ch, sender.id)
        if isinstance(sender, Session):
            s = sender
            ch.add_joining(s)  # a message sent right after the create frame is accepted

            async def join_when_stored() -> None:
                await self.store.flush()  # the creator hears of the channel once it is durable
                await self.sequencer.join(
                    s, self.admission.channel_for(s, name, member=False), None
                )

            self.tasks.spawn(join_when_stored(), answer=s)

    def _invite(self, sender: Sender, env: Envelope, now: int) -> None:
        """``channel/invite {channel, participant}``: a member lets ``participant`` into a
        private channel; the invitee hears of it (agentchat: a MSG), the inviter gets
        ``channel/invited`` back."""
        s = _session(sender, "channel/invite")
        ch = self.admission.channel_for(s, env.payload.get("channel"), member=False)
        pid = self.invitations.invite(s.space, ch, s.id, env.payload.get("participant"))
        note = {"channel": ch.name, "participant": pid, "by": s.id}
        target = s.space.online.get(pid)
        if target is not None and target is not s:
            invited = self.delivery.server_env("channel/invited", note, to=[pid])
            self.store.after_commit(lambda: self.delivery.send(target, invited))
        self.reply(s, env, "channel/invited", note)

    def _typing(self, sender: Sender, env: Envelope, now: int) -> None:
        """``chat/typing {}`` in a channel: relayed at once to the other members, never
        stored (agentchat's ``TYPING``)."""
        s = _session(sender, "chat/typing")
        ch = self.admission.channel_for(s, env.channel or env.payload.get("channel"))
        for member in list(ch.members.values()):
            if member is not s:
                self.delivery.send(member, env)

    def _list(self, sender: Sender, env: Envelope, now: int) -> None:
        chans = [
            {"name": c.name, "members": len(c.members), "private": c.private}
            for c in sender.space.channels.values()
            if sees_channel(c, sender.id)
        ]
        self.reply(sender, env, "channel/list-response", {"channels": chans})

    def _members(self, sender: Sender, env: Envelope, now: int) -> None:
        ch = self.admission.channel_for(sender, env.payload.get("channel"), member=False)
        self.reply(
            sender,
            env,
            "channel/members-response",
            {
                "channel": ch.name,
                "members": list(ch.members),
                "participants": [m.summary() for m in ch.members.values()],
            },
        )

    # ------------------------------------------------------------------ verification

    def _verify_request(self, sender: Sender, env: Envelope, now: int) -> None:
        """``identity/verify-request {target, nonce}``: forwarded to the target
        (``identity/verify-asked``), acknowledged ``identity/verify-pending``; fails after
        30 s unanswered."""
        s = _session(sender, "identity/verify-request")
        target_id = env.payload.get("target")
        target = s.space.online.get(target_id) if isinstance(target_id, str) else None
        if target is None:
            raise ProtocolError(
                ErrorCode.UNKNOWN_PARTICIPANT, f"participant {target_id!r} is not online"
            )
        pending = self.verifications.ask(
            s.id, target.id, target.pubkey, env.payload.get("nonce"), now
        )
        asked = {"request_id": pending.request_id, "from": s.id, "nonce": pending.nonce}
        self.delivery.send(target, self.delivery.server_env("identity/verify-asked", asked))
        ack = {"request_id": pending.request_id, "target": target.id, "status": "pending"}
        self.reply(s, env, "identity/verify-pending", ack)

        def expire() -> None:
            gone = self.verifications.expire(pending.request_id, pending.expires_at + 1)
            if gone is not None and s.space.online.get(s.id) is s:
                failed = {
                    "request_id": gone.request_id,
                    "target": gone.target,
                    "verified": False,
                    "reason": "Verification timed out",
                }
                self.delivery.send(s, self.delivery.server_env("identity/verify-result", failed))

        asyncio.get_running_loop().call_later(VERIFY_TIMEOUT_MS / 1000, expire)

    def _verify_response(self, sender: Sender, env: Envelope, now: int) -> None:
        """``identity/verify-response {request_id, nonce, signature}`` of the target: both
        sides get ``identity/verify-result {verified}``."""
        s = _session(sender, "identity/verify-response")
        p = env.payload
        pending, ok = self.verifications.answer(
            s.id, p.get("request_id"), p.get("nonce"), p.get("signature"), now
        )
        result: dict[str, Any] = {
            "request_id": pending.request_id,
            "target": pending.target,
            "verified": ok,
        }
        if ok:
            result["pubkey"] = pending.pubkey
        else:
            result["reason"] = "Signature verification failed"
        requester = s.space.online.get(pending.requester)
        if requester is not None:
            told = self.delivery.server_env("identity/verify-result", result)
            self.delivery.send(requester, told)
        self.reply(
            s, env, "identity/verify-result", {"request_id": pending.request_id, "verified": ok}
        )

    # ------------------------------------------------------------------ moderation

    def _moderate(self, sender: Sender, env: Envelope, now: int) -> None:
        """``admin/kick|ban|unban {participant, reason?, admin_key?}`` from an admin (by role,
        or an ``admin_key`` that is the token of an admin of the space): ``admin/result``."""
        space = sender.space
        key = env.payload.get("admin_key")
        owner = self.auth.lookup_token(key) if isinstance(key, str) and key else None
        by_key = (
            owner is not None
            and owner[0] == space.id
            and space.config.participants[owner[1]].role == "admin"
        )
        if sender.role != "admin" and not by_key:
            raise ProtocolError(
                ErrorCode.AUTH_REQUIRED,
                "Invalid admin key: send the token of an admin of this space as admin_key, "
                "or connect as an admin",
            )
        pid = env.payload.get("participant")
        if not isinstance(pid, str) or not is_participant_id(pid):
            raise ProtocolError(ErrorCode.INVALID_ID, f"{pid!r} is not a participant id")
        reason = env.payload.get("reason")
        reason = reason if isinstance(reason, str) and reason else None
        action = env.kind.removeprefix("admin/")
        if action == "kick":
            out = self.moderation.kick(space, pid, sender.id, reason)
            if not out["disconnected"]:
                raise ProtocolError(
                    ErrorCode.UNKNOWN_PARTICIPANT, f"participant {pid!r} is not online"
                )
        elif action == "ban":
            out = self.moderation.ban(space, pid, sender.id, reason)
        else:
            out = self.moderation.unban(space, pid, sender.id)
            if not out["was_banned"]:
                raise ProtocolError(ErrorCode.UNKNOWN_PARTICIPANT, f"{pid!r} is not banned")
        self.reply(sender, env, "admin/result", {"action": action, "success": True} | out)

    # ------------------------------------------------------------------ history

    def _bounds(self, p: dict[str, Any]) -> tuple[int | None, int | None, int]:
        """A history request's ``after_seq``, ``before_seq`` and ``limit``, checked and clamped."""
        after, before, limit = p.get("after_seq"), p.get("before_seq"), p.get("limit", 50)
        for key, val in (("after_seq", after), ("before_seq", before), ("limit", limit)):
            if val is not None and (not isinstance(val, int) or isinstance(val, bool) or val < 0):
                raise ProtocolError(
                    ErrorCode.INVALID_ENVELOPE, f"{key} must be a non-negative integer"
                )
        limit = min(int(limit), self.limits.history_page_max)
        after = None if after is None else clamp_seq(after)
        before = None if before is None else clamp_seq(before)
        return after, before, limit

    def _history(self, sender: Sender, env: Envelope, now: int) -> None:
        p = env.payload
        if p.get("channel") == DM_STREAM:
            self._dm_history(sender, env)
            return
        ch = self.admission.channel_for(sender, p.get("channel"))
        after, before, limit = self._bounds(p)

        async def run() -> None:
            space, size = sender.space.id, self.limits.history_page_bytes
            if after is not None:
                rows, has_more = await pages.forward(
                    lambda a, k: self.store.history(
                        space, ch.name, after_seq=a, before_seq=before, limit=k
                    ),
                    after,
                    limit,
                    size,
                )
            else:
                rows, has_more = await pages.backward(
                    lambda b, k: self.store.history(space, ch.name, before_seq=b, limit=k),
                    before,
                    limit,
                    size,
                )
            messages = [msgspec.Raw(x.data) for x in rows]
            payload = {"channel": ch.name, "messages": messages, "has_more": has_more}
            self.reply(sender, env, "history/response", payload)

        self.tasks.spawn(run(), answer=sender if isinstance(sender, Session) else None)

    def _cursor(self, sender: Sender, env: Envelope, now: int) -> None:
        """``mcp/cursor``: the sender's MCP listen cursor (``hubbub mcp`` resumes from it),
        or, with ``{cursor}``, save it; answered ``mcp/cursor-state {cursor}`` once durable."""
        from hubbub.mcp.cursor import ListenCursor
        from hubbub.mcp.desk import DeskError

        raw = env.payload.get("cursor")
        cursor = None if raw is None else ListenCursor.from_json(raw)
        if raw is not None and cursor is None:
            raise ProtocolError(
                ErrorCode.INVALID_ENVELOPE,
                "mcp/cursor: cursor must be {epoch, channels: {'#name': seq}, dm: seq|null}",
            )
        space, pid = sender.space.id, sender.id

        async def run() -> None:
            if cursor is None:
                saved = await self.cursors.get(space, pid)
            else:
                try:
                    await self.cursors.save(space, pid, cursor)
                except DeskError as exc:
                    raise ProtocolError(ErrorCode.UNAVAILABLE, str(exc)) from None
                saved = cursor
            state = None if saved is None else saved.to_json()
            self.reply(sender, env, "mcp/cursor-state", {"cursor": state})

        self.tasks.spawn(run(), answer=sender if isinstance(sender, Session) else None)

    def _dm_history(self, sender: Sender, env: Envelope) -> None:
        """``history/request`` of ``@dm``: a page of the sender's own DMs, by DM ``seq``, as a
        channel's history is paged (``after_seq``: the first ``limit`` after it; otherwise the
        last ``limit`` before ``before_seq`` or the end)."""
        after, before, limit = self._bounds(env.payload)
        space, pid = sender.space.id, sender.id

        async def run() -> None:
            size = self.limits.history_page_bytes
            if after is not None:

                async def read(a: int, k: int) -> list[StoredMessage]:
                    rows = await self.store.dm_history(space, pid, after_seq=a, limit=k)
                    return [x for x in rows if before is None or x.seq < before]

                rows, has_more = await pages.forward(read, after, limit, size)
            else:
                rows, has_more = await pages.backward(
                    lambda b, k: self.store.dm_history_before(space, pid, before_seq=b, limit=k),
                    before,
                    limit,
                    size,
                )
            messages = [msgspec.Raw(x.data) for x in rows]
            payload = {"channel": DM_STREAM, "messages": messages, "has_more": has_more}
            self.reply(sender, env, "history/response", payload)

        self.tasks.spawn(run(), answer=sender if isinstance(sender, Session) else None)

    # ------------------------------------------------------------------ the rest

    def _heartbeat(self, sender: Sender, env: Envelope, now: int) -> None:
        """Heartbeats keep the connection alive; nothing to route."""

    def _claim(self, sender: Sender, env: Envelope, now: int) -> None:
        self.coordination.claim(sender, env)

    def _capability(self, sender: Sender, env: Envelope, now: int) -> None:
        """``capability/grant`` or ``/revoke``: change the recipient's capabilities, then send
        it the envelope as a DM."""
        p = env.payload
        recipient = p.get("recipient") or (env.to[0] if env.to else None)
        space = sender.space
        if not isinstance(recipient, str) or recipient not in space.known:
            raise ProtocolError(
                ErrorCode.UNKNOWN_PARTICIPANT,
                f"{env.kind} needs 'recipient' naming a participant of space {space.id!r}",
            )
        granted = p.get("capabilities")
        grant_id = p.get("grant_id")
        if env.kind == "capability/revoke" and granted is None and isinstance(grant_id, str):
            granted = self.grants.of_grant(space, grant_id)  # MEW §3.6.2: revoke a grant
            if granted is None:
                raise ProtocolError(
                    ErrorCode.INVALID_ENVELOPE,
                    f"capability/revoke: no grant {grant_id!r} is known (grants are remembered "
                    "by id until the gateway restarts); revoke by 'capabilities' instead",
                )
        try:
            caps = validate_capabilities(granted)
        except CapabilityError as exc:
            raise ProtocolError(ErrorCode.INVALID_ENVELOPE, f"{env.kind}: {exc}") from None
        check_grant(space, sender.id, sender.role, sender.caps, env.kind, caps)
        current = self.grants.current(space, recipient)
        new = changed_capabilities(recipient, current, env.kind, caps)  # limits, no-ops
        self.sessions.set_capabilities(space, recipient, new)
        if env.kind == "capability/grant":
            self.grants.issued(space, env.id, caps)
        dest = Destination(DM_STREAM, to=self.admission.dm_recipients(sender, [recipient]))
        self.sequencer.accept(sender, dest, env, now)
        target = space.online.get(recipient)
        if target is not None:
            self.sessions.leave_channels_not_allowed(target)
            if env.kind == "capability/grant" and target.plain_mew:
                # MEW §3.6.1: the grantee gets a welcome with its capabilities now
                self.store.after_commit(lambda: self.sessions.welcome_again(target))

    def _space_invite(self, sender: Sender, env: Envelope, now: int) -> None:
        """``space/invite {participant_id, initial_capabilities?}`` (MEW §3.6.5): a new
        participant with a new token; ``space/invite-ack`` with the token to the inviter
        alone, a ``system/presence`` ``invited`` (without it) to everyone else."""
        space = sender.space
        self.admission.require_store(env.id)  # the token is acknowledged once it is stored
        invited = self.space_invites.invite(space, sender.id, env.payload, sender.caps)
        ack: dict[str, Any] = {"status": invited.status, "participant_id": invited.participant_id}
        if invited.token is None:
            ack["error"] = (
                f"Participant {invited.participant_id} already exists in this space: "
                "invite another id"
            )
        else:
            ack["token"] = invited.token
        self.reply(sender, env, "space/invite-ack", ack)
        online = space.online.get(sender.id)
        if online is not None and not isinstance(sender, Session):
            self.reply(online, env, "space/invite-ack", ack)  # an HTTP inviter's connection too
        if invited.token is None:
            return
        note = {
            "event": "invited",
            "participant": {"id": invited.participant_id, "capabilities": invited.capabilities},
            "invited_by": sender.id,
        }
        if isinstance(env.payload.get("reason"), str):
            note["reason"] = env.payload["reason"]
        told = self.delivery.server_env("system/presence", note)
        self.store.after_commit(lambda: self.delivery.space(space, told, but=sender.id))
