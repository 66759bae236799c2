// What the page knows, built from the session's events: joins, leaves, histories and pages
// of older messages, the welcome and presence. The parts: conversations.js (items in order),
// messages.js, calls.js (tool calls and proposals), floor.js (reasoning and the floor),
// unread.js and people.js. No DOM here: the views listen on `bus` (state.js).

import { DM } from "../common/wire.js";
import { setCapabilities } from "./allowed.js";
import { conversation, convKeyOf, newItem, register } from "./conversations.js";
import { addFloor } from "./floor.js";
import { ingest } from "./messages.js";
import { applyPresence, setPerson } from "./people.js";
import { bus, chat, storePerson } from "./state.js";
import { recountUnread } from "./unread.js";

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
    case "system/notice": // the gateway's note on a message: nobody took it, its addressee is away
      addFloor(env);
      return;
    case "channel/list-response":
      for (const c of (env.payload || {}).channels || []) if (c && c.name) chat.channelsKnown.set(c.name, c);
      bus.emit("conv-list");
      return;
    case "channel/invited":
      onInvited(env.payload || {});
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

/** An invitation into a private channel: to me (the channel is one I may join now), or the
 * gateway's answer to mine ("invited" event for the views). */
function onInvited(p) {
  if (typeof p.channel !== "string") return;
  if (p.participant === chat.me && p.by !== chat.me) {
    chat.channelsKnown.set(p.channel, { name: p.channel, private: true, ...chat.channelsKnown.get(p.channel) });
    bus.emit("conv-list");
  }
  bus.emit("invited", p);
}

export function onJoined(channel, info) {
  const conv = conversation(channel);
  conv.joined = true;
  conv.private = !!(info.env && info.env.payload && info.env.payload.private);
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
