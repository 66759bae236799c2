// Conversations and their items: a channel or a DM with its messages, notes and folded
// activity in order (era, then seq, then arrival; pending ones last). Every change is told on
// `bus` (state.js); no DOM here.

import { bus, chat, dmKey, loadPerson } from "./state.js";

let local = 0;

export function conversation(key) {
  let conv = chat.convs.get(key);
  if (!conv) {
    conv = {
      key,
      kind: key.startsWith("#") ? "channel" : "dm",
      joined: false,
      private: false, // invite-only (its channel/joined says so): members may invite
      members: new Set(),
      items: new Set(),
      order: [], // items sorted: era, then seq, then local order (pending ones have no seq)
      era: 0,
      hasOlder: false,
      loadingOlder: null,
      unread: 0,
      mentions: 0,
      lastRead: loadPerson("read", {})[key] || 0,
      newSince: null, // the "New messages" line goes above the first message after this seq
      open: new Map(), // agent id -> its activity item not yet folded under a message
    };
    chat.convs.set(key, conv);
    bus.emit("conv-list");
  }
  return conv;
}

/** The conversation an envelope belongs to: its channel, else the DM of its parties. */
export function convKeyOf(env) {
  if (env.channel) return env.channel;
  const others = new Set(Array.isArray(env.to) ? env.to : []);
  if (env.from) others.add(env.from);
  others.delete(chat.me);
  return dmKey(others.size ? [...others] : [chat.me]);
}

/** The activity not yet folded of an older page, per conversation (a DM page spans several). */
export function olderOpen(ctx, conv) {
  let open = ctx.opens.get(conv.key);
  if (!open) {
    open = new Map();
    ctx.opens.set(conv.key, open);
  }
  return open;
}

export function compare(a, b) {
  return a.era - b.era || (a.seq ?? Infinity) - (b.seq ?? Infinity) || a.local - b.local;
}

export function place(conv, item) {
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

export function unplace(conv, item) {
  const at = conv.order.indexOf(item);
  if (at >= 0) conv.order.splice(at, 1);
}

export function newItem(conv, type, fields) {
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

export function register(conv, item, quiet) {
  conv.items.add(item);
  place(conv, item);
  if (item.id) chat.byId.set(item.id, item);
  if (!quiet) bus.emit("item-added", conv, item);
}

export function remove(conv, item) {
  conv.items.delete(item);
  unplace(conv, item);
  bus.emit("item-removed", conv, item);
}

export function updated(item) {
  const conv = chat.convs.get(item.conv);
  if (conv && conv.items.has(item)) bus.emit("item-updated", conv, item);
}

/** Put `entry` in the activity of `env.from` in `conv` (folded under its next message). */
export function addEntry(conv, env, entry, ctx) {
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

export function touch(entry) {
  if (entry.host) updated(entry.host);
}
