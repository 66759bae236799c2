// The operator console: a human participant's MEW connection (the shared session of
// ../common/session.js) with channel tabs, history, a message box and /commands; the
// proposals panel approves and rejects through it.

import { $, el } from "../common/dom.js";
import { clock, short } from "../common/format.js";
import { proposalFrom, proposalWhat, resultText } from "../common/proposals.js";
import { Session } from "../common/session.js";
import { store } from "../common/store.js";
import { DM, ID_RE, SERVER } from "../common/wire.js";
import { boardChanged, mergeProposal, settle, takePayload } from "./board.js";
import { CONSOLE_ID_KEY, showNotice, st } from "./state.js";

const LOG_MAX = 1000;

export const cs = {
  session: null,
  explicit: false, // connected because the person asked (not on demand for an approve)
  id: null,
  ready: false,
  channels: new Map(), // name -> {messages: Map(seq -> env), hasMore, unread}
  current: null,
  actions: new Map(), // client id of an approve/reject -> proposal id
  requests: new Map(), // server id of our fulfilment request -> proposal id
};

export function consoleOpen() {
  return !!cs.session;
}

export function consoleReady() {
  return !!(cs.session && cs.ready);
}

/** Send a frame on the console's connection; its id, or null (and a line saying why). */
export function consoleSend(env) {
  const id = cs.session ? cs.session.send(env) : null;
  if (!id) consoleLine("error", "the console is not connected");
  return id;
}

/** What to do once the console is connected (an approve or reject asked for before). */
const waiting = [];

/**
 * Run `fn` on the console's connection: at once when it is connected, else once it is,
 * connecting it now (`what` says why, e.g. "approve tools/call add"). False when this viewer
 * has no console (the reason is shown).
 */
export function whenConsoleReady(what, fn) {
  if (consoleReady()) {
    fn();
    return true;
  }
  const v = st.viewer;
  if (!v || !v.can_console) {
    showNotice(`Cannot ${what}: approving and rejecting go through the operator console, which needs a human participant's token (or open mode).`);
    return false;
  }
  waiting.push(fn);
  if (!cs.session && !consoleConnect(false)) {
    waiting.length = 0;
    return false;
  }
  showNotice(`Connecting the operator console to ${what}…`, "info");
  return true;
}

/** Open the console's connection (`explicit`: the person asked for it, so it takes the
 * focus); false when the operator id is not valid. */
export function consoleConnect(explicit = true) {
  const v = st.viewer;
  if (!v || !v.can_console || cs.session) return !!cs.session;
  const id = v.open ? $("console-id").value.trim() : v.id;
  if (!ID_RE.test(id || "")) {
    showNotice("The operator id must be 1-32 of A-Z a-z 0-9 _ . -");
    $("console-id").focus();
    return false;
  }
  cs.explicit = explicit;
  if (v.open) store(CONSOLE_ID_KEY, id);
  const session = new Session({
    hello: () => {
      const hello = { participantId: id, space: v.space, kind: "human" };
      if (!v.open && st.token) hello.token = st.token;
      return hello;
    },
    channels: ["#general"],
    idPrefix: "op",
  });
  cs.session = session;
  cs.ready = false;
  cs.channels = new Map();
  cs.current = null;
  $("console-connect").hidden = true;
  session.on("welcome", welcomed);
  session.on("joined", joined);
  session.on("left", (name) => {
    cs.channels.delete(name);
    if (cs.current === name) cs.current = cs.channels.keys().next().value || null;
    renderConsole();
  });
  session.on("history", history);
  session.on("error", refused);
  session.on("envelope", onEnvelope);
  session.on("state", (state, detail) => {
    if (cs.session !== session) return;
    if (state === "reconnecting" && cs.ready) {
      cs.ready = false;
      consoleLine("error", "console connection lost; reconnecting…");
      boardChanged();
    } else if (state === "closed") {
      closed(detail);
    }
  });
  session.start();
  return true;
}

export function consoleDisconnect() {
  if (cs.session) cs.session.stop(1000, "operator left");
}

function closed(detail) {
  cs.session = null;
  cs.ready = false;
  const why =
    {
      4000: "replaced by another connection with the same id",
      4001: detail.reason || "disconnected by an admin",
      1008: detail.reason || "refused",
      1001: "the server is shutting down",
    }[detail.code] ||
    detail.reason ||
    `closed (${detail.code})`;
  consoleLine("error", `console disconnected: ${why}`);
  if (waiting.length) {
    waiting.length = 0;
    showNotice(`The operator console could not connect (${why}), so nothing was approved or rejected.`);
  }
  $("console-connect").hidden = !(st.viewer && st.viewer.can_console);
  boardChanged();
}

function welcomed(env) {
  const p = env.payload || {};
  cs.id = (p.you && p.you.id) || cs.id;
  cs.ready = true;
  $("console-main").hidden = false;
  consoleLine("system", `connected as ${cs.id}`);
  const queued = waiting.splice(0);
  if (queued.length) showNotice(null);
  for (const fn of queued) fn();
  boardChanged();
  if (cs.explicit) $("console-input").focus();
}

function joined(name, info) {
  const ch = channelState(name);
  for (const m of info.history) remember(name, m);
  if (!info.resumed) {
    const seqs = info.history.map((m) => m.seq).filter((n) => typeof n === "number");
    ch.hasMore = seqs.length > 0 && Math.min(...seqs) > 1;
  }
  if (!cs.current || cs.current === DM) cs.current = name;
  for (const m of info.history) if (m.kind === "mcp/proposal") noteHistoryProposal(m);
  renderConsole();
}

function history(info) {
  const ch = channelState(info.channel);
  for (const m of info.messages) remember(info.channel, m);
  if (!info.forward) ch.hasMore = info.hasMore;
  renderConsole(true);
}

function refused(p, env) {
  const cid = (env.correlation_id || [])[0];
  const pid = cs.actions.get(cid);
  if (pid) {
    const prop = st.proposals.get(pid);
    if (prop && prop.status === "approved") prop.status = "pending"; // it did not go out
    if (prop) prop.outcome = { ok: false, text: `${p.error}: ${p.message}` };
    boardChanged();
  }
  consoleLine("error", `${p.error}: ${p.message}`);
}

function channelState(name) {
  let ch = cs.channels.get(name);
  if (!ch) {
    ch = { messages: new Map(), hasMore: false, unread: 0 };
    cs.channels.set(name, ch);
  }
  return ch;
}

function onEnvelope(env) {
  const p = env.payload || {};
  switch (env.kind) {
    case "mcp/proposal":
      mergeProposal(proposalFrom(env), "console");
      boardChanged();
      break;
    case "mcp/request":
      if (env.from === cs.id) {
        for (const cid of env.correlation_id || []) {
          if (st.proposals.has(cid)) cs.requests.set(env.id, cid);
        }
      }
      break;
    case "mcp/response":
      for (const cid of env.correlation_id || []) {
        const pid = cs.requests.get(cid);
        if (!pid) continue;
        cs.requests.delete(cid);
        const err = p.error;
        const text = err ? `${env.from} failed: ${errorText(err)}` : `${env.from} answered: ${resultText(p.result)}`;
        settle(pid, "done", { ok: !err, text });
        consoleLine(err ? "error" : "system", `proposal ${short(pid)} — ${text}`);
        boardChanged();
      }
      break;
    case "mcp/reject":
      for (const cid of env.correlation_id || []) {
        if (st.proposals.has(cid) && env.from !== cs.id) {
          settle(cid, "rejected", { ok: false, text: `rejected by ${env.from}: ${p.reason || ""}` });
          boardChanged();
        }
      }
      break;
    case "mcp/withdraw":
      for (const cid of env.correlation_id || []) {
        if (st.proposals.has(cid)) {
          settle(cid, "withdrawn", { ok: false, text: `withdrawn by ${env.from}${p.reason ? " (" + p.reason + ")" : ""}` });
          boardChanged();
        }
      }
      break;
    default:
      break;
  }
  if (env.kind === "chat" || env.kind === "mcp/proposal" || env.kind.startsWith("reasoning/")) {
    const where = env.channel || DM;
    remember(where, env);
    const ch = channelState(where);
    if (where !== cs.current && !env.kind.startsWith("reasoning/")) ch.unread += 1;
    renderConsole(false, where !== cs.current);
  }
}

function noteHistoryProposal(env) {
  // a proposal from history is shown only if the observer feed still has it pending
  const have = st.proposals.get(env.id);
  if (have && !have.payload) takePayload(have, env.payload);
}

function remember(where, env) {
  const ch = channelState(where);
  const key = env.seq !== undefined && env.seq !== null ? env.seq : env.id;
  ch.messages.set(key, env);
  if (ch.messages.size > LOG_MAX) ch.messages.delete(ch.messages.keys().next().value);
}

const systemLines = [];

/** A line of the console's own (connected, approved, errors), shown in the current tab. */
export function consoleLine(kind, text) {
  systemLines.push({ kind, text, at: Date.now(), where: cs.current });
  if (systemLines.length > 200) systemLines.shift();
  renderConsole();
}

/** What a message says, as a sentence (never its JSON): chat text, a proposal, reasoning,
 * an error; anything else by its kind and its plain fields. */
export function messageText(env) {
  const p = env.payload && typeof env.payload === "object" ? env.payload : {};
  const said = (key) => (typeof p[key] === "string" ? p[key].trim() : "");
  let text;
  switch (env.kind) {
    case "chat":
      text = said("text") || "(a message without text)";
      break;
    case "mcp/proposal": {
      const prop = proposalFrom(env);
      text = `proposes ${proposalWhat(prop)} on ${prop.to.join(", ")}`;
      break;
    }
    case "reasoning/start":
      text = said("message") || said("text") || "starts working on it…";
      break;
    case "reasoning/thought":
      text = `thinks: ${said("message") || said("text") || "…"}`;
      break;
    case "reasoning/conclusion":
      text = `done: ${said("message") || said("text") || "concluded"}`;
      break;
    case "reasoning/cancel":
      text = `stopped: ${said("message") || said("reason") || "cancelled"}`;
      break;
    case "system/error":
      text = `${said("message") || "the gateway refused a message"}${said("error") ? ` (${said("error")})` : ""}`;
      break;
    default: {
      const plain = Object.entries(p)
        .filter(([, v]) => ["string", "number", "boolean"].includes(typeof v))
        .map(([k, v]) => `${k} ${v}`);
      text = `${env.kind}${plain.length ? ": " + plain.join(", ") : ""}`;
    }
  }
  if (!env.channel && env.to) text = `→ ${env.to.join(", ")}: ${text}`;
  return text;
}

/** An MCP error as a sentence: its message, else its code. */
function errorText(err) {
  if (err && typeof err.message === "string" && err.message) return err.message;
  return err && err.code !== undefined ? `error ${err.code}` : "an error without a message";
}

/** The row class of a message in the log. */
function rowClass(m) {
  if (m.kind === "system/error") return "error";
  if (m.from === cs.id) return "mine";
  if (m.from === SERVER) return "system";
  return m.kind.startsWith("reasoning/") ? "reasoning" : "";
}

function renderConsole(keepScroll, tabsOnly) {
  const tabs = $("console-tabs");
  tabs.replaceChildren();
  const names = [...cs.channels.keys()].sort((a, b) => (a === DM) - (b === DM) || a.localeCompare(b));
  for (const name of names) {
    const ch = cs.channels.get(name);
    tabs.append(
      el(
        "button",
        {
          type: "button",
          role: "tab",
          "aria-selected": String(name === cs.current),
          dataset: { channel: name },
          onclick: () => {
            cs.current = name;
            ch.unread = 0;
            renderConsole();
            $("console-input").focus();
          },
        },
        name === DM ? "direct" : name,
        ch.unread ? el("span", { class: "unread" }, String(ch.unread)) : null,
      ),
    );
  }
  if (tabsOnly) return;
  const log = $("console-log");
  const atBottom = log.scrollTop + log.clientHeight >= log.scrollHeight - 4;
  const ch = cs.current ? cs.channels.get(cs.current) : null;
  const rows = []; // [time, order, node]: messages by seq, the console's own lines by time
  if (ch) {
    const msgs = [...ch.messages.values()].sort(
      (a, b) => (a.seq || 0) - (b.seq || 0) || String(a.id).localeCompare(String(b.id)),
    );
    let last = 0;
    for (const m of msgs) {
      last = Math.max(last, Date.parse(m.ts) || 0);
      const cls = rowClass(m);
      rows.push([
        last,
        0,
        el(
          "li",
          { class: cls, dataset: { seq: m.seq ?? "", kind: m.kind } },
          el("time", {}, clock(m.ts)),
          el("span", { class: "from" }, m.from),
          el("span", { class: "body" }, messageText(m)),
        ),
      ]);
    }
  }
  for (const line of systemLines) {
    if (line.where && line.where !== cs.current) continue;
    const node = el("li", { class: line.kind }, el("time", {}, clock(line.at)), el("span", { class: "body" }, line.text));
    rows.push([line.at, 1, node]);
  }
  rows.sort((a, b) => a[0] - b[0] || a[1] - b[1]); // stable: equal times keep their order
  log.replaceChildren(...rows.map((r) => r[2]));
  if (!keepScroll && atBottom) log.scrollTop = log.scrollHeight;
  $("console-older").hidden = !(ch && ch.hasMore && cs.current !== DM);
  $("console-input").placeholder =
    cs.current === DM || !cs.current
      ? "/dm id text — Enter sends · /join #ch"
      : `Message ${cs.current} — Enter sends · /dm id text · /join #ch · /leave`;
}

function loadOlder() {
  const ch = cs.channels.get(cs.current);
  if (!ch || cs.current === DM) return;
  const seqs = [...ch.messages.values()].map((m) => m.seq).filter((s) => typeof s === "number");
  const payload = { channel: cs.current, limit: 50 };
  if (seqs.length) payload.before_seq = Math.min(...seqs);
  consoleSend({ kind: "history/request", payload });
}

function submitConsole(text) {
  const line = text.trim();
  if (!line) return;
  const dm = /^\/dm\s+(\S+)\s+([\s\S]+)$/.exec(line);
  const join = /^\/join\s+(#\S+)$/.exec(line);
  if (dm) {
    consoleSend({ kind: "chat", to: [dm[1].replace(/^@/, "")], private: true, payload: { text: dm[2] } });
  } else if (join) {
    consoleSend({ kind: "channel/join", payload: { channel: join[1] } });
  } else if (/^\/leave\s*$/.test(line)) {
    if (cs.current && cs.current !== DM) consoleSend({ kind: "channel/leave", payload: { channel: cs.current } });
  } else if (line.startsWith("/")) {
    consoleLine("error", "commands: /dm id text, /join #channel, /leave");
    return;
  } else if (!cs.current || cs.current === DM) {
    consoleLine("error", "pick a channel tab, or write /dm id text");
    return;
  } else {
    consoleSend({ kind: "chat", channel: cs.current, payload: { text } });
  }
  $("console-input").value = "";
}

/** Wire the console's forms and buttons. */
export function initConsole() {
  $("console-connect").addEventListener("submit", (e) => {
    e.preventDefault();
    consoleConnect();
  });
  $("console-disconnect").addEventListener("click", consoleDisconnect);
  $("console-older").addEventListener("click", loadOlder);
  $("console-form").addEventListener("submit", (e) => {
    e.preventDefault();
    submitConsole($("console-input").value);
  });
  $("console-join").addEventListener("submit", (e) => {
    e.preventDefault();
    const input = $("console-join-input");
    let name = input.value.trim();
    if (!name) return;
    if (!name.startsWith("#")) name = "#" + name;
    consoleSend({ kind: "channel/join", payload: { channel: name } });
    input.value = "";
  });
}
