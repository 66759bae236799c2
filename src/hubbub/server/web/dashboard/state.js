// The dashboard's shared state: who is looking (token, viewer), the space as the event stream
// last described it, and the small helpers every panel uses.

import { $, notice } from "../common/dom.js";

export const params = new URLSearchParams(location.search);
export const TOKEN_KEY = "hubbub.dashboard.token";
export const CONSOLE_ID_KEY = "hubbub.dashboard.console-id";

export const st = {
  token: null,
  space: params.get("space") || null,
  viewer: null,
  skew: 0, // the server's engine clock minus Date.now()
  participants: new Map(),
  channels: [],
  floor: [],
  proposals: new Map(),
  selected: null,
  rejecting: null,
  reasonInput: null,
  proposalsSignature: "",
  feed: [],
  lastEvent: new Map(),
  es: null,
  retry: null,
};

export const serverNow = () => Date.now() + st.skew;

export function showNotice(text, kind) {
  notice($("notice"), text, kind);
}

export function setConn(state, text) {
  const c = $("conn");
  c.dataset.state = state;
  c.textContent = text;
}

export function authHeaders() {
  return st.token ? { Authorization: "Bearer " + st.token } : {};
}

/** The query string of the dashboard's own requests (`?space=`, `?token=` for EventSource). */
export function query(withToken) {
  const q = new URLSearchParams();
  if (st.space && !st.token) q.set("space", st.space);
  if (withToken && st.token) q.set("token", st.token);
  const s = q.toString();
  return s ? "?" + s : "";
}
