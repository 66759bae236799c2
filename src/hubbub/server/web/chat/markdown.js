// Safe Markdown for chat messages, built as DOM nodes and never as HTML text: whatever a
// participant writes can only become text, the elements below, and links to http(s) or
// mailto addresses (opened in a new tab with rel="noopener noreferrer"). Raw HTML stays
// text; images become links (nothing is loaded from a message).
//
// Blocks: paragraphs (a single newline is a line break), ``` fenced code ```, > quotes,
// - / * / 1. lists, # headings (shown as bold lines), --- rules.
// Inline: `code`, **bold**, __bold__, *italic*, _italic_, ~~strike~~, [text](url),
// <https://…>, bare https://… links, @mentions, backslash escapes.
//
// Parsing takes time linear in the text (issue 21: a message must not freeze its readers'
// tabs): every regular expression below is anchored or sticky and unambiguous (no two parts
// can match the same characters, so nothing backtracks), and where a span closes (emphasis,
// brackets, parentheses, code) is found by one pass over the text (`Spans`), not by a scan
// from each opener. Nesting is bounded by MAX_DEPTH, each level parsing a part of its parent.

import { mentionAt } from "../common/mentions.js";

const MAX_DEPTH = 4;
const WORD = /[A-Za-z0-9_]/;
const PUNCT = /[!-/:-@[-`{-~]/;
const SAFE_SCHEMES = new Set(["http:", "https:", "mailto:"]);

/** The address of a link if it is one a page may follow (absolute http, https, mailto), else null. */
export function safeUrl(raw) {
  const text = String(raw).trim();
  if (!text || /[\u0000-\u0020\u007f-\u009f]/.test(text)) return null;
  if (!/^(https?:\/\/[^/]|mailto:)/i.test(text)) return null;
  let url;
  try {
    url = new URL(text);
  } catch (e) {
    return null;
  }
  return SAFE_SCHEMES.has(url.protocol) ? url.href : null;
}

function link(href, children) {
  const a = document.createElement("a");
  a.href = href;
  a.target = "_blank";
  a.rel = "noopener noreferrer";
  a.append(...children);
  return a;
}

function wrap(tag, children, cls) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  node.append(...children);
  return node;
}

/** Where the spans of one text close, each kind found in one pass over it (on first use). */
class Spans {
  constructor(text) {
    this.text = text;
    this.closers = new Map(); // delimiter -> ascending indexes where it may close
    this.brackets = null; // index of "[" -> index of its "]"
    this.parens = null; // index of "(" -> index of its ")" on the same line
    this.ticks = null; // run length -> ascending start indexes of backtick runs that long
  }

  /** The first index after `from` where `delim` closes an emphasis, or -1. A backslash escapes
   * the next character; a closer is not preceded by whitespace; for `*` and `_` a doubled
   * delimiter is skipped as a pair (it belongs to something else); `_` is not followed by a
   * word character. */
  closer(delim, from) {
    let list = this.closers.get(delim);
    if (!list) {
      list = [];
      const text = this.text;
      for (let i = 0; i < text.length; i++) {
        if (text[i] === "\\") {
          i++;
          continue;
        }
        if (text.startsWith(delim, i) && i > 0 && !/\s/.test(text[i - 1])) {
          if (delim.length === 1 && text[i + 1] === delim) {
            i++;
            continue;
          }
          if (delim === "_" && WORD.test(text[i + 1] || "")) continue;
          list.push(i);
        }
      }
      this.closers.set(delim, list);
    }
    const at = firstAbove(list, from);
    return at < list.length ? list[at] : -1;
  }

  /** The index of the "]" closing the "[" at `at` (nesting counted), or -1. */
  bracket(at) {
    if (!this.brackets) this.brackets = pairs(this.text, "[", "]", false);
    return this.brackets.get(at) ?? -1;
  }

  /** The index of the ")" closing the "(" at `at` on the same line (nesting counted), or -1. */
  paren(at) {
    if (!this.parens) this.parens = pairs(this.text, "(", ")", true);
    return this.parens.get(at) ?? -1;
  }

  /** The start of the first run of exactly `n` backticks at or after `from`, or -1. */
  ticksAfter(n, from) {
    if (!this.ticks) {
      this.ticks = new Map();
      const text = this.text;
      for (let i = 0; i < text.length; ) {
        if (text[i] !== "`") {
          i++;
          continue;
        }
        let j = i;
        while (text[j] === "`") j++;
        const starts = this.ticks.get(j - i) || [];
        starts.push(i);
        this.ticks.set(j - i, starts);
        i = j;
      }
    }
    const starts = this.ticks.get(n) || [];
    const at = firstAbove(starts, from - 1);
    return at < starts.length ? starts[at] : -1;
  }
}

/** The position in the ascending `list` of its first element greater than `value`. */
function firstAbove(list, value) {
  let lo = 0;
  let hi = list.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (list[mid] > value) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

/** Each `open` of `text` -> the index of the `close` that balances it (one stack, one pass;
 * a backslash escapes the next character; `lineBound`: a newline ends every open pair). */
function pairs(text, open, close, lineBound) {
  const out = new Map();
  const stack = [];
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === "\\") i++;
    else if (c === open) stack.push(i);
    else if (c === close) {
      if (stack.length) out.set(stack.pop(), i);
    } else if (lineBound && c === "\n") stack.length = 0;
  }
  return out;
}

/** `[text](url)` starting at text[at] === "[": {label, url, end} or null. */
function parseLink(text, at, spans) {
  const i = spans.bracket(at);
  if (i < 0 || text[i + 1] !== "(") return null;
  const j = spans.paren(i + 1);
  if (j < 0) return null;
  const label = text.slice(at + 1, i);
  let url = text.slice(i + 2, j).trim().split(/\s+/)[0] || "";
  if (url.startsWith("<") && url.endsWith(">")) url = url.slice(1, -1);
  return { label, url, end: j + 1 };
}

const AUTOLINK = /<((?:https?:\/\/|mailto:)[^\s<>]+)>/iy;
const BARE_URL = /https?:\/\/[^\s<>"'`]+/iy;
const TRAILING = ".,;:!?";

/** A bare URL without the punctuation that ends its sentence, nor a ")" it did not open. */
function trimUrl(raw) {
  let open = 0;
  let close = 0;
  for (const ch of raw) {
    if (ch === "(") open++;
    else if (ch === ")") close++;
  }
  let end = raw.length;
  while (end > 0 && TRAILING.includes(raw[end - 1])) end--;
  while (end > 0 && raw[end - 1] === ")" && open < close) {
    end--;
    close--;
    while (end > 0 && TRAILING.includes(raw[end - 1])) end--;
  }
  return raw.slice(0, end);
}

function inline(text, ctx, depth) {
  const spans = new Spans(text);
  let noUrlBefore = 0; // the end of a bare URL that was not a link (the rest of it is text)
  const out = [];
  let buf = "";
  const flush = () => {
    if (buf) out.push(document.createTextNode(buf));
    buf = "";
  };
  const push = (node) => {
    flush();
    out.push(node);
  };
  let i = 0;
  while (i < text.length) {
    const c = text[i];
    const prev = i > 0 ? text[i - 1] : "";
    if (c === "\\" && i + 1 < text.length && PUNCT.test(text[i + 1])) {
      buf += text[i + 1];
      i += 2;
      continue;
    }
    if (c === "`") {
      let n = 1;
      while (text[i + n] === "`") n++;
      const fence = "`".repeat(n);
      const end = spans.ticksAfter(n, i + n);
      if (end === -1) {
        buf += fence;
        i += n;
        continue;
      }
      let code = text.slice(i + n, end);
      if (code.length > 1 && code.startsWith(" ") && code.endsWith(" ")) code = code.slice(1, -1);
      push(wrap("code", [code]));
      i = end + n;
      continue;
    }
    if ((c === "[" || (c === "!" && text[i + 1] === "[")) && depth < MAX_DEPTH && !ctx.inLink) {
      const image = c === "!";
      const found = parseLink(text, image ? i + 1 : i, spans);
      if (found) {
        const href = safeUrl(found.url);
        if (href === null) {
          buf += text.slice(i, found.end); // shown as written, and inert
        } else if (image) {
          push(link(href, [`image: ${found.label || "(no description)"}`]));
          out[out.length - 1].className = "md-image";
        } else {
          push(link(href, inline(found.label, { ...ctx, inLink: true }, depth + 1)));
        }
        i = found.end;
        continue;
      }
    }
    if (c === "<" && !ctx.inLink) {
      AUTOLINK.lastIndex = i;
      const auto = AUTOLINK.exec(text);
      const href = auto && safeUrl(auto[1]);
      if (href) {
        push(link(href, [auto[1]]));
        i += auto[0].length;
        continue;
      }
    }
    if ((c === "h" || c === "H") && i >= noUrlBefore && !ctx.inLink && !WORD.test(prev) && /^https?:\/\//i.test(text.slice(i, i + 8))) {
      BARE_URL.lastIndex = i;
      const bare = BARE_URL.exec(text);
      const raw = bare ? trimUrl(bare[0]) : "";
      const href = raw && safeUrl(raw);
      if (href) {
        push(link(href, [raw]));
        i += raw.length;
        continue;
      }
      if (bare) noUrlBefore = i + bare[0].length; // not a link: not scanned again from inside
    }
    if ((c === "*" || c === "_" || c === "~") && depth < MAX_DEPTH) {
      const double = text[i + 1] === c;
      const delim = double ? c + c : c;
      const after = text[i + delim.length] || "";
      const opens = after && !/\s/.test(after) && !(c === "_" && WORD.test(prev)) && (c !== "~" || double);
      if (opens) {
        const end = spans.closer(delim, i + delim.length);
        if (end !== -1) {
          const inner = inline(text.slice(i + delim.length, end), ctx, depth + 1);
          push(wrap(c === "~" ? "del" : double ? "strong" : "em", inner));
          i = end + delim.length;
          continue;
        }
      }
    }
    if (c === "@" && ctx.known) {
      const found = mentionAt(text, i, ctx.known);
      if (found) {
        const mine = ctx.me && found.id === ctx.me;
        const span = wrap("span", [text.slice(i, found.end)], mine ? "mention mention-me" : "mention");
        span.dataset.mention = found.id;
        push(span);
        i = found.end;
        continue;
      }
    }
    buf += c;
    i += 1;
  }
  flush();
  return out;
}

function paragraph(lines, ctx) {
  const p = document.createElement("p");
  lines.forEach((line, n) => {
    if (n) p.append(document.createElement("br"));
    p.append(...inline(line, ctx, 0));
  });
  return p;
}

const QUOTE = /^ {0,3}> ?/;
const BULLET = /^ {0,3}([-*+])\s+/;
const NUMBER = /^ {0,3}(\d{1,9})[.)]\s+/;
const FENCE_OPEN = /^ {0,3}(`{3,}|~{3,})/;
const LANG = /^\s*([A-Za-z0-9_+-]{0,20})/;
const HEADING_OPEN = /^ {0,3}(#{1,6})(?=\s)/;

/** A fence line ``` or ~~~ (no backtick after the marker): {marker, lang}, else null. */
function fenceOf(line) {
  const open = FENCE_OPEN.exec(line);
  if (!open) return null;
  const rest = line.slice(open[0].length);
  if (rest.includes("`")) return null;
  return { marker: open[1], lang: LANG.exec(rest)[1] };
}

/** The text of a `# heading` line (closing #s and spaces dropped), else null. */
function headingOf(line) {
  const open = HEADING_OPEN.exec(line);
  if (!open) return null;
  const rest = line.slice(open[0].length).trim();
  let end = rest.length;
  while (end > 0 && rest[end - 1] === "#") end--;
  return rest.slice(0, end).trimEnd();
}

/** Whether a line is a rule: three or more of one of - * _ and nothing else but spaces. */
function isRule(line) {
  let i = 0;
  while (i < 3 && line[i] === " ") i++;
  const mark = line[i];
  if (mark !== "-" && mark !== "*" && mark !== "_") return false;
  let count = 0;
  for (; i < line.length; i++) {
    if (line[i] === mark) count++;
    else if (!/\s/.test(line[i])) return false;
  }
  return count >= 3;
}

function closesFence(line, marker) {
  const t = line.trim();
  return t.length >= marker.length && [...t].every((ch) => ch === marker[0]);
}

function startsBlock(line) {
  return fenceOf(line) !== null || QUOTE.test(line) || BULLET.test(line) || NUMBER.test(line) || headingOf(line) !== null;
}

function blocks(lines, ctx, depth) {
  const out = [];
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    if (!line.trim()) {
      i++;
      continue;
    }
    const fence = fenceOf(line);
    if (fence) {
      const marker = fence.marker;
      const body = [];
      i++;
      while (i < lines.length && !closesFence(lines[i], marker)) {
        body.push(lines[i]);
        i++;
      }
      i++; // the closing fence (or the end)
      const code = wrap("code", [body.join("\n")]);
      if (fence.lang) code.dataset.lang = fence.lang;
      out.push(wrap("pre", [code]));
      continue;
    }
    if (QUOTE.test(line) && depth < MAX_DEPTH) {
      const inner = [];
      while (i < lines.length && QUOTE.test(lines[i])) inner.push(lines[i++].replace(QUOTE, ""));
      out.push(wrap("blockquote", blocks(inner, ctx, depth + 1)));
      continue;
    }
    const bullet = BULLET.test(line);
    if (bullet || NUMBER.test(line)) {
      const pattern = bullet ? BULLET : NUMBER;
      const list = document.createElement(bullet ? "ul" : "ol");
      const first = NUMBER.exec(line);
      if (!bullet && first && first[1] !== "1") list.start = Number(first[1]);
      while (i < lines.length && pattern.test(lines[i])) {
        const item = [lines[i++].replace(pattern, "")];
        while (i < lines.length && /^\s{2,}\S/.test(lines[i]) && !pattern.test(lines[i])) item.push(lines[i++].trim());
        const li = document.createElement("li");
        item.forEach((part, n) => {
          if (n) li.append(document.createElement("br"));
          li.append(...inline(part, ctx, 0));
        });
        list.append(li);
      }
      out.push(list);
      continue;
    }
    const heading = headingOf(line);
    if (heading !== null) {
      const p = wrap("p", [wrap("strong", inline(heading, ctx, 0))], "md-heading");
      out.push(p);
      i++;
      continue;
    }
    if (isRule(line)) {
      out.push(document.createElement("hr"));
      i++;
      continue;
    }
    const para = [line];
    i++;
    while (i < lines.length && lines[i].trim() && !startsBlock(lines[i])) para.push(lines[i++]);
    out.push(paragraph(para, ctx));
  }
  return out;
}

/** `text` as a fragment of safe elements; the mentions of `known` ids (the one mention rule,
 * ../common/mentions.js) are marked, those of `me` (the reader's id) highlighted. */
export function renderMarkdown(text, { me = null, known = null } = {}) {
  const frag = document.createDocumentFragment();
  const lines = String(text).replace(/\r\n?/g, "\n").split("\n");
  frag.append(...blocks(lines, { me, known, inLink: false }, 0));
  return frag;
}
