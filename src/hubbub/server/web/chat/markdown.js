// Safe Markdown for chat messages, built as DOM nodes and never as HTML text: whatever a
// participant writes can only become text, the elements below, and links to http(s) or
// mailto addresses (opened in a new tab with rel="noopener noreferrer"). Raw HTML stays
// text; images become links (nothing is loaded from a message).
//
// Blocks: paragraphs (a single newline is a line break), ``` fenced code ```, > quotes,
// - / * / 1. lists, # headings (shown as bold lines), --- rules.
// Inline: `code`, **bold**, __bold__, *italic*, _italic_, ~~strike~~, [text](url),
// <https://…>, bare https://… links, @mentions, backslash escapes.

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

/** `[text](url)` starting at text[at] === "[": {label, url, end} or null. */
function parseLink(text, at) {
  let depth = 0;
  let i = at;
  for (; i < text.length; i++) {
    const c = text[i];
    if (c === "\\") i++;
    else if (c === "[") depth++;
    else if (c === "]" && --depth === 0) break;
  }
  if (i >= text.length || text[i + 1] !== "(") return null;
  const label = text.slice(at + 1, i);
  let parens = 0;
  let j = i + 1;
  for (; j < text.length; j++) {
    const c = text[j];
    if (c === "\\") j++;
    else if (c === "(") parens++;
    else if (c === ")" && --parens === 0) break;
    else if (c === "\n") return null;
  }
  if (j >= text.length) return null;
  let url = text.slice(i + 2, j).trim().split(/\s+/)[0] || "";
  if (url.startsWith("<") && url.endsWith(">")) url = url.slice(1, -1);
  return { label, url, end: j + 1 };
}

/** The index of the closing `delim` of a span opened at `from`, or -1. */
function closing(text, from, delim) {
  for (let i = from; i < text.length; i++) {
    if (text[i] === "\\") {
      i++;
      continue;
    }
    if (text.startsWith(delim, i) && i > from && !/\s/.test(text[i - 1])) {
      if (delim.length === 1 && text[i + 1] === delim) {
        i++; // `**` inside `*…*` belongs to something else
        continue;
      }
      if (delim === "_" && WORD.test(text[i + 1] || "")) continue;
      return i;
    }
  }
  return -1;
}

function inline(text, ctx, depth) {
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
      let end = text.indexOf(fence, i + n);
      while (end !== -1 && text[end + n] === "`") end = text.indexOf(fence, end + n + 1);
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
      const found = parseLink(text, image ? i + 1 : i);
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
      const auto = /^<((?:https?:\/\/|mailto:)[^\s<>]+)>/i.exec(text.slice(i));
      const href = auto && safeUrl(auto[1]);
      if (href) {
        push(link(href, [auto[1]]));
        i += auto[0].length;
        continue;
      }
    }
    if ((c === "h" || c === "H") && !ctx.inLink && !WORD.test(prev) && /^https?:\/\//i.test(text.slice(i, i + 8))) {
      const bare = /^https?:\/\/[^\s<>"'`]+/i.exec(text.slice(i));
      let raw = bare ? bare[0].replace(/[.,;:!?]+$/, "") : "";
      const count = (ch) => raw.split(ch).length - 1;
      while (raw.endsWith(")") && count("(") < count(")")) raw = raw.slice(0, -1).replace(/[.,;:!?]+$/, "");
      const href = raw && safeUrl(raw);
      if (href) {
        push(link(href, [raw]));
        i += raw.length;
        continue;
      }
    }
    if ((c === "*" || c === "_" || c === "~") && depth < MAX_DEPTH) {
      const double = text[i + 1] === c;
      const delim = double ? c + c : c;
      const after = text[i + delim.length] || "";
      const opens = after && !/\s/.test(after) && !(c === "_" && WORD.test(prev)) && (c !== "~" || double);
      if (opens) {
        const end = closing(text, i + delim.length, delim);
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

const FENCE = /^ {0,3}(`{3,}|~{3,})\s*([A-Za-z0-9_+-]{0,20})[^`]*$/;
const QUOTE = /^ {0,3}> ?/;
const BULLET = /^ {0,3}([-*+])\s+/;
const NUMBER = /^ {0,3}(\d{1,9})[.)]\s+/;
const HEADING = /^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$/;
const RULE = /^ {0,3}([-*_])(\s*\1){2,}\s*$/;

function closesFence(line, marker) {
  const t = line.trim();
  return t.length >= marker.length && [...t].every((ch) => ch === marker[0]);
}

function startsBlock(line) {
  return FENCE.test(line) || QUOTE.test(line) || BULLET.test(line) || NUMBER.test(line) || HEADING.test(line);
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
    const fence = FENCE.exec(line);
    if (fence) {
      const marker = fence[1];
      const body = [];
      i++;
      while (i < lines.length && !closesFence(lines[i], marker)) {
        body.push(lines[i]);
        i++;
      }
      i++; // the closing fence (or the end)
      const code = wrap("code", [body.join("\n")]);
      if (fence[2]) code.dataset.lang = fence[2];
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
    const heading = HEADING.exec(line);
    if (heading) {
      const p = wrap("p", [wrap("strong", inline(heading[2], ctx, 0))], "md-heading");
      out.push(p);
      i++;
      continue;
    }
    if (RULE.test(line)) {
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
