// What a person does: write, retry, approve or reject a proposal, join, leave or create a
// channel, open a conversation, page back through history. Each becomes a MEW envelope on the
// session (the views offer only what the person's capabilities allow: allowed.js); whatever
// the gateway still refuses comes back as its error, shown where it happened.

import { $ } from "../common/dom.js";
import { approveEnvelope, rejectEnvelope } from "../common/proposals.js";
import { mentioned } from "../common/mentions.js";
import { DM } from "../common/wire.js";
import { may } from "./allowed.js";
import { actionSent } from "./calls.js";
import { conversation } from "./conversations.js";
import { addPending, forget, setStatus } from "./messages.js";
import { startDms } from "./model.js";
import { setRoster } from "./people.js";
import { bus, chat, knownNames, peersOf } from "./state.js";
import { markRead, viewing } from "./unread.js";

const OLDER_PAGE = 50;
/** Pages of DMs asked for at most, one after the other, to find older messages of one DM. */
const DM_PAGES_PER_ASK = 5;
/** Requests whose refusal is shown as a toast: id -> what was asked ("join #x"). */
const asked = new Map();

/** Show `text` in the page's alert line until dismissed or replaced. */
export function toast(text) {
  const box = $("toast");
  box.replaceChildren();
  if (!text) {
    box.hidden = true;
    return;
  }
  const close = document.createElement("button");
  close.type = "button";
  close.className = "link";
  close.textContent = "dismiss";
  close.addEventListener("click", () => toast(null));
  box.append(document.createTextNode(text + " "), close);
  box.hidden = false;
}

/** An error the gateway answered: for one of our requests, say what it was about. */
export function refused(error, env) {
  const id = (env && env.correlation_id && env.correlation_id[0]) || null;
  const what = id ? asked.get(id) : null;
  if (id) asked.delete(id);
  if (id && chat.dm && chat.dm.loading === id) {
    chat.dm.loading = null; // a refused page of DMs: the person may ask again
    chat.dm.want = null;
  }
  const text = `${error.error || "error"}: ${error.message || "the gateway refused"}`;
  toast(what ? `Could not ${what} — ${text}` : text);
}

function request(kind, payload, what) {
  const id = chat.session ? chat.session.request(kind, payload) : null;
  if (!id) {
    toast(`Not connected: could not ${what}; try again once the page says "connected".`);
    return null;
  }
  asked.set(id, what);
  return id;
}

/** Write `text` in `conv`: shown at once as pending, acknowledged by the gateway's echo. */
export function send(conv, text) {
  const env =
    conv.kind === "channel"
      ? { kind: "chat", channel: conv.key, payload: { text } }
      : { kind: "chat", to: peersOf(conv.key), private: true, payload: { text } };
  if (conv.kind === "channel") {
    // @id or @display name (the one rule): addressed to them, they alone answer it
    const to = mentioned(text, knownNames()).filter((id) => id !== chat.me);
    if (to.length) env.to = to;
  }
  // a text with markers (@@cb:…@@, @@sleep:…@@) may be kept by the gateway without an echo
  const id = chat.session.post(env, { barrier: text.includes("@@") });
  if (conv.newSince !== null && conv.newSince !== undefined) {
    conv.newSince = null; // the person answered: what was new has been read
    bus.emit("new-marker", conv);
  }
  addPending(conv, env);
  return id;
}

export function retry(item) {
  if (!chat.session) return;
  if (!chat.session.retry(item.id)) chat.session.post(item.env); // (not in the outbox any more)
  setStatus(item.id, "pending");
}

/** Give up on a failed message: out of the outbox and off the page. */
export function discard(item) {
  chat.session.discard(item.id);
  forget(item);
}

export function approve(entry) {
  const p = entry.proposal;
  const env = approveEnvelope(p);
  const id = chat.session.post(env);
  chat.actions.set(id, entry);
  actionSent(entry, "approving");
}

export function reject(entry, reason) {
  const env = rejectEnvelope(entry.proposal, reason);
  const id = chat.session.post(env);
  chat.actions.set(id, entry);
  actionSent(entry, "rejecting");
}

/** A channel name as typed ("ideas" or "#ideas") as the gateway names it ("#ideas"). */
export function channelName(name) {
  return name.startsWith("#") ? name : "#" + name;
}

export function joinChannel(name) {
  const channel = channelName(name);
  const id = request("channel/join", { channel }, `join ${channel}`);
  if (id) chat.wantOpen = channel;
}

/** Create channel `name`; `invited` (private): only its creator and those invited may join. */
export function createChannel(name, invited = false) {
  const channel = channelName(name);
  const payload = invited ? { channel, private: true } : { channel };
  const id = request("channel/create", payload, `create ${invited ? "private channel " : ""}${channel}`);
  if (id) chat.wantOpen = channel;
}

/** Let `who` (an id, "@" optional) into private channel `channel`: the gateway answers
 * channel/invited (model.js), or why not. */
export function inviteTo(channel, who) {
  const participant = who.startsWith("@") ? who.slice(1) : who;
  request("channel/invite", { channel, participant }, `invite ${participant} to ${channel}`);
}

export function leaveChannel(name) {
  request("channel/leave", { channel: name }, `leave ${name}`);
}

export function listChannels() {
  if (chat.session && chat.session.live) chat.session.request("channel/list", {});
}

/** The DMs up to `seq` are mine to page through: ask for the last page of them. */
export function loadDms(seq) {
  startDms(seq);
  if (chat.dm.hasOlder) requestDms({ conv: null, pages: 1, first: true });
}

function requestDms(want) {
  const dm = chat.dm;
  const payload = { channel: DM, before_seq: dm.before, limit: OLDER_PAGE };
  if (!may("history/request", payload)) {
    dm.hasOlder = false; // not for this person: not asked on every page load only to be refused
    return;
  }
  dm.loading = request("history/request", payload, "load direct messages");
  dm.want = dm.loading ? want : null;
}

/** Ask for the page of messages before the oldest one shown (`pages`: of DMs, how many at
 * most until one has messages of this conversation). */
export function loadOlder(conv, pages = DM_PAGES_PER_ASK) {
  if (conv.kind === "dm") {
    const dm = chat.dm;
    if (!dm || dm.loading || !dm.hasOlder) return;
    requestDms({ conv: conv.key, pages, first: false });
    bus.emit("conv", conv.key);
    return;
  }
  if (!conv.joined || conv.loadingOlder || !conv.hasOlder) return;
  const seqs = conv.order.filter((i) => i.era === conv.era && i.seq !== null && i.seq > 0).map((i) => i.seq);
  const payload = { channel: conv.key, limit: OLDER_PAGE };
  if (seqs.length) payload.before_seq = Math.min(...seqs);
  conv.loadingOlder = request("history/request", payload, `load older messages of ${conv.key}`);
  bus.emit("conv", conv.key);
}

/** Show conversation `key` (a channel or a DM, made on first use). */
export function openConversation(key) {
  const conv = conversation(key);
  // "New messages" above the first one that came since the person last read here (not on a
  // first visit, where everything is new)
  conv.newSince = conv.unread && conv.lastRead > 0 ? conv.lastRead : null;
  chat.current = key;
  bus.emit("current", conv);
  if (viewing(conv)) markRead(conv);
  bus.emit("conv-list");
  if (conv.kind === "dm" && !conv.items.size) loadOlder(conv); // its messages may be further back
}

/** Everyone the space knows, offline ones and pending callbacks included (GET /participants). */
export async function refreshRoster() {
  const q = new URLSearchParams({ space: chat.space || "default" });
  const headers = chat.signin && chat.signin.token ? { Authorization: "Bearer " + chat.signin.token } : {};
  if (headers.Authorization) q.delete("space"); // the token names its space
  try {
    const resp = await fetch("/participants?" + q, { headers, cache: "no-store" });
    if (!resp.ok) return;
    const body = await resp.json();
    if (Array.isArray(body.participants)) setRoster(body.participants);
  } catch (e) {
    /* the WebSocket's presence keeps the list current meanwhile */
  }
}
