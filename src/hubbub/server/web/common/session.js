// One MEW WebSocket session with the gateway, shared by the chat page and the dashboard's
// operator console (docs/protocol.md, docs/reliability.md):
//
// - the join frame, then the welcome and one channel/joined per channel;
// - reconnecting after a drop with `resume` (the last seq seen per channel, and of DMs) and
//   the welcome's `epoch`, so that nothing is missed and nothing arrives twice; a resume that
//   the gateway cannot honour comes back as `history_reset`, which the page is told about;
// - DMs from a known start (`dmStart`): the first connection resumes DMs from the seq it
//   answers, so that only what comes after arrives by itself; "dmstart" (seq) then tells the
//   page that the DMs up to that seq are for it to page back through (history/request @dm);
// - an outbox: a message posted stays "pending" until the gateway's echo of it (same id, now
//   with a seq) — the ack — or a system/error naming it (then "failed", retried with the same
//   id on request: the gateway answers a resend with the original ack, never a second copy).
//   After a reconnect the pending ones are sent again, same ids, in order.
//
// Events (see Emitter): "state" (state, detail) with state connecting | live | reconnecting |
// closed; "welcome" (env); "joined" (channel, {members, history, reset, resumed, env});
// "left" (channel, env); "history" ({channel, messages, forward, hasMore, id, env});
// "envelope" (env) for every other envelope; "ack" (id, echo, sent), "failed" (id, error, env),
// "kept" (id, env) for the outbox; "error" (error, env) for other system/errors; "epoch" (new);
// "dmstart" (seq) after the welcome of a connection that started DMs afresh.

import { Emitter } from "./emitter.js";
import { DM, FINAL_CLOSE_CODES } from "./wire.js";

/** Close codes after which reconnecting would not help: refused, replaced, kicked or banned. */
const FINAL_CODES = new Set(FINAL_CLOSE_CODES);
const BACKOFF_MS = [300, 1000, 2000, 4000, 8000];
const FORWARD_PAGE = 200;
/** Seqs kept above a gap before giving up on the gap (a seq this client is never sent). */
const ABOVE_MAX = 1000;

let counter = 0;

/** A message id unique to this page: the gateway keeps a client's id end to end. */
export function newId(prefix = "web") {
  counter += 1;
  const bytes = new Uint8Array(6);
  crypto.getRandomValues(bytes);
  const rand = Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
  return `${prefix}-${Date.now().toString(36)}-${rand}-${counter}`;
}

const seqOf = (m) => (m && typeof m.seq === "number" ? m.seq : null);

export class Session extends Emitter {
  /**
   * @param hello () => the join frame's identity: {participantId, space, token?, kind?}
   * @param channels the channels to join on connect
   * @param dmFrom the DM seq to resume from on the first connect (0: every DM of this
   *   participant; null: those the gateway has not sent to it yet)
   * @param dmStart async () => the DM seq to resume from when there is none yet (the current
   *   end of the DMs: older ones are paged by the page), or null; called before connecting
   */
  constructor({ hello, channels = ["#general"], dmFrom = null, dmStart = null, reconnect = true, idPrefix = "web" }) {
    super();
    this.hello = hello;
    this.channels = [...channels];
    this.dmResume = dmFrom;
    this.dmStart = dmStart;
    this.dmFresh = null; // the DM seq this connection starts from afresh (told after the welcome)
    this.reconnect = reconnect;
    this.idPrefix = idPrefix;
    this.ws = null;
    this.live = false;
    this.state = "idle";
    this.me = null;
    this.welcome = null;
    this.epoch = null;
    this.marks = new Map(); // channel -> seq up to which every message was received
    this.above = new Map(); // channel -> seqs received above the mark (after a gap)
    this.outbox = new Map(); // id -> {env, status: "pending" | "failed", barrier, error}
    this.barriers = new Map(); // id of a channel/list sent as a barrier -> outbox ids
    this.forward = new Map(); // id of a forward history/request -> channel
    this.attempt = 0;
    this.timer = null;
    this.stopped = true;
    this.final = null;
  }

  // ---------------------------------------------------------------- connection

  start() {
    this.stopped = false;
    this.final = null;
    this._open();
  }

  /** Close for good (no reconnect). */
  stop(code = 1000, reason = "signed out") {
    this.stopped = true;
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = null;
    }
    if (this.ws) this.ws.close(code, reason);
    else this._setState("closed", { code, reason, final: true });
  }

  _open() {
    this._setState(this.attempt ? "reconnecting" : "connecting", {});
    if (this.dmStart && this.dmResume === null) {
      this.dmStart().then(
        (seq) => {
          if (this.stopped) return;
          if (typeof seq === "number") this.dmResume = this.dmFresh = seq;
          this._connect();
        },
        () => {
          if (!this.stopped) this._retry({ code: 0, reason: "the gateway cannot be reached" });
        },
      );
      return;
    }
    this._connect();
  }

  _connect() {
    const ws = new WebSocket((location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/ws");
    this.ws = ws;
    this.live = false;
    ws.addEventListener("open", () => {
      if (this.ws === ws) ws.send(JSON.stringify(this._joinFrame()));
    });
    ws.addEventListener("message", (e) => {
      if (this.ws !== ws) return;
      let env;
      try {
        env = JSON.parse(e.data);
      } catch (err) {
        return;
      }
      if (env && typeof env === "object") this._receive(env);
    });
    ws.addEventListener("close", (e) => this._closed(ws, e));
  }

  _joinFrame() {
    const frame = { type: "join", ...this.hello(), channels: [...this.channels] };
    const resume = {};
    for (const ch of this.channels) if (this.marks.has(ch)) resume[ch] = this.marks.get(ch);
    if (this.dmResume !== null) resume[DM] = this.dmResume;
    frame.resume = resume; // even empty: resends are answered with their originals
    frame.presence_lists = true; // a burst of joins as one frame (people.js reads lists)
    if (this.epoch) frame.epoch = this.epoch;
    return frame;
  }

  _closed(ws, e) {
    if (this.ws !== ws) return;
    this.ws = null;
    this.live = false;
    const final = this.final || (FINAL_CODES.has(e.code) ? { code: e.code, reason: e.reason } : null);
    if (this.stopped || !this.reconnect || final) {
      this.stopped = true;
      this._setState("closed", { code: e.code, reason: e.reason || (final && final.reason) || "", final: !!final });
      return;
    }
    this._retry({ code: e.code, reason: e.reason });
  }

  /** Connect again after a pause that grows with each failed attempt. */
  _retry(detail) {
    const base = BACKOFF_MS[Math.min(this.attempt, BACKOFF_MS.length - 1)];
    this.attempt += 1;
    this._setState("reconnecting", detail);
    this.timer = setTimeout(() => {
      this.timer = null;
      if (!this.stopped) this._open();
    }, base * (0.8 + Math.random() * 0.4));
  }

  _setState(state, detail) {
    this.state = state;
    this.emit("state", state, detail);
  }

  // ---------------------------------------------------------------- sending

  _write(env) {
    if (!this.ws || this.ws.readyState !== WebSocket.OPEN) return false;
    this.ws.send(JSON.stringify(env));
    return true;
  }

  /** Send a frame without tracking it; returns its id (null when not connected). */
  send(env) {
    if (!env.id) env.id = newId(this.idPrefix);
    return this.live && this._write(env) ? env.id : null;
  }

  /** Send a request (`kind` with `payload`); returns its id, which its answer correlates. */
  request(kind, payload) {
    return this.send({ kind, payload });
  }

  /**
   * Post a message through the outbox; returns its id. With `barrier`, a channel/list follows
   * it: when its answer comes and the message has neither been echoed nor refused, the
   * gateway kept it without relaying anything (a text made only of markers) — "kept".
   */
  post(env, { barrier = false } = {}) {
    if (!env.id) env.id = newId(this.idPrefix);
    const entry = { env, status: "pending", barrier, error: null };
    this.outbox.set(env.id, entry);
    if (this.live) this._post([entry]);
    return env.id;
  }

  /** Send a failed message again, same id. */
  retry(id) {
    const entry = this.outbox.get(id);
    if (!entry) return false;
    entry.status = "pending";
    entry.error = null;
    if (this.live) this._post([entry]);
    return true;
  }

  /** Forget a message of the outbox (a failed one the person gave up on). */
  discard(id) {
    this.outbox.delete(id);
  }

  _post(entries) {
    const barred = [];
    for (const entry of entries) {
      this._write(entry.env);
      if (entry.barrier) barred.push(entry.env.id);
    }
    if (barred.length) {
      const id = newId(this.idPrefix);
      this.barriers.set(id, barred);
      this._write({ kind: "channel/list", id, payload: {} });
    }
  }

  /** Join a channel (the answer is a "joined" event, or an "error"). */
  join(channel) {
    const payload = { channel };
    if (this.marks.has(channel)) payload.after_seq = this.marks.get(channel);
    return this.request("channel/join", payload);
  }

  leave(channel) {
    return this.request("channel/leave", { channel });
  }

  // ---------------------------------------------------------------- receiving

  _receive(env) {
    switch (env.kind) {
      case "system/welcome":
        this._welcomed(env);
        return;
      case "channel/joined":
        this._joined(env);
        return;
      case "channel/left": {
        const ch = (env.payload || {}).channel;
        this.channels = this.channels.filter((c) => c !== ch);
        this.marks.delete(ch);
        this.above.delete(ch);
        this.emit("left", ch, env);
        return;
      }
      case "history/response":
        this._history(env);
        return;
      case "system/error":
        this._error(env);
        return;
      case "channel/list-response":
        this._barrier(env);
        break;
      default:
        break;
    }
    this._track(env);
    this._acked(env);
    this.emit("envelope", env);
  }

  _welcomed(env) {
    const p = env.payload || {};
    this.me = (p.you && p.you.id) || this.me;
    if (this.epoch && p.epoch && p.epoch !== this.epoch) {
      // another history: the gateway answers every resume with history_reset
      this.marks.clear();
      this.above.clear();
      // DMs start again from the new history's end (older ones are paged), or from the start
      this.dmResume = this.dmStart && typeof p.dm_seq === "number" ? p.dm_seq : null;
      this.dmFresh = this.dmResume;
      this.emit("epoch", p.epoch);
    }
    this.epoch = p.epoch || this.epoch;
    this.welcome = p;
    this.attempt = 0;
    this.live = true;
    this._setState("live", {});
    this.emit("welcome", env);
    if (this.dmFresh !== null) {
      const seq = this.dmFresh;
      this.dmFresh = null;
      this.emit("dmstart", seq);
    }
    const pending = [...this.outbox.values()].filter((e) => e.status === "pending");
    if (pending.length) this._post(pending);
  }

  _joined(env) {
    const p = env.payload || {};
    const ch = p.channel;
    if (!this.channels.includes(ch)) this.channels.push(ch);
    const history = Array.isArray(p.history) ? p.history : [];
    const resumed = this.marks.has(ch) && !p.history_reset;
    if (resumed) {
      for (const m of history) this._saw(ch, seqOf(m));
    } else {
      const last = history.reduce((n, m) => Math.max(n, seqOf(m) || 0), 0);
      this.marks.set(ch, typeof p.seq === "number" ? p.seq : last);
      this.above.set(ch, new Set());
    }
    for (const m of history) this._acked(m);
    this.emit("joined", ch, { members: p.members || [], history, reset: p.history_reset || null, resumed, env });
    if (resumed && p.has_more && history.length) this._pageForward(ch, seqOf(history[history.length - 1]));
  }

  _pageForward(channel, after) {
    const id = newId(this.idPrefix);
    this.forward.set(id, channel);
    this._write({ kind: "history/request", id, payload: { channel, after_seq: after, limit: FORWARD_PAGE } });
  }

  _history(env) {
    const p = env.payload || {};
    const id = (env.correlation_id || [])[0];
    const channel = p.channel;
    const messages = Array.isArray(p.messages) ? p.messages : [];
    const forward = this.forward.has(id);
    if (forward) {
      this.forward.delete(id);
      for (const m of messages) {
        this._saw(channel, seqOf(m));
        this._acked(m);
      }
    }
    this.emit("history", { channel, messages, forward, hasMore: !!p.has_more, id, env });
    if (forward && p.has_more && messages.length && this.channels.includes(channel)) {
      this._pageForward(channel, seqOf(messages[messages.length - 1]));
    }
  }

  _error(env) {
    const p = env.payload || {};
    const id = (env.correlation_id || [])[0];
    if (p.error === "session_displaced") this.final = { code: 4000, reason: p.message || "" };
    const entry = id ? this.outbox.get(id) : null;
    if (entry && entry.status === "pending") {
      entry.status = "failed";
      entry.error = p;
      this.emit("failed", id, p, entry.env);
      return;
    }
    this.emit("error", p, env);
  }

  _barrier(env) {
    const id = (env.correlation_id || [])[0];
    const ids = this.barriers.get(id);
    if (!ids) return;
    this.barriers.delete(id);
    for (const mid of ids) {
      const entry = this.outbox.get(mid);
      if (entry && entry.status === "pending") {
        this.outbox.delete(mid);
        this.emit("kept", mid, entry.env);
      }
    }
  }

  _acked(env) {
    if (!env || !env.id || env.from !== this.me) return;
    const entry = this.outbox.get(env.id);
    if (!entry) return;
    this.outbox.delete(env.id);
    this.emit("ack", env.id, env, entry.env);
  }

  /** Note a seq received (resume points): channel messages by channel, DMs by `@dm`. */
  _track(env) {
    const seq = seqOf(env);
    if (seq === null) return;
    if (env.channel) this._saw(env.channel, seq);
    else if (env.private) this.dmResume = Math.max(this.dmResume ?? 0, seq);
  }

  _saw(channel, seq) {
    if (seq === null || !this.marks.has(channel)) return;
    let mark = this.marks.get(channel);
    if (seq <= mark) return;
    let above = this.above.get(channel);
    if (!above) {
      above = new Set();
      this.above.set(channel, above);
    }
    if (seq !== mark + 1) {
      above.add(seq);
      if (above.size > ABOVE_MAX) {
        // a seq that never comes: resume from the highest seen rather than re-read forever
        this.marks.set(channel, Math.max(...above));
        above.clear();
      }
      return;
    }
    mark = seq;
    while (above.delete(mark + 1)) mark += 1;
    this.marks.set(channel, mark);
  }
}
