// The message box: Enter sends (Shift+Enter is a new line), and typing @ offers the people to
// mention — ↑/↓ choose, Enter or Tab takes one, Esc closes the list.

import { $, el } from "../common/dom.js";
import { send } from "./actions.js";
import { bus, chat } from "./state.js";

const MAX_SUGGESTIONS = 8;
const MAX_ROWS = 8;
const AT = /(^|[^\w.-])@([A-Za-z0-9_.-]{0,32})$/;

const box = () => $("composer-input");
const list = () => $("mentions");
let choices = [];
let active = 0;
let start = -1; // where the @ being completed is

function candidates(prefix) {
  const conv = chat.current ? chat.convs.get(chat.current) : null;
  const here = conv ? conv.members : new Set();
  const lower = prefix.toLowerCase();
  return [...chat.people.values()]
    .filter((p) => p.id !== chat.me && p.id.toLowerCase().startsWith(lower))
    .sort((a, b) => Number(here.has(b.id)) - Number(here.has(a.id)) || Number(b.online) - Number(a.online) || a.id.localeCompare(b.id))
    .slice(0, MAX_SUGGESTIONS);
}

function close() {
  choices = [];
  start = -1;
  list().hidden = true;
  list().replaceChildren();
  box().setAttribute("aria-expanded", "false");
  box().removeAttribute("aria-activedescendant");
}

function render() {
  list().replaceChildren(
    ...choices.map((p, i) =>
      el(
        "li",
        {
          id: `mention-${i}`,
          role: "option",
          "aria-selected": String(i === active),
          dataset: { pid: p.id },
          onmousedown: (e) => {
            e.preventDefault(); // keep the focus in the message box
            take(i);
          },
        },
        el("span", { class: "name" }, "@" + p.id),
        p.kind && p.kind !== "human" ? el("span", { class: "badge" }, p.kind) : null,
        el("span", { class: "presence" }, p.presence),
      ),
    ),
  );
  list().hidden = false;
  box().setAttribute("aria-expanded", "true");
  box().setAttribute("aria-activedescendant", `mention-${active}`);
}

function suggest() {
  const input = box();
  const before = input.value.slice(0, input.selectionStart);
  const m = AT.exec(before);
  if (!m || input.selectionStart !== input.selectionEnd) return close();
  choices = candidates(m[2]);
  if (!choices.length || (choices.length === 1 && choices[0].id === m[2])) return close(); // typed in full
  start = before.length - m[2].length - 1;
  active = Math.min(active, choices.length - 1);
  render();
}

function take(i) {
  const p = choices[i];
  if (!p) return;
  const input = box();
  const end = input.selectionStart;
  const text = `@${p.id} `;
  input.value = input.value.slice(0, start) + text + input.value.slice(end);
  const caret = start + text.length;
  input.setSelectionRange(caret, caret);
  close();
  grow();
  input.focus();
}

function grow() {
  const input = box();
  input.style.height = "auto";
  const line = parseFloat(getComputedStyle(input).lineHeight) || 20;
  input.style.height = Math.min(input.scrollHeight, line * MAX_ROWS + 16) + "px";
}

function submit() {
  const conv = chat.current ? chat.convs.get(chat.current) : null;
  const text = box().value;
  if (!conv || !text.trim() || !chat.session) return;
  if (conv.kind === "channel" && !conv.joined) return;
  send(conv, text.replace(/\s+$/, ""));
  box().value = "";
  close();
  grow();
}

export function initComposer() {
  const input = box();
  input.addEventListener("input", () => {
    active = 0;
    suggest();
    grow();
  });
  input.addEventListener("click", suggest);
  input.addEventListener("blur", () => setTimeout(close, 100));
  input.addEventListener("keydown", (e) => {
    if (e.isComposing) return;
    if (choices.length) {
      if (e.key === "ArrowDown" || e.key === "ArrowUp") {
        e.preventDefault();
        active = (active + (e.key === "ArrowDown" ? 1 : choices.length - 1)) % choices.length;
        render();
        return;
      }
      if (e.key === "Enter" || e.key === "Tab") {
        e.preventDefault();
        take(active);
        return;
      }
      if (e.key === "Escape") {
        e.preventDefault();
        close();
        return;
      }
    }
    if (e.key === "Enter" && !e.shiftKey) {
      e.preventDefault();
      submit();
    }
  });
  $("composer").addEventListener("submit", (e) => {
    e.preventDefault();
    submit();
  });
  bus.on("current", close);
}
