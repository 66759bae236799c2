// What the page knows, built from the gateway's envelopes: conversations with their messages
// in seq order (pending ones last), an agent's tool calls, thoughts and proposals folded
// under its next message, floor claims and reasoning ("maths is answering…"), and people with
// their presence. No DOM here: the views listen on `bus` (state.js).

import { json } from "../common/format.js";
import { proposalFrom, resultText } from "../common/proposals.js";
import { DM } from "../common/session.js";
import { setCapabilities } from "./allowed.js";
import { SERVER, bus, chat, dmKey, loadPerson, serverNow, storePerson } from "./state.js";

export const CB_FIRE = "@@cb-fire@@";
const WAKE = "@@wake@@";
const FOLD_WINDOW_MS = 120000;
/** An "is answering" that never ended (its agent vanished) is dropped after this long. */
const ANSWERING_MAX_MS = 180000;
let local = 0;

// ---------------------------------------------------------------- conversations and items

export function conversation(key) {
  let conv = chat.convs.get(key);
  if (!conv) {
    conv = {
      key,
      kind: key.startsWith("#") ? "channel" : "dm",
      joined: false,
      members: new Set(),
      items: new Set(),
      order: [], // items sorted: era, then seq, then local order (pending ones have no seq)
      era: 0,
      hasOlder: false,
      loadingOlder: null,
      unread: 0,
      mentions: 0,
      lastRead: loadPerson("read", {})[key] || 0,
      open: new Map(), // agent id -> its activity item not yet folded under a message
    };
    chat.convs.set(key, conv);
    bus.emit("conv-list");
  }
  return conv;
}

/** The conversation an envelope belongs to: its channel, else the DM of its parties. */
function convKeyOf(env) {
  if (env.channel) return env.channel;
  const others = new Set(Array.isArray(env.to) ? env.to : []);
  if (env.from) others.add(env.from);
  others.delete(chat.me);
  return dmKey(others.size ? [...others] : [chat.me]);
}

/** The activity not yet folded of an older page, per conversation (a DM page spans several). */
function olderOpen(ctx, conv) {
  let open = ctx.opens.get(conv.key);
  if (!open) {
    open = new Map();
    ctx.opens.set(conv.key, open);
  }
  return open;
}

function compare(a, b) {
  return a.era - b.era || (a.seq ?? Infinity) - (b.seq ?? Infinity) || a.local - b.local;
}

function place(conv, item) {
  const order = conv.order;
  let lo = 0;
  let hi = order.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (compare(order[mid], item) < 0) lo = mid + 1;
    else hi = mid;
  }
  order.splice(lo, 0, item);
}

function unplace(conv, item) {
  const at = conv.order.indexOf(item);
  if (at >= 0) conv.order.splice(at, 1);
}

function newItem(conv, type, fields) {
  local += 1;
  return {
    type, // chat | note | activity
    conv: conv.key,
    era: conv.era,
    seq: null,
    local,
    id: null,
    from: null,
    ts: null,
    text: "",
    status: "sent", // sent | pending | failed | kept
    error: null,
    entries: null, // folded tool calls, thoughts and proposals
    lastAt: 0,
    ...fields,
  };
}

function register(conv, item, quiet) {
  conv.items.add(item);
  place(conv, item);
  if (item.id) chat.byId.set(item.id, item);
  if (!quiet) bus.emit("item-added", conv, item);
}

function remove(conv, item) {
  conv.items.delete(item);
  unplace(conv, item);
  bus.emit("item-removed", conv, item);
}

function updated(item) {
  const conv = chat.convs.get(item.conv);
  if (conv && conv.items.has(item)) bus.emit("item-updated", conv, item);
}

// ---------------------------------------------------------------- messages

/** Add (or complete) a message from a live envelope, a history, or an older page. */
export function ingest(env, ctx) {
  const kind = typeof env.kind === "string" ? env.kind : "";
  if (kind === "chat") addChat(env, ctx);
  else if (kind.startsWith("mcp/")) addMcp(env, ctx);
  else if (kind.startsWith("reasoning/")) addReasoning(env, ctx);
}

function addChat(env, ctx) {
  const p = env.payload || {};
  const text = typeof p.text === "string" ? p.text : "";
  if (env.from === SERVER && text.startsWith(WAKE)) return; // only sleepers get these
  const conv = conversation(convKeyOf(env));
  const seq = typeof env.seq === "number" ? env.seq : null;
  const have = env.id ? chat.byId.get(env.id) : null;
  if (have && have.conv === conv.key && conv.items.has(have)) {
    // my own message coming back (the ack), or one seen before (a resume overlap)
    if (have.seq === null && seq !== null) {
      unplace(conv, have);
      have.seq = seq;
      have.era = conv.era;
      place(conv, have);
      have.ts = env.ts || have.ts;
      have.text = text; // what the others see (the gateway strips @@ markers)
      have.status = "sent";
      have.error = null;
      bus.emit("item-added", conv, have); // moves it to its place
    } else if (have.status !== "sent") {
      have.status = "sent";
      have.error = null;
      updated(have);
    }
    return;
  }
  const cb = env.from === SERVER && text.startsWith(CB_FIRE);
  const item = newItem(conv, cb ? "note" : "chat", {
    id: env.id || null,
    seq,
    from: env.from,
    ts: env.ts,
    text: cb ? text.slice(CB_FIRE.length) : text,
    to: Array.isArray(env.to) ? env.to : [],
    cbOrigin: cb ? p.cb_origin : null,
    replyTo: Array.isArray(env.correlation_id) ? env.correlation_id : [],
  });
  const open = ctx.older ? olderOpen(ctx, conv) : conv.open;
  const act = open.get(env.from);
  if (act && item.type === "chat") {
    open.delete(env.from);
    if ((Date.parse(env.ts) || 0) - act.lastAt <= FOLD_WINDOW_MS) {
      item.entries = act.entries;
      for (const entry of item.entries) entry.host = item;
      remove(conv, act);
    }
  }
  register(conv, item, ctx.older);
  if (item.type === "chat") spoke(conv, item, ctx);
  if (ctx.live && item.from !== chat.me && (seq ?? 0) > conv.lastRead && !viewing(conv)) {
    conv.unread += 1;
    if (mentionsMe(text)) conv.mentions += 1;
    bus.emit("conv-list");
  }
}

/** A message of `item.from` in `conv`: its floor claims there are answered, it stopped thinking. */
function spoke(conv, item, ctx) {
  if (!ctx.live) return;
  let changed = false;
  for (const f of chat.floor.values()) {
    if (!f.done && f.holder === item.from && f.channel === conv.key) {
      f.done = true;
      f.answer = item.id;
      changed = true;
      const asked = chat.byId.get(f.msgId);
      if (asked) updated(asked);
    }
  }
  const key = `${conv.key}|${item.from}`;
  const was = chat.answering.get(key);
  if (was) {
    chat.answering.delete(key);
    const asked = was.trigger && chat.byId.get(was.trigger);
    if (asked) updated(asked);
    changed = true;
  }
  if (changed) bus.emit("activity");
}

export function mentionsMe(text) {
  if (!chat.me || !text.includes("@" + chat.me)) return false;
  const escaped = chat.me.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  return new RegExp(`(^|[^\\w.-])@${escaped}(?![\\w-]|\\.\\w)`).test(text);
}

/** A message I am sending, shown as pending until its ack. */
export function addPending(conv, env) {
  const item = newItem(conv, "chat", {
    id: env.id,
    from: chat.me,
    ts: new Date(serverNow()).toISOString(),
    text: env.payload.text,
    status: "pending",
    env,
  });
  register(conv, item);
  return item;
}

/** Take a message of mine that was never sent off the page. */
export function forget(item) {
  const conv = chat.convs.get(item.conv);
  if (!conv || !conv.items.has(item) || item.status === "sent") return;
  if (chat.byId.get(item.id) === item) chat.byId.delete(item.id);
  remove(conv, item);
}

export function setStatus(id, status, error) {
  const item = chat.byId.get(id);
  if (!item || item.status === "sent") return;
  item.status = status;
  item.error = error || null;
  updated(item);
}

// ---------------------------------------------------------------- tool calls and proposals

/** Put `entry` in the activity of `env.from` in `conv` (folded under its next message). */
function addEntry(conv, env, entry, ctx) {
  const open = ctx.older ? olderOpen(ctx, conv) : conv.open;
  let act = open.get(env.from);
  const fresh = !act;
  if (fresh) {
    act = newItem(conv, "activity", {
      seq: typeof env.seq === "number" ? env.seq : null,
      from: env.from,
      ts: env.ts,
      entries: [],
    });
    open.set(env.from, act);
  }
  entry.host = act;
  act.entries.push(entry);
  act.lastAt = Date.parse(env.ts) || Date.now();
  if (fresh) register(conv, act, ctx.older);
  else if (!ctx.older) updated(act);
}

function touch(entry) {
  if (entry.host) updated(entry.host);
}

function addMcp(env, ctx) {
  const conv = conversation(convKeyOf(env));
  const p = env.payload || {};
  const cids = Array.isArray(env.correlation_id) ? env.correlation_id : [];
  switch (env.kind) {
    case "mcp/proposal": {
      if (chat.proposals.has(env.id)) return;
      const entry = { type: "proposal", id: env.id, proposal: proposalFrom(env), status: "pending", by: null, outcome: null, error: null, host: null };
      chat.proposals.set(env.id, entry);
      addEntry(conv, env, entry, ctx);
      return;
    }
    case "mcp/request": {
      if (chat.requests.has(env.id)) return;
      const prop = cids.map((c) => chat.proposals.get(c)).find(Boolean);
      if (prop) {
        // a fulfilment: someone approved the proposal; its response is the proposal's result
        chat.requests.set(env.id, { proposal: prop });
        if (prop.status === "pending" || prop.status === "approving") {
          prop.status = "approved";
          prop.by = env.from;
          prop.error = null;
          touch(prop);
        }
        return;
      }
      if (p.method !== "tools/call") return; // discovery (tools/list, …) stays out of the chat
      const params = p.params && typeof p.params === "object" ? p.params : {};
      const entry = {
        type: "call",
        id: env.id,
        from: env.from,
        to: Array.isArray(env.to) ? env.to : [],
        tool: typeof params.name === "string" ? params.name : "?",
        arguments: params.arguments,
        result: null,
        ok: null,
        host: null,
      };
      chat.requests.set(env.id, { call: entry });
      addEntry(conv, env, entry, ctx);
      return;
    }
    case "mcp/response":
      for (const cid of cids) {
        const req = chat.requests.get(cid);
        if (!req) continue;
        const err = p.error;
        const text = err ? (err && err.message) || json(err) : resultText(p.result);
        if (req.call) {
          req.call.ok = !err;
          req.call.result = text;
          touch(req.call);
        }
        if (req.proposal) {
          const entry = req.proposal;
          entry.status = "done";
          entry.outcome = { ok: !err, text: err ? `${env.from} failed: ${text}` : `${env.from} answered: ${text}` };
          touch(entry);
        }
      }
      return;
    case "mcp/reject":
    case "mcp/withdraw":
      for (const cid of cids) {
        const entry = chat.proposals.get(cid);
        if (!entry || entry.status === "done") continue;
        const reason = p.reason ? String(p.reason) : "";
        if (env.kind === "mcp/reject") {
          entry.status = "rejected";
          entry.outcome = { ok: false, text: `rejected by ${env.from}${reason ? ": " + reason : ""}` };
        } else {
          entry.status = "withdrawn";
          entry.outcome = { ok: false, text: `withdrawn by ${env.from}${reason ? " (" + reason + ")" : ""}` };
        }
        entry.error = null;
        touch(entry);
      }
      return;
    default:
      return;
  }
}

/** My approve or reject of `entry` was refused: the proposal is open again, with the error. */
export function actionFailed(entry, error) {
  if (entry.status === "approving" || entry.status === "rejecting") entry.status = "pending";
  entry.error = `${error.error}: ${error.message}`;
  touch(entry);
}

export function actionSent(entry, status) {
  entry.status = status;
  entry.error = null;
  touch(entry);
}

// ---------------------------------------------------------------- reasoning and the floor

function addReasoning(env, ctx) {
  const conv = conversation(convKeyOf(env));
  const p = env.payload || {};
  const key = `${conv.key}|${env.from}`;
  const message = typeof p.message === "string" ? p.message : "";
  if (env.kind === "reasoning/thought") {
    if (message) addEntry(conv, env, { type: "thought", id: env.id, text: message, host: null }, ctx);
    const doing = ctx.live && chat.answering.get(key);
    if (doing) {
      doing.thought = message;
      bus.emit("activity");
    }
    return;
  }
  if (!ctx.live) return; // history shows what was said, not who was busy
  const was = chat.answering.get(key);
  if (env.kind === "reasoning/start") {
    const trigger = (Array.isArray(env.correlation_id) && env.correlation_id[0]) || null;
    chat.answering.set(key, { conv: conv.key, pid: env.from, trigger, thought: "", since: Date.now() });
    const asked = trigger && chat.byId.get(trigger);
    if (asked) updated(asked);
  } else if (was) {
    chat.answering.delete(key); // conclusion or cancel
    const asked = was.trigger && chat.byId.get(was.trigger);
    if (asked) updated(asked);
  }
  bus.emit("activity");
}

/** floor/responding-to (relayed with `from`), floor/claimed, floor/yield (to a loser). */
function addFloor(env) {
  const p = env.payload || {};
  const msgId = p.msg_id;
  if (typeof msgId !== "string" || !env.channel) return;
  let f = chat.floor.get(msgId);
  if (!f) {
    f = { channel: env.channel, msgId, claimants: new Set(), holder: null, expiresAt: null, done: false, answer: null };
    chat.floor.set(msgId, f);
  }
  if (env.kind === "floor/responding-to") {
    if (env.from && env.from !== SERVER) f.claimants.add(env.from);
  } else if (env.kind === "floor/claimed") {
    f.holder = p.holder;
    f.claimants.add(p.holder);
    f.expiresAt = typeof p.expires_at === "number" ? p.expires_at : null;
    f.done = false;
  } else if (env.kind === "floor/yield" && typeof p.winner === "string") {
    f.holder = f.holder || p.winner;
    f.claimants.add(p.winner);
    f.claimants.add(chat.me);
  }
  const asked = chat.byId.get(msgId);
  if (asked) updated(asked);
  bus.emit("activity");
}

/** Who yielded on a message: the claimants other than the holder. */
export function yielders(f) {
  return [...f.claimants].filter((id) => id !== f.holder);
}

/** End claims past their expiry and answers that never ended (called every second). */
export function expire() {
  const now = serverNow();
  let changed = false;
  for (const f of chat.floor.values()) {
    if (!f.done && f.expiresAt !== null && f.expiresAt < now) {
      f.done = true;
      changed = true;
      const asked = chat.byId.get(f.msgId);
      if (asked) updated(asked);
    }
  }
  for (const [key, a] of chat.answering) {
    if (Date.now() - a.since > ANSWERING_MAX_MS) {
      chat.answering.delete(key);
      changed = true;
    }
  }
  if (changed) bus.emit("activity");
}

/** Who is answering in `key` now: [{pid, trigger, thought}], floor holders and reasoning. */
export function answeringIn(key) {
  const out = new Map();
  for (const f of chat.floor.values()) {
    if (!f.done && f.holder && f.channel === key) out.set(f.holder, { pid: f.holder, trigger: f.msgId, thought: "", yielded: yielders(f) });
  }
  for (const a of chat.answering.values()) {
    if (a.conv !== key) continue;
    const had = out.get(a.pid);
    out.set(a.pid, { pid: a.pid, trigger: (had && had.trigger) || a.trigger, thought: a.thought, yielded: had ? had.yielded : [] });
  }
  return [...out.values()];
}

/** Who is answering message `msgId`. */
export function answeringOn(msgId) {
  const who = new Set();
  const f = chat.floor.get(msgId);
  if (f && !f.done && f.holder) who.add(f.holder);
  for (const a of chat.answering.values()) if (a.trigger === msgId) who.add(a.pid);
  return [...who];
}

// ---------------------------------------------------------------- the session's events

/** A live envelope (not a history): presence, the floor, messages. */
export function onEnvelope(env) {
  if (typeof env.ts === "string") {
    const t = Date.parse(env.ts);
    if (!isNaN(t)) chat.skew = t - Date.now();
  }
  switch (env.kind) {
    case "system/presence":
      applyPresence(env.payload || {});
      return;
    case "floor/responding-to":
    case "floor/claimed":
    case "floor/yield":
      addFloor(env);
      return;
    case "channel/list-response":
      for (const c of (env.payload || {}).channels || []) if (c && c.name) chat.channelsKnown.set(c.name, c);
      bus.emit("conv-list");
      return;
    default:
      ingest(env, { live: true });
  }
}

export function onWelcome(env) {
  const p = env.payload || {};
  chat.me = (p.you && p.you.id) || chat.me;
  chat.kind = (p.you && p.you.kind) || chat.kind;
  chat.space = p.space || chat.space;
  if (p.you) setCapabilities(p.you.capabilities);
  for (const c of p.channels || []) if (c && c.name) chat.channelsKnown.set(c.name, c);
  for (const person of chat.people.values()) if (person.online) person.stale = true;
  for (const e of p.participants || []) setPerson(e, true);
  for (const person of chat.people.values()) {
    if (person.stale) {
      person.online = false;
      person.presence = "offline";
      person.wakeAt = null;
    }
    delete person.stale;
  }
  bus.emit("people");
  bus.emit("conv-list");
}

export function onJoined(channel, info) {
  const conv = conversation(channel);
  conv.joined = true;
  conv.members = new Set(info.members || []);
  if (info.reset) resetConversation(conv, info.reset);
  for (const m of info.history) ingest(m, { live: false });
  if (!info.resumed) {
    const seqs = conv.order.filter((i) => i.era === conv.era && i.seq !== null).map((i) => i.seq);
    conv.hasOlder = seqs.length > 0 && Math.min(...seqs) > 1;
  }
  recountUnread(conv);
  storeJoined();
  bus.emit("conv-list");
  bus.emit("conv", conv.key);
}

export function onLeft(channel) {
  const conv = chat.convs.get(channel);
  if (!conv) return;
  conv.joined = false;
  storeJoined();
  bus.emit("conv-list");
  bus.emit("conv", conv.key);
}

export function onHistory(info) {
  if (info.channel === DM) {
    onDmPage(info);
    return;
  }
  const conv = chat.convs.get(info.channel);
  if (!conv) return;
  if (info.forward) {
    for (const m of info.messages) ingest(m, { live: false });
    return;
  }
  if (conv.loadingOlder !== info.id) return;
  conv.loadingOlder = null;
  conv.hasOlder = info.hasMore;
  const ctx = { live: false, older: true, opens: new Map() };
  for (const m of info.messages) ingest(m, ctx);
  bus.emit("older", conv);
}

/** The DMs up to `seq` are paged back through from here (the session's "dmstart"). */
export function startDms(seq) {
  chat.dm = { before: seq + 1, hasOlder: seq > 0, loading: null, want: null };
}

/**
 * A page of my DMs (all conversations: the DM stream is one per person), older than every
 * one shown. The first page is the last one (unread counts come from it); a person asking for
 * older messages of one conversation gets pages until one of them has some (`want.pages`).
 */
function onDmPage(info) {
  const dm = chat.dm;
  if (!dm || dm.loading !== info.id) return;
  const want = dm.want || { conv: null, pages: 0, first: false };
  dm.loading = null;
  dm.want = null;
  const seqs = info.messages.map((m) => m.seq).filter((s) => typeof s === "number");
  dm.hasOlder = info.hasMore && seqs.length > 0;
  if (seqs.length) dm.before = Math.min(dm.before, ...seqs);
  const ctx = { live: false, older: true, opens: new Map() };
  const touched = new Set();
  for (const m of info.messages) {
    touched.add(convKeyOf(m));
    ingest(m, ctx);
  }
  for (const key of touched) {
    const conv = chat.convs.get(key);
    if (!conv) continue;
    if (want.first) recountUnread(conv);
    bus.emit("older", conv);
  }
  bus.emit("conv-list");
  if (want.conv) {
    bus.emit("conv", want.conv);
    if (!touched.has(want.conv) && dm.hasOlder && want.pages > 1) bus.emit("dm-more", want.conv, want.pages - 1);
  }
}

/** Whether older messages of `conv` can be asked for. */
export function olderAvailable(conv) {
  if (conv.kind === "channel") return conv.hasOlder && conv.joined;
  return !!chat.dm && chat.dm.hasOlder;
}

/** Whether older messages of `conv` are on their way. */
export function loadingOlder(conv) {
  if (conv.kind === "channel") return !!conv.loadingOlder;
  return !!chat.dm && !!chat.dm.loading && !!chat.dm.want && chat.dm.want.conv === conv.key;
}

/** The gateway's history was replaced: keep what was shown, above a line, and start again. */
function resetConversation(conv, reset) {
  for (const item of conv.items) if (item.id && chat.byId.get(item.id) === item) chat.byId.delete(item.id);
  conv.era += 1;
  conv.open = new Map();
  conv.lastRead = 0;
  const why = reset.reason === "epoch" ? "the gateway's history was replaced" : "the gateway's history is shorter than what this page had";
  register(conv, newItem(conv, "note", { seq: -1, text: `${why}: the messages above are from before, the ones below from its history now.` }));
}

/** Every DM conversation starts again (a new history epoch: DMs are not resumed). */
export function onEpoch() {
  for (const conv of chat.convs.values()) {
    if (conv.kind === "dm") resetConversation(conv, { reason: "epoch" });
  }
}

function storeJoined() {
  storePerson(
    "channels",
    [...chat.convs.values()].filter((c) => c.kind === "channel" && c.joined).map((c) => c.key),
  );
}

// ---------------------------------------------------------------- unread

export function viewing(conv) {
  return chat.current === conv.key && document.visibilityState === "visible";
}

function recountUnread(conv) {
  if (viewing(conv)) {
    markRead(conv);
    return;
  }
  let unread = 0;
  let mentions = 0;
  for (const item of conv.items) {
    if (item.type !== "chat" || item.from === chat.me || item.era !== conv.era) continue;
    if ((item.seq ?? 0) > conv.lastRead) {
      unread += 1;
      if (mentionsMe(item.text)) mentions += 1;
    }
  }
  conv.unread = unread;
  conv.mentions = mentions;
}

/** Everything in `conv` is read (the page remembers up to which seq). */
export function markRead(conv) {
  let last = conv.lastRead;
  for (const item of conv.items) if (item.era === conv.era && item.seq !== null) last = Math.max(last, item.seq);
  const changed = conv.unread || conv.mentions || last !== conv.lastRead;
  conv.unread = 0;
  conv.mentions = 0;
  conv.lastRead = last;
  if (!changed) return;
  const read = loadPerson("read", {});
  read[conv.key] = last;
  storePerson("read", read);
  bus.emit("conv-list");
}

// ---------------------------------------------------------------- people

function setPerson(e, online) {
  if (!e || typeof e.id !== "string") return;
  const have = chat.people.get(e.id) || { id: e.id, kind: null, presence: "offline", wakeAt: null, online: false };
  have.kind = e.kind || have.kind;
  have.online = online;
  have.presence = online ? e.presence || "online" : "offline";
  const wake = e.wake_at ?? (e.sleeping && e.sleeping.wake_at);
  have.wakeAt = have.presence === "sleeping" && wake ? (typeof wake === "number" ? wake : Date.parse(wake)) : null;
  delete have.stale;
  chat.people.set(e.id, have);
}

function applyPresence(p) {
  const entries = Array.isArray(p.participants) ? p.participants : p.participant ? [p.participant] : [];
  const touched = new Set();
  const member = (name, id, joins) => {
    const conv = chat.convs.get(name);
    if (!conv) return;
    if (joins) conv.members.add(id);
    else conv.members.delete(id);
    touched.add(name);
  };
  for (const e of entries) {
    if (!e || typeof e.id !== "string") continue;
    if (e.id === chat.me) setCapabilities(e.capabilities); // a grant or revoke changed them
    if (p.channel) {
      // membership of one channel
      if (p.event === "join" || p.event === "leave") member(p.channel, e.id, p.event === "join");
      if (p.event === "join" && !(chat.people.get(e.id) || {}).online) setPerson(e, true);
    } else {
      // connected (with the channels it joined) or disconnected (from those it was in)
      setPerson(e, p.event !== "leave");
      if ((p.event === "join" || p.event === "leave") && Array.isArray(e.channels)) {
        for (const name of e.channels) member(name, e.id, p.event === "join");
      }
    }
  }
  for (const name of touched) bus.emit("conv", name);
  bus.emit("people");
}

/** The people of the space as `GET /participants` lists them (offline ones too). */
export function setRoster(list) {
  for (const e of list) {
    if (e.id === chat.me) chat.callbacks = e.pending_callbacks || 0;
    setPerson(e, !!e.online);
  }
  bus.emit("people");
  bus.emit("status");
}
