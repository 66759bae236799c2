// DOM helpers shared by the pages. Everything a participant or the gateway sends is put in
// the page as text (text nodes and attribute values), never parsed as HTML.

export const $ = (id) => document.getElementById(id);

/** An element with attributes (`on…` ones become listeners) and children (strings become text). */
export function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "dataset") Object.assign(node.dataset, value);
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

/** Show `text` in the alert box `box` (hidden when `text` is empty); `kind` "info" is calmer. */
export function notice(box, text, kind) {
  if (!text) {
    box.hidden = true;
    box.textContent = "";
    return;
  }
  box.hidden = false;
  box.className = kind === "info" ? "info" : "";
  box.textContent = text;
}
