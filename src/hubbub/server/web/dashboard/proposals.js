// The proposal board's view: the list of proposals (data in board.js), and approving or
// rejecting one through the operator console.

import { $, el } from "../common/dom.js";
import { json, short } from "../common/format.js";
import { approveEnvelope, proposalWhat, rejectEnvelope } from "../common/proposals.js";
import { board, loadPayload, nextPending, ordered, settle } from "./board.js";
import { consoleLine, consoleReady, consoleSend, cs, whenConsoleReady } from "./console.js";
import { showNotice, st } from "./state.js";

function reasonInput() {
  // one input for the reason, kept across re-renders: its text and caret survive updates
  if (!st.reasonInput) {
    st.reasonInput = el("input", {
      class: "reason",
      placeholder: "reason — Enter rejects, Esc cancels",
      "aria-label": "reason for rejecting",
    });
  }
  return st.reasonInput;
}

function proposalsSignature() {
  const parts = [mayAct(), st.selected, st.rejecting];
  for (const p of st.proposals.values()) {
    parts.push(p.id, p.status, p.queued || "", p.approvedBy || "", p.outcome ? p.outcome.text : "", !!p.payload);
  }
  return JSON.stringify(parts);
}

/** Draw the list whenever the board changes. */
export function initProposals() {
  board.on("changed", renderProposals);
}

export function renderProposals() {
  const signature = proposalsSignature();
  if (signature === st.proposalsSignature) return; // nothing changed: leave the focus alone
  st.proposalsSignature = signature;
  const list = $("proposals");
  const panel = $("proposals-panel");
  const hadFocus = panel.contains(document.activeElement) ? document.activeElement : null;
  const focusedId = hadFocus && hadFocus.closest(".proposal") ? hadFocus.closest(".proposal").dataset.id : null;
  const reasonFocused = hadFocus && hadFocus === st.reasonInput;
  const caret = reasonFocused ? [hadFocus.selectionStart, hadFocus.selectionEnd] : null;
  const items = ordered();
  const open = items.filter((p) => !p.settledAt);
  const settled = items.filter((p) => p.settledAt);
  const pending = open.filter((p) => p.status === "pending").length;
  $("proposals-count").textContent = pending ? String(pending) : "";
  $("proposals-empty").hidden = open.length > 0;
  const may = mayAct();
  list.replaceChildren(...open.map((p) => proposalItem(p, may)));
  // settled, rejected and withdrawn ones fold away below, newest first
  $("proposals-done").hidden = settled.length === 0;
  $("proposals-done-count").textContent = settled.length ? String(settled.length) : "";
  $("proposals-settled").replaceChildren(...settled.map((p) => proposalItem(p, may)));
  if (reasonFocused && st.reasonInput.isConnected) {
    st.reasonInput.focus({ preventScroll: true });
    st.reasonInput.setSelectionRange(caret[0], caret[1]);
  } else if (focusedId) {
    const again = panel.querySelector(`.proposal[data-id="${CSS.escape(focusedId)}"]`);
    if (again) again.focus({ preventScroll: true });
  }
}

/** Whether this viewer can approve and reject (through the console, connected on demand). */
function mayAct() {
  return !!(st.viewer && st.viewer.can_console);
}

function proposalItem(p, may) {
  const open = p.status === "pending";
  const buttons = el("div", { class: "buttons" });
  if (open) {
    const why = may ? null : "approving needs the operator console: a human participant's token (or open mode)";
    const busy = !may || !!p.queued;
    buttons.append(
      el("button", { type: "button", class: "approve", disabled: busy, title: why || "approve (a)", onclick: (e) => { e.stopPropagation(); approve(p.id); } }, "Approve"),
      el("button", { type: "button", class: "danger reject", disabled: busy, title: why || "reject (r)", onclick: (e) => { e.stopPropagation(); startReject(p.id); } }, "Reject"),
    );
    if (p.queued) buttons.append(el("span", { class: "hint" }, `connecting the console to ${p.queued}…`));
    if (st.rejecting === p.id) {
      const form = el(
        "form",
        {
          class: "reject-form",
          onsubmit: (e) => {
            e.preventDefault();
            confirmReject(p.id, reasonInput().value);
          },
        },
        reasonInput(),
      );
      buttons.append(form);
    }
  }
  const meta = [`from ${p.participant}`, `to ${(p.to || []).join(", ") || "?"}`];
  if (p.channel) meta.push(p.channel);
  if (p.approvedBy && p.status === "approved") meta.push(`approved by ${p.approvedBy}`);
  return el(
    "li",
    {
      class: "proposal",
      tabindex: "0",
      "aria-selected": String(st.selected === p.id),
      dataset: { id: p.id, status: p.status },
      onclick: () => select(p.id, false),
      onfocus: () => select(p.id, false),
    },
    el("div", { class: "what" }, p.tool ? `${p.method} ${p.tool}` : p.method || "?"),
    p.arguments !== undefined && p.arguments !== null
      ? el("code", { class: "args" }, json(p.arguments))
      : p.args_preview
        ? el("code", { class: "args preview", title: "open the proposal to load all of it" }, p.args_preview)
        : null,
    el("div", { class: "meta" }, meta.join(" · ")),
    buttons.childNodes.length ? buttons : null,
    p.outcome ? el("div", { class: "outcome " + (p.outcome.ok ? "ok" : "bad") }, p.outcome.text) : null,
  );
}

export function select(id, focus) {
  if (!id) return;
  const p = st.proposals.get(id);
  if (p && !p.payload && p.payload_omitted) loadPayload(id); // opened: load all of it
  if (st.selected !== id) {
    st.selected = id;
    for (const node of document.querySelectorAll("#proposals-panel .proposal")) {
      node.setAttribute("aria-selected", String(node.dataset.id === id));
    }
  }
  if (focus) {
    const node = document.querySelector(`#proposals-panel .proposal[data-id="${CSS.escape(id)}"]`);
    if (node) node.focus();
  }
}

/** Select the next (1) or previous (-1) proposal. */
export function move(delta) {
  const items = ordered().filter((p) => !p.settledAt); // the settled ones are folded away
  if (!items.length) return;
  const at = items.findIndex((p) => p.id === st.selected);
  const next = items[Math.min(items.length - 1, Math.max(0, at < 0 ? 0 : at + delta))];
  select(next.id, true);
}

export function approve(id) {
  const p = st.proposals.get(id);
  if (!p || p.status !== "pending" || p.queued) return;
  if (!p.payload) {
    // a large proposal: its payload is loaded first (the feed leaves it out)
    loadPayload(id).then((loaded) => {
      if (loaded) approve(id);
      else showNotice(`Proposal ${short(id)} could not be loaded from the gateway; try again.`);
    });
    return;
  }
  if (!p.to || !p.to.length) {
    showNotice(`Proposal ${short(id)} names no target, so it cannot be fulfilled.`);
    return;
  }
  onConsole(p, "approve", () => sendApprove(p));
}

/** Do `fn` on the console (connecting it if need be), the proposal marked meanwhile. */
function onConsole(p, verb, fn) {
  const what = `${verb} ${proposalWhat(p)}`;
  if (!consoleReady()) p.queued = what;
  const ok = whenConsoleReady(what, () => {
    p.queued = null;
    if (p.status === "pending") fn();
    else renderProposals();
  });
  if (!ok) p.queued = null;
  renderProposals();
}

function sendApprove(p) {
  const id = p.id;
  const cid = consoleSend(approveEnvelope(p));
  if (!cid) return;
  cs.actions.set(cid, p.id);
  p.status = "approved";
  p.approvedBy = cs.id;
  p.sources.add("console");
  consoleLine("system", `approved ${proposalWhat(p)} on ${p.to.join(", ")}; waiting for the result…`);
  const next = nextPending(id);
  renderProposals();
  if (next) select(next, true);
}

export function startReject(id) {
  const p = st.proposals.get(id);
  if (!p || p.status !== "pending" || p.queued || !mayAct()) return;
  st.rejecting = id;
  reasonInput().value = "";
  st.selected = id;
  renderProposals();
  const input = document.querySelector(`#proposals .proposal[data-id="${CSS.escape(id)}"] .reason`);
  if (input) input.focus();
}

export function cancelReject() {
  const id = st.rejecting;
  st.rejecting = null;
  renderProposals();
  if (id) select(id, true);
}

function confirmReject(id, reason) {
  const p = st.proposals.get(id);
  st.rejecting = null;
  if (!p || p.status !== "pending") {
    renderProposals();
    return;
  }
  onConsole(p, "reject", () => sendReject(p, reason));
  if (st.selected) select(st.selected, true);
}

function sendReject(p, reason) {
  const id = p.id;
  const env = rejectEnvelope(p, reason);
  const cid = consoleSend(env);
  if (!cid) return;
  cs.actions.set(cid, p.id);
  p.sources.add("console");
  const why = env.payload.reason;
  settle(id, "rejected", { ok: false, text: `rejected by ${cs.id}: ${why}` });
  consoleLine("system", `rejected ${proposalWhat(p)} from ${p.participant}: ${why}`);
  renderProposals();
}
