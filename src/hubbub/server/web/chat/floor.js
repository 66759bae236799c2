// Reasoning and the floor: who is answering where ("maths is answering…"), claims and
// yields, their expiry, and reasoning thoughts folded under the agent's next message.

import { SERVER } from "../common/wire.js";
import { addEntry, conversation, convKeyOf, updated } from "./conversations.js";
import { bus, chat, serverNow } from "./state.js";

/** An "is answering" that never ended (its agent vanished) is dropped after this long. */
const ANSWERING_MAX_MS = 180000;

export function addReasoning(env, ctx) {
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

/**
 * floor/responding-to (relayed with `from`), floor/claimed, floor/yield (to a loser),
 * floor/outcome: stored when a claim ends, so a history says who answered and who yielded,
 * and system/notice: the gateway's note on a message of mine (`unclaimed`: no agent took
 * it; `addressee_absent`: whom it is for is offline or asleep).
 */
export function addFloor(env) {
  const p = env.payload || {};
  const msgId = p.msg_id;
  if (typeof msgId !== "string" || !env.channel) return;
  let f = chat.floor.get(msgId);
  if (!f) {
    f = {
      channel: env.channel,
      msgId,
      claimants: new Set(),
      holder: null,
      expiresAt: null,
      done: false,
      answer: null,
      answered: new Set(), // who answered it (the holders whose message ended their claim)
      notice: null, // the gateway's note on it (system/notice), shown until someone answers
    };
    chat.floor.set(msgId, f);
  }
  if (env.kind === "system/notice") {
    if (typeof p.text === "string") f.notice = p.text;
  } else if (env.kind === "floor/outcome") {
    if (typeof p.holder === "string") {
      f.claimants.add(p.holder);
      if (p.reason === "answered") f.answered.add(p.holder);
      // a later claim may be live already (its relay is not stored, so it can overtake)
      if (!f.holder || f.done || f.holder === p.holder) {
        f.holder = p.holder;
        f.done = true;
      }
    }
    for (const id of Array.isArray(p.yielded) ? p.yielded : []) if (typeof id === "string") f.claimants.add(id);
    if (typeof p.answer === "string") f.answer = p.answer;
  } else if (env.kind === "floor/responding-to") {
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

/** Who yielded on a message: the claimants other than the holder and those who answered. */
export function yielders(f) {
  return [...f.claimants].filter((id) => id !== f.holder && !f.answered.has(id));
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

/** A message of `item.from` in `conv`: its floor claims there are answered, it stopped thinking. */
export function spoke(conv, item, ctx) {
  if (!ctx.live) return;
  let changed = false;
  for (const f of chat.floor.values()) {
    if (f.notice && item.from !== chat.me && item.replyTo.includes(f.msgId)) {
      f.notice = null; // someone answered it after all
      changed = true;
      const asked = chat.byId.get(f.msgId);
      if (asked) updated(asked);
    }
    // an answer ends the claim it replies to (the gateway's rule); other chat ends nothing
    if (!f.done && f.holder === item.from && f.channel === conv.key && item.replyTo.includes(f.msgId)) {
      f.done = true;
      f.answer = item.id;
      f.answered.add(item.from);
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
