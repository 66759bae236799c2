// The mention rule: when a message's text mentions a participant, and whom it addresses. A
// port of hubbub.protocol.mentions (one rule for the gateway, the SDK, `hubbub chat` and the
// pages), held equal to it (and to hubbub.protocol.addressing) by
// tests/webchat/test_mentions_parity.py:
//
// - a mention is `@` followed by a participant's id, or by its display name, compared without
//   regard to case (`@Maths` mentions `maths`);
// - it stands as a word of its own: the `@` does not follow a letter, digit or one of
//   `_ . - @` (`bob@maths.org` mentions nobody), and the name is not continued by a letter,
//   digit, `_` or `-`, nor by `.` and a letter or digit (`@maths.` at the end of a sentence
//   mentions `maths`; `@maths.org` does not);
// - a message *addresses* a participant when its `to` lists it or its text mentions it.
//
// And the addressing rule of hubbub.protocol.addressing (`addressees`): a message is
// addressed to its `to`, to the known participants it mentions by id or by an unambiguous
// display name (not another's id, not shared), and to the author of the message it replies
// to (`correlation_id`); never to its sender.
//
// Python's `\w` is Unicode-aware; JavaScript's is not, so it is spelled `[\p{L}\p{N}_]` here
// (with the `u` flag, which also gives Python's case folding to the `i` flag).

const W = "\\p{L}\\p{N}_";
const BEFORE = `(?<![${W}.@-])@`;
const AFTER = `(?![${W}-]|\\.[${W}])`;

/** An `@id` written in a text (group 1: the id as written; a trailing `.` is punctuation). */
export const MENTION_ID_RE = new RegExp(`${BEFORE}([A-Za-z0-9_.-]{1,32})`, "gu");

const SPECIAL = /[\\^$.*+?()[\]{}|/]/g;
const patterns = new Map();
const PATTERNS_MAX = 4096;

function pattern(name) {
  let re = patterns.get(name);
  if (!re) {
    if (patterns.size >= PATTERNS_MAX) patterns.clear();
    re = new RegExp(BEFORE + name.replace(SPECIAL, "\\$&") + AFTER, "iu");
    patterns.set(name, re);
  }
  return re;
}

/** Whether `text` mentions the participant by `@id` or `@display name`. */
export function mentions(text, participantId, displayName = null) {
  if (typeof text !== "string" || !text.includes("@")) return false;
  for (const name of [participantId, displayName]) {
    if (name && pattern(name).test(text)) return true;
  }
  return false;
}

/** The ids among `known` that `text` mentions, in the order first written, once each (as they
 * are spelled in `known`). */
export function mentionedIds(text, known) {
  if (typeof text !== "string" || !text.includes("@")) return [];
  const byLower = new Map();
  for (const pid of known) byLower.set(pid.toLowerCase(), pid);
  const found = new Set();
  for (const match of text.matchAll(MENTION_ID_RE)) {
    const written = match[1];
    for (const candidate of [written, written.replace(/\.+$/, "")]) {
      const pid = byLower.get(candidate.toLowerCase());
      if (pid !== undefined && mentions(text, pid)) {
        found.add(pid);
        break;
      }
    }
  }
  return [...found];
}

/** Whether a message with this `to` and `text` addresses the participant. */
export function addresses(to, text, participantId, displayName = null) {
  if (Array.isArray(to) && to.includes(participantId)) return true;
  return mentions(text, participantId, displayName);
}

/** The mention that starts at `text[at]` (an `@`) of one of the `known` ids, as
 * `{id, end}` (`id` as spelled in `known`, `end` just after the name), else null: where a
 * renderer marks the mentions `mentionedIds` finds. */
export function mentionAt(text, at, known) {
  if (text[at] !== "@") return null;
  const written = sticky(MENTION_ID_RE.source, "u", at, text);
  if (!written) return null;
  const byLower = new Map();
  for (const pid of known) byLower.set(pid.toLowerCase(), pid);
  for (const candidate of [written[1], written[1].replace(/\.+$/, "")]) {
    const pid = byLower.get(candidate.toLowerCase());
    if (pid !== undefined && sticky(pattern(pid).source, "iu", at, text)) return { id: pid, end: at + 1 + candidate.length };
  }
  return null;
}

function sticky(source, flags, at, text) {
  const re = new RegExp(source, flags + "y");
  re.lastIndex = at;
  return re.exec(text);
}

/** Where `text` first mentions `handle` as `@handle` (the index of its `@`; -1: nowhere). */
export function firstMention(text, handle) {
  if (!handle || typeof text !== "string" || !text.includes("@")) return -1;
  const re = new RegExp(pattern(handle).source, "giu");
  const m = re.exec(text);
  return m ? m.index : -1;
}

/** The display names that address their participant (`{id: name}`): not another
 * participant's id, and no other participant's name (compared without case). */
export function unambiguousNames(names) {
  const ids = new Set(Object.keys(names).map((pid) => pid.toLowerCase()));
  const count = new Map();
  for (const name of Object.values(names)) {
    if (name) count.set(name.toLowerCase(), (count.get(name.toLowerCase()) || 0) + 1);
  }
  const out = {};
  for (const [pid, name] of Object.entries(names)) {
    if (!name || name.toLowerCase() === pid.toLowerCase()) continue;
    if (count.get(name.toLowerCase()) === 1 && !ids.has(name.toLowerCase())) out[pid] = name;
  }
  return out;
}

/** The ids among `names` (`{id: display name or null}`) that `text` mentions by id or by an
 * unambiguous display name, in the order first written, once each. */
export function mentioned(text, names) {
  if (typeof text !== "string" || !text.includes("@")) return [];
  const byId = mentionedIds(text, Object.keys(names));
  const byName = unambiguousNames(names);
  if (!Object.keys(byName).length) return byId;
  const at = new Map(byId.map((pid) => [pid, firstMention(text, pid)]));
  for (const [pid, name] of Object.entries(byName)) {
    const pos = firstMention(text, name);
    if (pos >= 0 && (!at.has(pid) || pos < at.get(pid))) at.set(pid, pos);
  }
  return [...at.keys()].sort((a, b) => at.get(a) - at.get(b));
}

/** Whom a chat message is addressed to: `to`, then the participants its text mentions, then
 * the authors (`authorOf(id)`) of the messages it replies to; once each, never its sender. */
export function addressees(env, names, authorOf = () => null) {
  const sender = env.from || "";
  const text = env.payload && typeof env.payload.text === "string" ? env.payload.text : "";
  const cid = env.correlation_id;
  const replies = Array.isArray(cid) ? cid : typeof cid === "string" ? [cid] : [];
  const found = [
    ...(Array.isArray(env.to) ? env.to : []),
    ...mentioned(text, names),
    ...replies.map((id) => authorOf(id)).filter(Boolean),
  ];
  return [...new Set(found)].filter((pid) => pid !== sender);
}
