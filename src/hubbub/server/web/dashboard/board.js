// The proposal board's data: every proposal the dashboard knows of (from the feed and the
// console's channels), its status and outcome. No DOM: views redraw on the "changed" event
// (proposals.js draws the list), so the console and the feed update the board without
// importing its view. The feed carries a large proposal without its payload (an arguments
// preview instead); loadPayload() fetches it when the proposal is opened or approved.

import { Emitter } from "../common/emitter.js";
import { authHeaders, query, st } from "./state.js";

/** Emits "changed" when a proposal, or what the board's view depends on, changed. */
export const board = new Emitter();

/** Tell the board's views to redraw. */
export function boardChanged() {
  board.emit("changed");
}

const SETTLED_MAX = 20;

export function mergeProposal(p, source) {
  const have = st.proposals.get(p.id);
  if (have) {
    have.sources.add(source);
    if (!have.payload && p.payload) takePayload(have, p.payload);
    if (have.status === "pending" && p.status === "approved") have.status = "approved";
    return have;
  }
  const entry = { ...p, sources: new Set([source]), outcome: null };
  st.proposals.set(p.id, entry);
  if (!st.selected) st.selected = p.id;
  return entry;
}

export function settle(id, status, outcome) {
  const p = st.proposals.get(id);
  if (!p) return;
  if (p.status === "done" || p.status === "rejected" || p.status === "withdrawn") {
    if (outcome && !p.outcome) p.outcome = outcome;
    return;
  }
  p.status = status;
  if (outcome) p.outcome = outcome;
  p.settledAt = Date.now();
  if (st.selected === id && status !== "approved") st.selected = nextPending(id);
  const settled = [...st.proposals.values()].filter((q) => q.settledAt).sort((a, b) => b.settledAt - a.settledAt);
  for (const old of settled.slice(SETTLED_MAX)) st.proposals.delete(old.id);
}

/** A proposal's full payload arrived (inline, from the console, or loaded on demand). */
export function takePayload(p, payload) {
  p.payload = payload;
  p.payload_omitted = false;
  const params = payload && typeof payload.params === "object" && payload.params ? payload.params : {};
  p.arguments = params.arguments;
}

const loading = new Map();

/**
 * Load a proposal's payload that the feed left out (large ones): GET /dashboard/proposals/{id}.
 * Resolves to the proposal (with its payload) or null; one request per proposal at a time.
 */
export function loadPayload(id) {
  const p = st.proposals.get(id);
  if (!p) return Promise.resolve(null);
  if (p.payload) return Promise.resolve(p);
  if (loading.has(id)) return loading.get(id);
  const done = fetch(`/dashboard/proposals/${encodeURIComponent(id)}` + query(false), {
    headers: authHeaders(),
    cache: "no-store",
  })
    .then((resp) => (resp.ok ? resp.json() : null))
    .catch(() => null)
    .then((body) => {
      loading.delete(id);
      const now = st.proposals.get(id);
      if (!now || !body || !body.payload) return null;
      takePayload(now, body.payload);
      boardChanged();
      return now;
    });
  loading.set(id, done);
  return done;
}

/** Follow a proposal through the feed's events. */
export function proposalEvent(ev) {
  switch (ev.event) {
    case "proposal":
      mergeProposal(ev, "server");
      break;
    case "proposal-approved": {
      const p = st.proposals.get(ev.id);
      if (p && p.status === "pending") {
        p.status = "approved";
        p.approvedBy = ev.participant;
      }
      break;
    }
    case "proposal-result":
      settle(
        ev.id,
        "done",
        ev.ok === false
          ? { ok: false, text: `${ev.participant} failed: ${ev.error || ev.result}` }
          : { ok: true, text: `${ev.participant} answered: ${ev.result}` },
      );
      break;
    case "proposal-rejected":
      settle(ev.id, "rejected", { ok: false, text: `rejected by ${ev.participant}${ev.reason ? ": " + ev.reason : ""}` });
      break;
    case "proposal-withdrawn":
      settle(ev.id, "withdrawn", { ok: false, text: `withdrawn by ${ev.participant}${ev.reason ? " (" + ev.reason + ")" : ""}` });
      break;
    default:
      return;
  }
  boardChanged();
}

export function ordered() {
  const all = [...st.proposals.values()];
  const open = all.filter((p) => !p.settledAt).sort((a, b) => String(a.id).localeCompare(String(b.id)));
  const done = all.filter((p) => p.settledAt).sort((a, b) => b.settledAt - a.settledAt);
  return [...open, ...done];
}

export function nextPending(after) {
  const list = ordered().filter((p) => p.status === "pending" && p.id !== after);
  const later = list.find((p) => String(p.id) > String(after));
  return (later || list[0] || {}).id || null;
}
