// The sidebar: joined channels with unread counts, the other channels (join, or create one),
// direct messages, and the people of the space — online, asleep (with the wake countdown) or
// offline. On a phone it is a drawer opened from the header.

import { $, el } from "../common/dom.js";
import { span } from "../common/format.js";
import { channelName, createChannel, joinChannel, listChannels, openConversation } from "./actions.js";
import { denied, may, maySome } from "./allowed.js";
import { bus, chat, convTitle, dmKey, serverNow } from "./state.js";

const RANK = { online: 0, busy: 1, listening: 1, away: 2, sleeping: 3, offline: 4 };

function badge(conv) {
  if (!conv.unread) return null;
  const label = conv.mentions ? `${conv.unread} unread, ${conv.mentions} mentioning you` : `${conv.unread} unread`;
  return el("span", { class: "unread" + (conv.mentions ? " mention" : ""), title: label }, el("span", { "aria-hidden": "true" }, String(conv.unread)), el("span", { class: "sr-only" }, label));
}

function convButton(conv, label) {
  return el(
    "li",
    {},
    el(
      "button",
      {
        type: "button",
        class: "conv" + (conv.unread ? " has-unread" : ""),
        dataset: { conv: conv.key },
        "aria-current": chat.current === conv.key ? "page" : null,
        onclick: () => {
          openConversation(conv.key);
          closeNav();
          $("composer-input").focus();
        },
      },
      el("span", { class: "label" }, label),
      badge(conv),
    ),
  );
}

function renderConversations() {
  const channels = [...chat.convs.values()].filter((c) => c.kind === "channel" && c.joined).sort((a, b) => a.key.localeCompare(b.key));
  $("channel-list").replaceChildren(...channels.map((c) => convButton(c, c.key)));
  const dms = [...chat.convs.values()].filter((c) => c.kind === "dm" && (c.items.size || c.key === chat.current)).sort((a, b) => a.key.localeCompare(b.key));
  $("dm-list").replaceChildren(...dms.map((c) => convButton(c, convTitle(c.key))));
  $("dm-empty").hidden = dms.length > 0;
  const joined = new Set(channels.map((c) => c.key));
  const others = [...chat.channelsKnown.keys()].filter((n) => !joined.has(n)).sort();
  $("other-channels").replaceChildren(...others.map(otherChannel));
  let total = 0;
  for (const c of chat.convs.values()) total += c.unread;
  document.title = total ? `(${total}) hubbub chat` : "hubbub chat";
  $("nav-toggle").dataset.unread = total ? String(total) : "";
}

/** A channel I am not in: Join, or why I may not. */
function otherChannel(name) {
  const action = may("channel/join", { channel: name })
    ? el("button", { type: "button", class: "small join", dataset: { channel: name }, onclick: () => joinChannel(name) }, "Join")
    : el(
        "span",
        { class: "denied", dataset: { channel: name }, title: denied("channel/join", "for " + name) },
        "you may not join",
        el("span", { class: "sr-only" }, `: ${denied("channel/join", "for " + name)}`),
      );
  const known = chat.channelsKnown.get(name);
  const label = known && known.private ? `${name} (private)` : name;
  return el("li", {}, el("span", { class: "label" }, label), " ", action);
}

/** The create form, as the capabilities allow: not shown without channel/create; the Create
 * button disabled for a name they do not allow (each saying why). */
function renderCreate() {
  const typed = $("create-input").value.trim();
  const name = typed ? channelName(typed) : null;
  const some = maySome("channel/create");
  const why = !some
    ? `You cannot create channels: ${denied("channel/create")}.`
    : name && !may("channel/create", { channel: name })
      ? `You cannot create ${name}: ${denied("channel/create", "for " + name)}.`
      : "";
  $("create-form").hidden = !some;
  const note = $("create-denied");
  note.hidden = !why;
  note.textContent = why;
  const button = $("create-btn");
  button.disabled = !!why;
  if (why) {
    button.title = why;
    button.setAttribute("aria-describedby", "create-denied");
  } else {
    button.removeAttribute("title");
    button.removeAttribute("aria-describedby");
  }
}

function presenceText(p) {
  if (p.presence === "sleeping") {
    return p.wakeAt ? el("span", { class: "countdown", dataset: { wakeAt: String(p.wakeAt) } }, wakeText(p.wakeAt)) : "asleep";
  }
  return p.presence;
}

function wakeText(wakeAt) {
  const left = wakeAt - serverNow();
  return left > 0 ? `asleep · wakes in ${span(left)}` : "asleep · waking…";
}

function renderPeople() {
  const people = [...chat.people.values()].sort(
    (a, b) => (RANK[a.presence] ?? 5) - (RANK[b.presence] ?? 5) || a.id.localeCompare(b.id),
  );
  const online = people.filter((p) => p.online).length;
  $("people-count").textContent = people.length ? `${online} online` : "";
  $("people").replaceChildren(
    ...people.map((p) =>
      el(
        "li",
        { class: "person", dataset: { pid: p.id, presence: p.presence } },
        el("span", { class: "dot", "aria-hidden": "true" }),
        p.id === chat.me
          ? el("span", { class: "name" }, `${p.id} (you)`)
          : el(
              "button",
              {
                type: "button",
                class: "link name",
                title: `Write to ${p.id} privately`,
                onclick: () => {
                  openConversation(dmKey([p.id]));
                  closeNav();
                  $("composer-input").focus();
                },
              },
              p.id,
            ),
        p.kind && p.kind !== "human" ? el("span", { class: "badge" }, p.kind) : null,
        el("span", { class: "presence" }, presenceText(p)),
      ),
    ),
  );
}

/** Tick the wake countdowns in the page (the wake time comes from the gateway). */
export function tickCountdowns() {
  for (const node of document.querySelectorAll("#people .countdown")) node.textContent = wakeText(Number(node.dataset.wakeAt));
}

function closeNav() {
  document.body.classList.remove("nav-open");
  $("nav-toggle").setAttribute("aria-expanded", "false");
}

export function initSidebar() {
  bus.on("conv-list", renderConversations);
  bus.on("current", renderConversations);
  bus.on("people", renderPeople);
  bus.on("caps", () => {
    renderConversations();
    renderCreate();
  });
  $("create-input").addEventListener("input", renderCreate);
  $("nav-toggle").addEventListener("click", () => {
    const open = document.body.classList.toggle("nav-open");
    $("nav-toggle").setAttribute("aria-expanded", String(open));
    if (open) {
      const first = $("sidebar").querySelector("button.conv") || $("nav-close");
      if (first) first.focus();
    }
  });
  document.addEventListener("keydown", (e) => {
    if (e.key === "Escape" && document.body.classList.contains("nav-open")) {
      closeNav();
      $("nav-toggle").focus();
    }
  });
  $("conversation").addEventListener("click", () => {
    if (document.body.classList.contains("nav-open")) closeNav(); // a tap beside the drawer
  });
  $("nav-close").addEventListener("click", () => {
    closeNav();
    $("nav-toggle").focus();
  });
  $("browse").addEventListener("toggle", () => {
    if ($("browse").open) listChannels();
  });
  $("create-form").addEventListener("submit", (e) => {
    e.preventDefault();
    const name = $("create-input").value.trim();
    if (!name || $("create-btn").disabled) return;
    createChannel(name, $("create-private").checked);
    $("create-input").value = "";
    $("create-private").checked = false;
    renderCreate();
  });
}
