// One row of a conversation: a message (Markdown, its state until acknowledged, who is
// answering it, the tool calls and proposals folded under it), a note from the gateway, or
// an agent's activity not yet followed by a message of its own.

import { el } from "../common/dom.js";
import { hhmm, json, plural } from "../common/format.js";
import { approveEnvelope } from "../common/proposals.js";
import { SERVER } from "../common/wire.js";
import { approve, discard, reject, retry } from "./actions.js";
import { denied, may, maySome } from "./allowed.js";
import { avatar } from "./avatar.js";
import { answeringOn, yielders } from "./floor.js";
import { renderMarkdown } from "./markdown.js";
import { chat, knownIds } from "./state.js";
import { mentionsMe } from "./unread.js";

export function renderItem(item) {
  if (item.type === "note") return noteRow(item);
  if (item.type === "activity") return activityRow(item);
  return chatRow(item);
}

function kindOf(id) {
  const person = chat.people.get(id);
  return person && person.kind && person.kind !== "human" ? person.kind : null;
}

function meta(item, extra) {
  const kind = kindOf(item.from);
  return el(
    "div",
    { class: "meta" },
    el("span", { class: "from" }, item.from === chat.me ? `${item.from} (you)` : item.from),
    kind ? el("span", { class: "badge" }, kind) : null,
    item.ts ? el("time", { datetime: item.ts, title: new Date(item.ts).toLocaleString() }, hhmm(item.ts)) : null,
    extra,
  );
}

function dataset(item) {
  return { id: item.id || "", seq: item.seq ?? "", from: item.from || "", status: item.status };
}

function chatRow(item) {
  const mine = item.from === chat.me;
  const state =
    item.status === "pending"
      ? el("span", { class: "state" }, "sending…")
      : item.status === "failed"
        ? el("span", { class: "state bad" }, "not sent")
        : item.status === "kept"
          ? el("span", { class: "state" }, "kept by the gateway")
          : null;
  const cls = ["msg", mine ? "mine" : "", item.status !== "sent" ? item.status : "", !mine && mentionsMe(item.text) ? "mention-me" : ""];
  const body = el("div", { class: "body md" });
  body.append(renderMarkdown(item.text, { me: chat.me, known: knownIds() }));
  return el(
    "li",
    { class: cls.filter(Boolean).join(" "), dataset: dataset(item) },
    avatar(item.from, kindOf(item.from)),
    meta(item, state),
    body,
    item.status === "kept"
      ? el("div", { class: "hint" }, "Only markers (a callback or sleep): the gateway acted on it and relayed nothing, so nobody else sees this line.")
      : null,
    item.status === "failed" ? failure(item) : null,
    floorLine(item),
    item.entries && item.entries.length ? fold(item.entries, false) : null,
  );
}

function failure(item) {
  const e = item.error || {};
  return el(
    "div",
    { class: "failure", role: "alert" },
    el("span", { class: "error-text" }, `${e.error || "error"}: ${e.message || "the gateway refused this message"}`),
    " ",
    el("button", { type: "button", class: "small retry", onclick: () => retry(item) }, "Retry"),
    " ",
    el("button", { type: "button", class: "small secondary discard", onclick: () => discard(item) }, "Discard"),
  );
}

/** Who is answering this message, who answered, who yielded (floor control, reasoning). */
function floorLine(item) {
  if (!item.id) return null;
  const now = answeringOn(item.id);
  const f = chat.floor.get(item.id);
  const parts = [];
  if (now.length) parts.push(`${now.join(", ")} ${now.length === 1 ? "is" : "are"} answering…`);
  else if (f && f.answered.size) parts.push(`answered by ${[...f.answered].join(", ")}`);
  else if (f && f.holder && f.done) parts.push(`${f.holder} held the floor`);
  const gave = f ? yielders(f) : [];
  if (gave.length) parts.push(`${gave.join(", ")} yielded to ${f.holder || "another agent"}`);
  if (f && f.notice && !now.length && !f.answered.size) parts.push(f.notice);
  if (!parts.length) return null;
  return el("div", { class: "floor-line" + (now.length ? " live" : "") }, parts.join(" · "));
}

function noteRow(item) {
  if (item.cbOrigin !== null && item.cbOrigin !== undefined) {
    const mine = item.cbOrigin === chat.me;
    return el(
      "li",
      { class: "msg note callback", dataset: dataset(item) },
      el("span", { class: "tag" }, "callback"),
      el("span", {}, mine ? " yours: " : ` for ${item.cbOrigin}: `),
      el("span", { class: "cb-text" }, item.text),
    );
  }
  const from = item.from && item.from !== SERVER ? `${item.from}: ` : "";
  return el("li", { class: "msg note", dataset: dataset(item) }, from + item.text);
}

function activityRow(item) {
  // an agent's tool calls and proposals before its message; a row with a proposal stays where
  // it is once the agent has spoken (done), so that approving it does not move it
  return el(
    "li",
    { class: "msg activity", dataset: dataset(item) },
    avatar(item.from, kindOf(item.from)),
    meta(item, activityState(item)),
    fold(item.entries, true),
  );
}

function activityState(item) {
  const waits = item.entries.some((e) => e.type === "proposal" && e.status === "pending");
  if (waits) return el("span", { class: "state" }, "waiting for approval…");
  return item.done ? null : el("span", { class: "state" }, "working…");
}

function summary(entries) {
  const count = (type) => entries.filter((e) => e.type === type).length;
  const parts = [];
  if (count("call")) parts.push(plural(count("call"), "tool call"));
  if (count("proposal")) parts.push(plural(count("proposal"), "proposal"));
  if (count("thought")) parts.push(plural(count("thought"), "thought"));
  return parts.join(" · ") || "activity";
}

/** The entries folded under a message (open while a proposal waits, or when standalone). */
function fold(entries, standalone) {
  const waiting = entries.some((e) => e.type === "proposal" && (e.status === "pending" || e.status === "approving" || e.status === "rejecting" || e.error));
  const list = el("ul", { class: "entries" });
  for (const entry of entries) list.append(entryRow(entry));
  return el(
    "details",
    { class: "fold", open: standalone || waiting },
    el("summary", {}, summary(entries)),
    list,
  );
}

/** A value as a person reads it: text as it is, numbers and flags as written, the rest as JSON. */
function valueText(value) {
  if (typeof value === "string") return value;
  if (typeof value === "number" || typeof value === "boolean" || value === null) return String(value);
  return json(value);
}

/** Arguments as a readable list (`a 1234`, `b 4321`), one row per argument. */
function argList(args) {
  if (args && typeof args === "object" && !Array.isArray(args)) {
    const entries = Object.entries(args);
    if (!entries.length) return el("div", { class: "args none" }, "no arguments");
    return el(
      "dl",
      { class: "args" },
      ...entries.flatMap(([key, value]) => [el("dt", {}, key), el("dd", {}, valueText(value))]),
    );
  }
  return el("div", { class: "args" }, valueText(args));
}

/** Arguments inline, for a tool call: `a: 1234, b: 4321`. */
function argsInline(args) {
  if (args && typeof args === "object" && !Array.isArray(args)) {
    return Object.entries(args).map(([key, value]) => `${key}: ${valueText(value)}`).join(", ");
  }
  return args === undefined ? "" : valueText(args);
}

function entryRow(entry) {
  if (entry.type === "thought") return el("li", { class: "entry thought" }, el("span", { class: "tag" }, "thought"), el("span", { class: "text" }, entry.text));
  if (entry.type === "call") {
    const args = argsInline(entry.arguments);
    const outcome =
      entry.result === null
        ? el("span", { class: "pending" }, " …")
        : el("span", { class: entry.ok ? "ok" : "bad" }, ` → ${entry.result}`);
    return el(
      "li",
      { class: "entry call", dataset: { id: entry.id } },
      el("span", { class: "tag" }, "tool"),
      el("code", {}, `${entry.to.join(", ")}/${entry.tool}`),
      args ? el("span", { class: "args" }, ` (${args})`) : null,
      outcome,
    );
  }
  return proposalRow(entry);
}

function proposalRow(entry) {
  const p = entry.proposal;
  const what = p.tool ? `${p.method} ${p.tool}` : p.method || "?";
  const row = el(
    "li",
    { class: "entry proposal", dataset: { id: entry.id, status: entry.status } },
    el(
      "div",
      { class: "what" },
      el("span", { class: "tag" }, "proposal"),
      "proposes ",
      el("code", {}, what),
      ` to ${p.to.join(", ") || "?"}`,
    ),
    p.arguments === undefined || p.arguments === null ? null : argList(p.arguments),
  );
  const state = {
    approving: "approving…",
    approved: `approved by ${entry.by}; waiting for ${p.to.join(", ")}…`,
    rejecting: "rejecting…",
  }[entry.status];
  if (entry.status === "pending" && p.participant !== chat.me) row.append(proposalButtons(entry, what));
  if (state) row.append(el("div", { class: "outcome" }, state));
  if (entry.outcome) row.append(el("div", { class: "outcome " + (entry.outcome.ok ? "ok" : "bad") }, entry.outcome.text));
  if (entry.error) row.append(el("div", { class: "error-text", role: "alert" }, entry.error));
  return row;
}

/** Approve and Reject, as far as my capabilities allow them (a note says why one is missing). */
function proposalButtons(entry, what) {
  const fulfil = approveEnvelope(entry.proposal);
  const mayApprove = may(fulfil.kind, fulfil.payload);
  const mayReject = maySome("mcp/reject");
  const box = el("div", { class: "buttons" });
  const missing = [];
  if (!mayApprove) missing.push(`approve: ${denied(fulfil.kind, "for " + what)}`);
  if (!mayReject) missing.push(`reject: ${denied("mcp/reject")}`);
  const note = missing.length ? el("div", { class: "hint denied" }, `You cannot ${missing.join("; ")}.`) : null;
  if (!mayApprove && !mayReject) return note;
  if (entry.rejecting && mayReject) {
    const input = el("input", {
      class: "reason",
      placeholder: "reason (Enter rejects, Esc cancels)",
      "aria-label": "reason for rejecting",
      value: entry.reason || "",
      oninput: (e) => {
        entry.reason = e.target.value;
      },
      onkeydown: (e) => {
        if (e.key === "Escape") {
          e.preventDefault();
          entry.rejecting = false;
          rerender(box, entry, ".reject");
        }
      },
    });
    box.append(
      el(
        "form",
        {
          class: "reject-form",
          onsubmit: (e) => {
            e.preventDefault();
            entry.rejecting = false;
            reject(entry, entry.reason || "");
          },
        },
        input,
        el("button", { type: "submit", class: "small danger" }, "Reject"),
      ),
    );
    queueMicrotask(() => input.isConnected && input.focus());
    return box;
  }
  const parts = [
    mayApprove ? el("button", { type: "button", class: "small approve", onclick: () => approve(entry) }, "Approve") : null,
    mayApprove && mayReject ? " " : null,
    mayReject
      ? el(
          "button",
          {
            type: "button",
            class: "small danger reject",
            onclick: () => {
              entry.rejecting = true;
              rerender(box, entry, ".reason");
            },
          },
          "Reject",
        )
      : null,
    note,
  ];
  box.append(...parts.filter((part) => part !== null));
  return box;
}

function rerender(box, entry, focus) {
  const row = box.closest(".entry");
  if (!row) return;
  const again = proposalRow(entry);
  row.replaceWith(again);
  const target = again.querySelector(focus);
  if (target) target.focus();
}
