// Initials avatars: a participant's initials on a colour of its own (one of eight, from its
// id), the same everywhere the page shows it.

import { el } from "../common/dom.js";

const HUES = 8;

/** The initials of an id: the first letters of its first two parts (`bob.smith` → `BS`), else
 * its first letter (`maths` → `M`). */
export function initials(id) {
  const parts = String(id || "?").split(/[._\-\s]+/).filter(Boolean);
  const letters = parts.length > 1 ? parts[0][0] + parts[1][0] : (parts[0] || "?")[0];
  return letters.toUpperCase();
}

function hue(id) {
  let h = 0;
  for (const ch of String(id)) h = (h * 31 + ch.codePointAt(0)) >>> 0;
  return h % HUES;
}

/** The avatar of `id` (decorative: the name is written next to it). */
export function avatar(id, kind) {
  return el(
    "span",
    { class: `avatar hue-${hue(id)}${kind && kind !== "human" ? " bot" : ""}`, "aria-hidden": "true", title: id },
    initials(id),
  );
}
