// The open conversation: its header, its messages in order (new ones inserted where their seq
// puts them, the view kept at the bottom while the person reads there), and older pages
// loaded when the person scrolls to the top (or presses "Load older messages").

import { $, el } from "../common/dom.js";
import { plural } from "../common/format.js";
import { SERVER } from "../common/wire.js";
import { inviteTo, leaveChannel, loadOlder, toast } from "./actions.js";
import { denied, may, maySome } from "./allowed.js";
import { renderItem } from "./message.js";
import { loadingOlder, olderAvailable } from "./model.js";
import { bus, chat, convTitle, dmKey, serverNow } from "./state.js";
import { markRead, viewing } from "./unread.js";

const NEAR_TOP_PX = 120;
const NEAR_BOTTOM_PX = 48;

const timeline = () => $("timeline");

function atBottom() {
  const t = timeline();
  return t.scrollTop + t.clientHeight >= t.scrollHeight - NEAR_BOTTOM_PX;
}

function toBottom() {
  const t = timeline();
  t.scrollTop = t.scrollHeight;
}

function current() {
  return chat.current ? chat.convs.get(chat.current) : null;
}

function renderHeader(conv) {
  const title = convTitle(conv.key);
  $("conv-title").textContent = conv.kind === "channel" ? title : `${title} (direct)`;
  const info =
    conv.kind === "channel"
      ? conv.joined
        ? (conv.private ? "private · " : "") + plural(conv.members.size, "member")
        : "you left this channel"
      : "only you and they see this";
  $("conv-info").textContent = info;
  const joined = conv.kind === "channel" && conv.joined;
  const mayLeave = may("channel/leave", { channel: conv.key });
  $("leave-btn").hidden = !(joined && mayLeave);
  // a private channel's members let others in, as their capabilities allow
  const mayInvite = may("channel/invite", { channel: conv.key });
  $("invite-form").hidden = !(joined && conv.private && mayInvite);
  if (chat.invitedShown !== conv.key) explain($("invite-note"), "");
  const notes = [];
  if (joined && !mayLeave) notes.push(`You cannot leave ${conv.key}: ${denied("channel/leave", "for " + conv.key)}.`);
  if (joined && conv.private && !mayInvite) notes.push(`You cannot invite to ${conv.key}: ${denied("channel/invite", "for " + conv.key)}.`);
  explain($("conv-denied"), notes.join(" "));
  $("older-btn").hidden = !olderAvailable(conv);
  $("older-btn").textContent = loadingOlder(conv) ? "Loading older messages…" : "Load older messages";
  const readOnly = conv.kind === "channel" ? !conv.joined : conv.key === dmKey([SERVER]);
  const mayWrite = maySome("chat");
  const input = $("composer-input");
  input.disabled = readOnly || !mayWrite;
  $("send-btn").disabled = readOnly || !mayWrite;
  const why = !readOnly && !mayWrite ? `You cannot write: ${denied("chat")}.` : "";
  explain($("composer-denied"), why);
  input.setAttribute("aria-describedby", why ? "composer-denied composer-keys" : "composer-keys");
  input.placeholder = readOnly
    ? conv.kind === "channel"
      ? `Join ${conv.key} to write here`
      : "Your callbacks arrive here when they fire (write @@cb:10m@@ reminder in any message)"
    : mayWrite
      ? `Message ${title}`
      : `You cannot write here (${denied("chat")})`;
}

/** Show `why` in the note `box` (hidden when there is nothing to explain). */
function explain(box, why) {
  box.hidden = !why;
  box.textContent = why;
}

function renderAll(conv) {
  const nodes = conv.order.map((item) => {
    item.node = renderItem(item);
    return item.node;
  });
  $("messages").replaceChildren(...nodes);
  decorate(conv);
}

/** A group goes on while one sender writes again within this long, the same day. */
const GROUP_MS = 5 * 60000;

function dayOf(ts) {
  const d = new Date(ts);
  return isNaN(d.getTime()) ? null : `${d.getFullYear()}-${d.getMonth()}-${d.getDate()}`;
}

/** `Today`, `Yesterday`, or the date (`Monday 24 November 2026`). */
export function dayLabel(ts) {
  const d = new Date(ts);
  const now = new Date(serverNow());
  const yesterday = new Date(now.getFullYear(), now.getMonth(), now.getDate() - 1);
  if (dayOf(d) === dayOf(now)) return "Today";
  if (dayOf(d) === dayOf(yesterday)) return "Yesterday";
  return d.toLocaleDateString(undefined, { weekday: "long", day: "numeric", month: "long", year: "numeric" });
}

function separator(cls, text) {
  return el("li", { class: cls, role: "separator", "aria-label": text }, el("span", {}, text));
}

/** Whether `item` continues the group of `prev` (same sender, soon after, same day). */
function continues(prev, item) {
  if (!prev || prev.type !== "chat" || item.type !== "chat" || prev.from !== item.from) return false;
  if (prev.status === "failed" || item.status === "failed") return false;
  const a = Date.parse(prev.ts);
  const b = Date.parse(item.ts);
  return !isNaN(a) && !isNaN(b) && b - a >= 0 && b - a <= GROUP_MS && dayOf(prev.ts) === dayOf(item.ts);
}

/** The first message of someone else after what I had read when I opened the conversation. */
function firstNew(conv) {
  if (conv.newSince === null || conv.newSince === undefined) return null;
  return conv.order.find((i) => i.type === "chat" && i.era === conv.era && i.seq !== null && i.seq > conv.newSince && i.from !== chat.me) || null;
}

/** Day separators, the "new messages" line, and consecutive messages of one sender grouped. */
function decorate(conv) {
  const list = $("messages");
  for (const node of list.querySelectorAll(":scope > li.day, :scope > li.new-marker")) node.remove();
  const fresh = firstNew(conv);
  let prev = null; // the row a message may continue
  let lastDay = null;
  for (const item of conv.order) {
    const node = item.node;
    if (!node || !node.isConnected) continue;
    const day = item.ts && item.type !== "note" ? dayOf(item.ts) : null;
    let broken = item.type === "note";
    if (day && day !== lastDay) {
      list.insertBefore(separator("day", dayLabel(item.ts)), node);
      lastDay = day;
      broken = true;
    }
    if (item === fresh) {
      list.insertBefore(separator("new-marker", "New messages"), node);
      broken = true;
    }
    node.classList.toggle("cont", !broken && continues(prev, item));
    prev = item.type === "note" ? null : item;
  }
}

/** Show the current conversation from scratch, scrolled to its end. */
export function showCurrent() {
  const conv = current();
  if (!conv) return;
  renderHeader(conv);
  renderAll(conv);
  toBottom();
}

function inserted(conv, item) {
  if (conv !== current()) return;
  const stick = atBottom() || item.from === chat.me;
  if (item.node && item.node.isConnected) item.node.remove();
  item.node = renderItem(item);
  const at = conv.order.indexOf(item);
  const next = conv.order[at + 1];
  const list = $("messages");
  if (next && next.node && next.node.isConnected) list.insertBefore(item.node, next.node);
  else list.append(item.node);
  decorate(conv);
  if (stick) toBottom();
  if (viewing(conv)) markRead(conv);
}

function replaced(conv, item) {
  if (conv !== current() || !item.node || !item.node.isConnected) return;
  const stick = atBottom();
  const fresh = renderItem(item);
  const focusedIn = item.node.contains(document.activeElement) ? document.activeElement : null;
  item.node.replaceWith(fresh);
  item.node = fresh;
  decorate(conv);
  if (focusedIn && focusedIn.className) {
    // keep the keyboard where it was (a button re-rendered in place)
    const same = fresh.querySelector("." + [...focusedIn.classList].join("."));
    if (same) same.focus({ preventScroll: true });
  }
  if (stick) toBottom();
}

export function initTimeline() {
  bus.on("current", showCurrent);
  bus.on("item-added", inserted);
  bus.on("item-updated", replaced);
  bus.on("item-removed", (conv, item) => {
    if (conv === current() && item.node) {
      item.node.remove();
      decorate(conv);
    }
  });
  bus.on("new-marker", (conv) => {
    if (conv === current()) decorate(conv);
  });
  bus.on("older", (conv) => {
    if (conv !== current()) return;
    const t = timeline();
    const fromBottom = t.scrollHeight - t.scrollTop;
    renderHeader(conv);
    renderAll(conv);
    t.scrollTop = t.scrollHeight - fromBottom; // the person keeps reading where they were
  });
  bus.on("dm-more", (key, pages) => {
    const conv = chat.convs.get(key);
    if (conv) loadOlder(conv, pages);
  });
  bus.on("caps", () => {
    const conv = current();
    if (!conv) return;
    renderHeader(conv);
    for (const item of conv.order) {
      if (item.entries && item.entries.some((e) => e.type === "proposal")) replaced(conv, item);
    }
  });
  bus.on("conv", (key) => {
    const conv = current();
    if (conv && conv.key === key) renderHeader(conv);
  });
  timeline().addEventListener("scroll", () => {
    const conv = current();
    if (conv && timeline().scrollTop < NEAR_TOP_PX) loadOlder(conv);
  });
  $("older-btn").addEventListener("click", () => {
    const conv = current();
    if (conv) loadOlder(conv);
  });
  $("leave-btn").addEventListener("click", () => {
    const conv = current();
    if (conv && conv.kind === "channel") leaveChannel(conv.key);
  });
  $("invite-form").addEventListener("submit", (e) => {
    e.preventDefault();
    const conv = current();
    const who = $("invite-input").value.trim();
    if (!conv || conv.kind !== "channel" || !who) return;
    inviteTo(conv.key, who);
    $("invite-input").value = "";
  });
  bus.on("invited", (p) => {
    if (p.participant === chat.me && p.by !== chat.me) {
      toast(`${p.by} invited you to ${p.channel}: join it under "Join or create a channel".`);
    } else if (p.by === chat.me) {
      chat.invitedShown = p.channel;
      const conv = current();
      if (conv && conv.key === p.channel) explain($("invite-note"), `Invited ${p.participant}.`);
    }
  });
  document.addEventListener("visibilitychange", () => {
    const conv = current();
    if (conv && viewing(conv)) markRead(conv);
  });
}
