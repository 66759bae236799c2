// The state panels: participants (presence, sleep countdowns, callbacks, floor held, the kill
// switch buttons), channels with their members, and who holds the floor.

import { $, el } from "../common/dom.js";
import { clock, plural, short, span } from "../common/format.js";
import { adminAction } from "./admin.js";
import { serverNow, st } from "./state.js";

const PRESENCE_RANK = { online: 0, sleeping: 1, away: 2, offline: 3 };

export function renderParticipants() {
  const list = $("participants");
  list.replaceChildren();
  const admin = !!(st.viewer && st.viewer.can_admin);
  const people = [...st.participants.values()].sort(
    (a, b) =>
      (PRESENCE_RANK[a.presence] ?? 4) - (PRESENCE_RANK[b.presence] ?? 4) || a.id.localeCompare(b.id),
  );
  const online = people.filter((p) => p.online).length;
  $("participants-count").textContent = people.length ? `${online} online / ${people.length}` : "";
  for (const p of people) list.append(participantRow(p, admin));
}

function participantRow(p, admin) {
  const line1 = el(
    "div",
    { class: "line1" },
    el("span", { class: "dot", "aria-hidden": "true" }),
    el("span", { class: "name" }, p.id),
    el("span", { class: "kind" }, p.kind + (p.role && p.role !== "participant" ? ` · ${p.role}` : "")),
    p.sleeping
      ? el("span", { class: "sleeping-badge", title: "sleeping: observation only" }, "sleeping")
      : el("span", { class: "presence" }, p.presence),
    p.banned ? el("span", { class: "banned-badge" }, "banned") : null,
  );
  if (admin) line1.append(adminButtons(p));
  const details = el("div", { class: "details" });
  if (p.sleeping) {
    const s = p.sleeping;
    details.append(
      el("span", { class: "sleep countdown", dataset: { wakeAt: String(s.wake_at) } }, "wakes in …"),
      el("span", { class: "sleep wake-time", title: new Date(s.wake_at).toISOString() }, `at ${clock(s.wake_at)}`),
      el("span", { class: "sleep buffered" }, bufferedText(s)),
    );
  }
  if (p.pending_callbacks) {
    details.append(el("span", { class: "callbacks" }, plural(p.pending_callbacks, "callback") + " pending"));
  }
  for (const c of st.floor.filter((c) => c.holder === p.id)) {
    details.append(
      el(
        "span",
        { class: "floor-held", title: c.msg_id },
        `holds the floor on ${short(c.msg_id)} in ${c.channel} until ${clock(c.expires_at)}`,
      ),
    );
  }
  if (p.channels && p.channels.length) details.append(el("span", { class: "in" }, p.channels.join(" ")));
  return el(
    "li",
    { class: "participant", dataset: { pid: p.id, presence: p.presence, online: String(p.online) } },
    line1,
    details.childNodes.length ? details : null,
  );
}

function adminButtons(p) {
  const actions = el("span", { class: "actions" });
  if (p.online) {
    actions.append(
      el(
        "button",
        {
          class: "small secondary kick",
          type: "button",
          title: `Disconnect ${p.id} (it may reconnect)`,
          onclick: () => adminAction("disconnect", p.id),
        },
        "Disconnect",
      ),
    );
  }
  actions.append(
    p.banned
      ? el("button", { class: "small secondary unban", type: "button", onclick: () => adminAction("unban", p.id) }, "Unban")
      : el(
          "button",
          {
            class: "small danger ban",
            type: "button",
            title: `Disconnect ${p.id} and refuse it until unbanned`,
            onclick: () => adminAction("ban", p.id),
          },
          "Ban",
        ),
  );
  return actions;
}

function bufferedText(s) {
  const dropped = s.dropped ? ` (${s.dropped} oldest dropped)` : "";
  if (s.mode === "drop") return "dropping everything";
  const what = s.mode === "buffer" ? "message" : "DM";
  return `${plural(s.buffered, what)} buffered${dropped}`;
}

export function renderChannels() {
  const list = $("channels");
  list.replaceChildren();
  for (const ch of st.channels) {
    const asleep = new Set(ch.sleeping || []);
    const members = el("div", { class: "members" });
    ch.members.forEach((m, i) => {
      if (i) members.append(", ");
      members.append(asleep.has(m) ? el("span", { class: "asleep", title: "sleeping" }, `${m} (asleep)`) : m);
    });
    if (!ch.members.length) members.append("no members");
    list.append(
      el(
        "li",
        { class: "channel", dataset: { channel: ch.name } },
        el("span", { class: "name" }, ch.name),
        " ",
        el("span", { class: "kind" }, `${plural(ch.members.length, "member")} · ${plural(ch.seq, "message")}`),
        members,
      ),
    );
  }
}

export function renderFloor() {
  const rows = $("floor-rows");
  rows.replaceChildren();
  for (const c of st.floor) {
    rows.append(
      el(
        "tr",
        { dataset: { holder: c.holder, msgId: c.msg_id } },
        el("td", {}, c.holder),
        el("td", { class: "mono", title: c.msg_id }, short(c.msg_id)),
        el("td", {}, c.channel),
        el("td", {}, clock(c.expires_at), " ", el("span", { class: "until", dataset: { until: String(c.expires_at) } })),
      ),
    );
  }
  $("floor-empty").hidden = st.floor.length > 0;
  $("floor").hidden = st.floor.length === 0;
}

/** Tick the countdowns in the page (the data comes from the stream). */
export function tick() {
  const now = serverNow();
  for (const node of document.querySelectorAll(".countdown")) {
    const left = Number(node.dataset.wakeAt) - now;
    node.textContent = left > 0 ? `wakes in ${span(left)}` : "waking…";
  }
  for (const node of document.querySelectorAll(".until")) {
    const left = Number(node.dataset.until) - now;
    node.textContent = left > 0 ? `(${span(left)})` : "";
  }
}
