// The dashboard's keys (when the focus is not in a text field): j/k (or the arrows in the
// list) select a proposal, a approves, r rejects, / jumps to the console's message box.

import { $ } from "../common/dom.js";
import { consoleReady } from "./console.js";
import { approve, cancelReject, move, startReject } from "./proposals.js";
import { st } from "./state.js";

function onKey(e) {
  const target = e.target;
  if (target instanceof HTMLElement && target.classList.contains("reason")) {
    if (e.key === "Escape") {
      e.preventDefault();
      cancelReject();
    }
    return;
  }
  if (e.key === "Escape" && target === $("console-input")) {
    target.blur();
    return;
  }
  const typing =
    target instanceof HTMLInputElement || target instanceof HTMLTextAreaElement || target instanceof HTMLSelectElement;
  if (typing || e.ctrlKey || e.metaKey || e.altKey) return;
  switch (e.key) {
    case "j":
    case "k":
    case "ArrowDown":
    case "ArrowUp": {
      // j/k anywhere; the arrows only while a proposal has the focus (they scroll otherwise)
      const inList = document.activeElement && document.activeElement.closest("#proposals");
      if (e.key.startsWith("Arrow") && !inList) return;
      e.preventDefault();
      move(e.key === "j" || e.key === "ArrowDown" ? 1 : -1);
      break;
    }
    case "a":
      e.preventDefault();
      approve(st.selected);
      break;
    case "r":
      e.preventDefault();
      startReject(st.selected);
      break;
    case "/":
      if (consoleReady()) {
        e.preventDefault();
        $("console-input").focus();
      }
      break;
    default:
      break;
  }
}

export function initKeys() {
  document.addEventListener("keydown", onKey);
}
