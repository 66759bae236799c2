// What a participant may send, answered in the page as the gateway answers it: a port of the
// part of the one capability matcher (src/hubbub/protocol/capabilities.py, rules in
// docs/capabilities.md) that deciding which controls to offer needs — kind patterns and
// payload patterns, globs (`*` within a `/` segment, `**` across, `?` one character), `!`
// negation, lists as one-of, nested objects, typed scalars. tests/webchat/test_capabilities_parity.py
// runs one table of cases through both matchers and requires the same answers.
//
// Globs are matched by the gateway's automaton, not translated to a RegExp: a glob like
// `*a*a*b` against a long value takes time linear in the value (a backtracking RegExp took
// minutes; issue 21).
//
// Answers are three-valued: true (allowed), false (refused), or null (undecided). A `/regex/`
// pattern is never evaluated here — the gateway's regex engine (Python `re` syntax, 5 ms limit)
// is not the browser's — so an answer that depends on one is null, and the page offers the
// action and lets the gateway decide (its refusal is shown where it happened).

/** How a string pattern is read, in this order: `!negation`, `/regex/`, glob, literal. */
export function patternType(pattern) {
  if (pattern.startsWith("!")) return "negation";
  if (pattern.length >= 2 && pattern[0] === "/" && pattern[pattern.length - 1] === "/") return "regex";
  if (pattern.includes("*") || pattern.includes("?")) return "glob";
  return "literal";
}

const globs = new Map(); // glob -> its tokens (bounded: patterns come from other participants)
const GLOBS_KEPT = 256;

/** A glob as tokens, by code point as Python reads it: `**` (a run of stars is one), `*`, `?`,
 * or one literal character (there is no escape). */
function globTokens(glob) {
  let tokens = globs.get(glob);
  if (tokens) return tokens;
  const chars = Array.from(glob);
  tokens = [];
  for (let i = 0; i < chars.length; ) {
    if (chars[i] === "*" && chars[i + 1] === "*") {
      tokens.push("**");
      i += 2;
      while (chars[i] === "*") i += 1;
      continue;
    }
    tokens.push(chars[i]);
    i += 1;
  }
  if (globs.size >= GLOBS_KEPT) globs.clear();
  globs.set(glob, tokens);
  return tokens;
}

/** Whether the whole of `value` matches the glob `tokens`: the gateway's automaton (a set of
 * token positions, advanced once per character: linear in the value, no backtracking).
 * Position `i` active: the first `i` tokens match what was read. A character moves `i` to
 * `i + 1` where token `i` is that character or `?` (not `/`), keeps `i` where it is `**` (or
 * `*`, not on `/`); a wildcard may match nothing (`i` also activates `i + 1`). */
function globMatches(tokens, value) {
  const m = tokens.length;
  const star = (i) => tokens[i] === "*" || tokens[i] === "**";
  let active = new Uint8Array(m + 1);
  let next = new Uint8Array(m + 1);
  let list = [0];
  active[0] = 1;
  if (m && star(0)) {
    active[1] = 1;
    list.push(1);
  }
  for (const ch of value) {
    const nextList = [];
    const add = (i) => {
      if (next[i]) return;
      next[i] = 1;
      nextList.push(i);
      if (i < m && star(i) && !next[i + 1]) {
        next[i + 1] = 1; // stars are never adjacent, so this closure is one step
        nextList.push(i + 1);
      }
    };
    for (const i of list) {
      if (i === m) continue;
      const token = tokens[i];
      if (token === "**" || (token === "*" && ch !== "/")) add(i);
      else if (token === ch || (token === "?" && ch !== "/")) add(i + 1);
    }
    for (const i of list) active[i] = 0;
    [active, next] = [next, active];
    list = nextList;
    if (!list.length) return false;
  }
  return active[m] === 1;
}

function not(answer) {
  return answer === null ? null : !answer;
}

/** Kleene "or": true if any is, else null if any is undecided, else false. */
function any(answers) {
  let undecided = false;
  for (const answer of answers) {
    if (answer === true) return true;
    if (answer === null) undecided = true;
  }
  return undecided ? null : false;
}

/** Kleene "and": false if any is, else null if any is undecided, else true. */
function all(answers) {
  let undecided = false;
  for (const answer of answers) {
    if (answer === false) return false;
    if (answer === null) undecided = true;
  }
  return undecided ? null : true;
}

/** Whether string pattern `pattern` matches the string `value`. */
export function stringMatches(pattern, value) {
  switch (patternType(pattern)) {
    case "negation":
      return not(stringMatches(pattern.slice(1), value));
    case "regex":
      return null;
    case "glob":
      return globMatches(globTokens(pattern), value);
    default:
      return value === pattern;
  }
}

function isObject(value) {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

/** Whether payload pattern value `pattern` matches the JSON value `value`. */
function valueMatches(pattern, value) {
  if (typeof pattern === "string") {
    if (patternType(pattern) === "literal") return value === pattern;
    return typeof value === "string" ? stringMatches(pattern, value) : false;
  }
  if (typeof pattern === "boolean" || typeof pattern === "number") return value === pattern;
  if (pattern === null) return value === null;
  if (Array.isArray(pattern)) return any(pattern.map((item) => valueMatches(item, value)));
  if (isObject(pattern)) return objectMatches(pattern, value);
  return null; // not a pattern the gateway accepts: not ours to decide
}

/** Every key of `pattern` is present in the object `value` and its value matches. */
function objectMatches(pattern, value) {
  if (!isObject(value)) return false;
  return all(
    Object.keys(pattern).map((key) =>
      Object.prototype.hasOwnProperty.call(value, key) ? valueMatches(pattern[key], value[key]) : false,
    ),
  );
}

/** A kind pattern that is a lone "*" is every kind (MEW v0.4; elsewhere "*" is one segment). */
const EVERY_KIND = "*";

function kindMatches(kindPattern, kind) {
  if (kindPattern === EVERY_KIND) return true;
  if (typeof kindPattern === "string" && kindPattern) return stringMatches(kindPattern, kind);
  if (Array.isArray(kindPattern) && kindPattern.length && kindPattern.every((k) => typeof k === "string" && k)) {
    return any(kindPattern.map((k) => (k === EVERY_KIND ? true : stringMatches(k, kind))));
  }
  return null;
}

/** Whether the payload pattern of `cap` constrains nothing (absent, null or `{}`). */
function unconstrained(payloadPattern) {
  return payloadPattern === undefined || payloadPattern === null || (isObject(payloadPattern) && !Object.keys(payloadPattern).length);
}

/** Whether one capability `{kind, payload?}` allows an envelope of `kind` with `payload`. */
export function matches(cap, kind, payload) {
  if (!isObject(cap) || typeof kind !== "string") return typeof kind === "string" ? null : false;
  const kindAnswer = kindMatches(cap.kind, kind);
  if (kindAnswer === false || unconstrained(cap.payload)) return kindAnswer;
  if (!isObject(cap.payload)) return null;
  return all([kindAnswer, objectMatches(cap.payload, isObject(payload) ? payload : {})]);
}

/** A participant's capabilities (the welcome's `you.capabilities`, a presence summary's). */
export class Capabilities {
  constructor(list) {
    this.list = Array.isArray(list) ? list : [];
  }

  /** Whether an envelope of `kind` with `payload` is allowed: true, false, or null (undecided). */
  allows(kind, payload) {
    if (typeof kind !== "string") return false;
    return any(this.list.map((cap) => matches(cap, kind, payload)));
  }

  /** Whether some envelope of `kind` may be allowed (a capability's kind pattern matches it;
   * its payload pattern then decides per envelope). */
  allowsSome(kind) {
    if (typeof kind !== "string") return false;
    return any(this.list.map((cap) => (isObject(cap) ? kindMatches(cap.kind, kind) : null)));
  }
}

/** Whether `envelope` ({kind, payload?}) is allowed by the capability list `list`. */
export function canSend(list, envelope) {
  return new Capabilities(list).allows(envelope && envelope.kind, envelope && envelope.payload);
}
