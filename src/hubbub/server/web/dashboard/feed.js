// The activity feed: one line per event of the space, newest first, with its filters.

import { $, el } from "../common/dom.js";
import { clock, json, plural, short } from "../common/format.js";
import { proposalWhat } from "../common/proposals.js";
import { proposalEvent } from "./board.js";
import { st } from "./state.js";

const FEED_MAX = 600;

/** [group, tag, text] of an activity event. */
function describe(ev) {
  const p = ev.participant;
  const ch = ev.channel;
  const inCh = ch ? ` in ${ch}` : "";
  switch (ev.event) {
    case "message":
      if (ev.kind !== "chat") {
        // reasoning/* and mcp/* traffic: its own check box, off by default
        if (ev.dm) return ["traffic", "dm", `${p} → ${(ev.to || []).join(", ")} (direct ${ev.kind})`];
        return ["traffic", ev.kind, `${p}${inCh}: ${ev.kind}${ev.method ? " " + ev.method : ""}`];
      }
      if (ev.dm) return ["message", "dm", `${p} → ${(ev.to || []).join(", ")} (direct ${ev.kind})`];
      return ["message", "msg", `${ch} ${p}: ${ev.text}`];
    case "connect":
      return ["presence", "online", `${p} connected (${ev.kind})`];
    case "disconnect":
      return ["presence", "offline", `${p} disconnected`];
    case "join":
      return ["presence", "join", `${p} joined ${ch}`];
    case "leave":
      return ["presence", "leave", `${p} left ${ch}`];
    case "presence":
      return ["presence", "presence", `${p} is ${ev.presence}`];
    case "claim":
      return ["floor", "claim", `${p} claims the floor on ${short(ev.msg_id)}${inCh} until ${clock(ev.expires_at)}`];
    case "yield":
      return ["floor", "yield", `${p} yields to ${ev.winner} on ${short(ev.msg_id)}${inCh}`];
    case "claim-released":
      return ["floor", "released", `${p} released the floor on ${short(ev.msg_id)}${inCh} (${ev.reason})`];
    case "claim-refused":
      return ["floor", "refused", `${p}'s claim on ${short(ev.msg_id)}${inCh} was refused: ${ev.reason === "answered" ? `${ev.winner} answered it already` : `it is for ${ev.winner}`}`];
    case "unclaimed":
      return ["floor", "unclaimed", `no agent took ${p}'s question ${short(ev.msg_id)}${inCh} (${ev.after_s} s)`];
    case "callback-scheduled":
      return ["callback", "callback", `${p} scheduled a callback due ${clock(ev.due)}${inCh}`];
    case "callback-fired":
      return ["callback", "fired", `callback of ${p} fired${inCh}`];
    case "callback-dropped":
      return ["callback", "dropped", `callback of ${p} dropped (${ev.reason})`];
    case "sleep":
      return ["sleep", "sleep", `${p} sleeps until ${clock(ev.wake_at)} (${ev.mode} mode)`];
    case "wake": {
      const lost = ev.dropped_oldest ? `, ${ev.dropped_oldest} dropped` : "";
      return ["sleep", "wake", `${p} woke (${ev.reason}): ${plural(ev.buffered, "buffered message")} delivered${lost}`];
    }
    case "sleep-cancelled":
      return ["sleep", "sleep", `${p}'s sleep was cancelled (disconnected)`];
    case "proposal":
      return ["proposal", "proposal", `${p} proposes ${proposalWhat(ev)} on ${(ev.to || []).join(", ")}`];
    case "proposal-approved":
      return ["proposal", "approved", `${p} approved proposal ${short(ev.id)}`];
    case "proposal-result":
      return ev.ok === false
        ? ["proposal", "failed", `${p} failed proposal ${short(ev.id)}: ${ev.error || ev.result}`]
        : ["proposal", "result", `${p} answered proposal ${short(ev.id)}: ${ev.result}`];
    case "proposal-rejected":
      return ["proposal", "rejected", `${p} rejected proposal ${short(ev.id)}${ev.reason ? ": " + ev.reason : ""}`];
    case "proposal-withdrawn":
      return ["proposal", "withdrawn", `${p} withdrew proposal ${short(ev.id)}${ev.reason ? " (" + ev.reason + ")" : ""}`];
    case "error":
      return ["error", "error", `${p}: ${ev.code} — ${ev.message}`];
    case "kick":
      return ["admin", "kick", `${p} was disconnected by ${ev.by || "an admin"}${ev.was === "sleeping" ? " while sleeping" : ""}`];
    case "ban":
      return ["admin", "ban", `${p} was banned by ${ev.by || "an admin"}${ev.disconnected ? " and disconnected" : ""}`];
    case "unban":
      return ["admin", "unban", `${p} was unbanned by ${ev.by || "an admin"}`];
    default:
      return ["other", ev.event, json(ev)];
  }
}

function hidden(ev) {
  // the sleep and wake events already say what these presence updates say
  if (ev.event !== "presence") return false;
  if (ev.presence === "sleeping") return true;
  return ev.presence === "online" && st.lastEvent.get(ev.participant) === "wake";
}

function matches(ev, group) {
  const chan = $("filter-channel").value;
  const who = $("filter-agent").value;
  if (group === "message" && !$("filter-messages").checked) return false;
  if (group === "presence" && !$("filter-presence").checked) return false;
  if (group === "traffic" && !$("filter-traffic").checked) return false;
  if (chan && ev.channel !== chan && !(ev.channels || []).includes(chan)) return false;
  if (who && ev.participant !== who && ev.winner !== who && !(ev.to || []).includes(who)) return false;
  return true;
}

function feedRow(ev) {
  const [group, tag, text] = describe(ev);
  if (!matches(ev, group)) return null;
  return el(
    "li",
    { dataset: { event: ev.event, group, participant: ev.participant || "" } },
    el("time", { datetime: new Date(ev.ts).toISOString() }, clock(ev.ts)),
    el("span", { class: "tag" }, tag),
    el("span", { class: "body" }, text),
  );
}

export function addEvent(ev) {
  ev.hidden = hidden(ev);
  if (ev.participant) st.lastEvent.set(ev.participant, ev.event);
  st.feed.push(ev);
  if (st.feed.length > FEED_MAX) st.feed.shift();
  proposalEvent(ev);
  if (ev.hidden) return;
  const row = feedRow(ev);
  if (!row) return;
  const feed = $("feed");
  feed.prepend(row);
  while (feed.childElementCount > FEED_MAX) feed.lastElementChild.remove();
}

export function resetFeed(events) {
  st.feed = [];
  st.lastEvent = new Map();
  $("feed").replaceChildren();
  for (const ev of events) addEvent(ev);
}

function refilter() {
  const rows = [];
  for (const ev of st.feed) {
    if (ev.hidden) continue;
    const row = feedRow(ev);
    if (row) rows.push(row);
  }
  rows.reverse();
  $("feed").replaceChildren(...rows);
}

export function renderFilterOptions() {
  const fill = (select, values) => {
    const current = select.value;
    const want = ["", ...values];
    const have = [...select.options].map((o) => o.value);
    if (have.join("\n") === want.join("\n")) return;
    select.replaceChildren(...want.map((v) => el("option", { value: v }, v || "all")));
    select.value = want.includes(current) ? current : "";
  };
  fill($("filter-channel"), st.channels.map((c) => c.name));
  fill($("filter-agent"), [...st.participants.keys()].sort());
}

/** Re-filter the feed whenever a filter changes. */
export function initFilters() {
  for (const id of ["filter-channel", "filter-agent", "filter-messages", "filter-presence", "filter-traffic"]) {
    $(id).addEventListener("change", refilter);
  }
}
