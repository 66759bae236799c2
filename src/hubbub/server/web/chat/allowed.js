// What the signed-in person may do, decided by its capabilities as the gateway decides it
// (../common/capabilities.js, the page's port of the one matcher). The capabilities come in
// the welcome and again in every presence summary of the person — the gateway sends one to
// everyone after a grant or revoke — so the page offers what is allowed now, without a reload.
// An answer the page cannot give (a /regex/ pattern decides it) offers the action: the gateway
// decides, and its refusal is shown where it happened.

import { Capabilities } from "../common/capabilities.js";
import { bus, chat } from "./state.js";

let current = null; // the capabilities as JSON, to tell a change from a repeat

/** The person's capabilities are `list` now (a "caps" event when they changed). */
export function setCapabilities(list) {
  if (!Array.isArray(list)) return;
  const text = JSON.stringify(list);
  if (text === current) return;
  current = text;
  chat.caps = new Capabilities(list);
  bus.emit("caps");
}

/** Whether the person may send `kind` with `payload` (yes unless its capabilities say no). */
export function may(kind, payload) {
  return !chat.caps || chat.caps.allows(kind, payload) !== false;
}

/** Whether some envelope of `kind` may be allowed (its payload aside). */
export function maySome(kind) {
  return !chat.caps || chat.caps.allowsSome(kind) !== false;
}

/** Why a control is not offered: "your capabilities do not include channel/create". */
export function denied(kind, detail) {
  return `your capabilities do not include ${kind}${detail ? " " + detail : ""}`;
}
