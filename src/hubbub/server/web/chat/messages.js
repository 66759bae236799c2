// Messages: a chat envelope (live, from a history or an older page) becomes an item, mine
// are pending until their ack, and an agent's open activity folds under its next message.

import { CB_FIRE, SERVER, WAKE } from "../common/wire.js";
import { addMcp } from "./calls.js";
import {
  conversation,
  convKeyOf,
  newItem,
  olderOpen,
  place,
  register,
  remove,
  unplace,
  updated,
} from "./conversations.js";
import { addFloor, addReasoning, spoke } from "./floor.js";
import { bus, chat, serverNow } from "./state.js";
import { mentionsMe, viewing } from "./unread.js";

const FOLD_WINDOW_MS = 120000;

/** Add (or complete) a message from a live envelope, a history, or an older page. */
export function ingest(env, ctx) {
  const kind = typeof env.kind === "string" ? env.kind : "";
  if (kind === "chat") addChat(env, ctx);
  else if (kind.startsWith("mcp/")) addMcp(env, ctx);
  else if (kind.startsWith("reasoning/")) addReasoning(env, ctx);
  else if (kind === "floor/outcome") addFloor(env); // stored: live and in histories alike
}

export function addChat(env, ctx) {
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
    if (act.entries.some((entry) => entry.type === "proposal")) {
      // a proposal keeps its place (a person may be approving it): the row stays, done
      act.done = true;
      if (!ctx.older) updated(act);
    } else if ((Date.parse(env.ts) || 0) - act.lastAt <= FOLD_WINDOW_MS) {
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
