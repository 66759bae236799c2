// The line above the message box: who is answering in this conversation ("maths is
// answering host…", with its latest thought) and who yielded the floor to them.

import { $, el } from "../common/dom.js";
import { answeringIn } from "./floor.js";
import { bus, chat } from "./state.js";

function render() {
  const box = $("activity");
  const key = chat.current;
  const rows = [];
  for (const a of key ? answeringIn(key) : []) {
    const asked = a.trigger ? chat.byId.get(a.trigger) : null;
    const whom = asked && asked.from && asked.from !== a.pid ? ` ${asked.from === chat.me ? "you" : asked.from}` : "";
    rows.push(
      el(
        "div",
        { class: "answering", dataset: { pid: a.pid } },
        el("span", { class: "dots", "aria-hidden": "true" }, el("i"), el("i"), el("i")),
        el("strong", {}, a.pid),
        ` is answering${whom}…`,
        a.thought ? el("span", { class: "thought" }, ` — ${a.thought}`) : null,
        a.yielded.length ? el("span", { class: "yielded" }, ` (${a.yielded.join(", ")} yielded)`) : null,
      ),
    );
  }
  box.replaceChildren(...rows);
}

export function initActivity() {
  bus.on("activity", render);
  bus.on("current", render);
}
