// How times, durations, counts and ids are written on the pages.

const pad = (n) => String(n).padStart(2, "0");

/** `hh:mm:ss` of a time (Unix ms or ISO text); "?" when it is none. */
export function clock(ms) {
  if (typeof ms !== "number" && typeof ms !== "string") return "?";
  const d = new Date(ms);
  if (isNaN(d.getTime())) return "?";
  return `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

/** `hh:mm` of a time, for message rows. */
export function hhmm(ms) {
  const d = new Date(ms);
  if (isNaN(d.getTime())) return "";
  return `${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

/** A duration in ms as `42s`, `3m 05s` or `2h 10m` (rounded up to the second). */
export function span(ms) {
  const s = Math.max(0, Math.ceil(ms / 1000));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${pad(s % 60)}s`;
  return `${Math.floor(s / 3600)}h ${pad(Math.floor((s % 3600) / 60))}m`;
}

/** The tail of a message id, enough to tell messages apart. */
export const short = (id) => (typeof id === "string" && id.length > 8 ? "…" + id.slice(-6) : String(id));

export const plural = (n, word) => `${n} ${word}${n === 1 ? "" : "s"}`;

/** A value as compact JSON (or its string form when it cannot be). */
export function json(value) {
  try {
    return JSON.stringify(value);
  } catch (e) {
    return String(value);
  }
}
