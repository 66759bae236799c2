// Who is looking (GET /dashboard/session) and the live state of the space over server-sent
// events (GET /dashboard/events): snapshot, activity and state events.

import { $ } from "../common/dom.js";
import { load, store, takeTokenFromUrl } from "../common/store.js";
import { addEvent, renderFilterOptions, resetFeed } from "./feed.js";
import { renderChannels, renderFloor, renderParticipants, tick } from "./panels.js";
import { boardChanged, mergeProposal } from "./board.js";
import { consoleOpen } from "./console.js";
import { CONSOLE_ID_KEY, TOKEN_KEY, authHeaders, params, query, setConn, showNotice, st } from "./state.js";

/** The token: from the address (then kept, and taken out of the address bar), else stored. */
export function initToken() {
  const fromUrl = takeTokenFromUrl(params);
  if (fromUrl) {
    store(TOKEN_KEY, fromUrl);
    st.token = fromUrl;
  } else {
    st.token = load(TOKEN_KEY);
  }
}

function closeStream() {
  if (st.es) {
    st.es.close();
    st.es = null;
  }
  if (st.retry) {
    clearTimeout(st.retry);
    st.retry = null;
  }
}

function clearState() {
  st.participants = new Map();
  st.channels = [];
  st.floor = [];
  for (const [id, p] of st.proposals) if (!p.sources.has("console")) st.proposals.delete(id);
  resetFeed([]);
  renderChannels();
  renderFloor();
  renderFilterOptions();
}

/** Ask who the token is, then watch the space (or offer the console only). */
export async function start() {
  closeStream();
  clearState(); // a new token may see another space, or nothing
  setConn("connecting", "connecting…");
  let resp;
  try {
    resp = await fetch("/dashboard/session" + query(false), {
      headers: authHeaders(),
      cache: "no-store",
    });
  } catch (e) {
    setConn("error", "offline");
    showNotice("Cannot reach the gateway; retrying…");
    st.retry = setTimeout(start, 3000);
    return;
  }
  const body = await resp.json().catch(() => ({}));
  if (!resp.ok) {
    st.viewer = null;
    setConn("error", resp.status === 401 ? "token needed" : "refused");
    showNotice(body.message || `the gateway answered HTTP ${resp.status}`);
    renderViewer();
    $("token-input").focus();
    return;
  }
  st.viewer = body;
  st.space = body.space;
  showNotice(null);
  renderViewer();
  if (body.can_observe) {
    openStream();
  } else {
    setConn("idle", "console only");
    showNotice(
      `Your token (role ${body.role}) can use the operator console; watching the space ` +
        "needs an observer or admin token.",
      "info",
    );
  }
}

function openStream() {
  const es = new EventSource("/dashboard/events" + query(true));
  st.es = es;
  es.addEventListener("snapshot", (e) => {
    const data = JSON.parse(e.data);
    applyState(data);
    resetFeed(data.recent || []);
    setConn("live", "live");
  });
  es.addEventListener("state", (e) => applyState(JSON.parse(e.data)));
  es.addEventListener("activity", (e) => addEvent(JSON.parse(e.data)));
  es.addEventListener("error", () => {
    if (es !== st.es) return;
    if (es.readyState === EventSource.CLOSED) {
      setConn("error", "disconnected");
      st.retry = setTimeout(start, 3000); // asks the session again: a clear message if refused
    } else {
      setConn("connecting", "reconnecting…");
    }
  });
}

export function renderViewer() {
  const v = st.viewer;
  $("space").textContent = v ? `space ${v.space}` : "";
  $("who").textContent = !v ? "" : v.open ? "open mode" : `${v.id} · ${v.role}`;
  const canConsole = !!(v && v.can_console);
  $("console-connect").hidden = !canConsole || consoleOpen();
  $("console-unavailable").hidden = canConsole || !v;
  const idInput = $("console-id");
  if (v && !v.open) {
    idInput.value = v.id || "";
    idInput.disabled = true;
  } else {
    idInput.disabled = false;
    idInput.value = load(CONSOLE_ID_KEY) || idInput.value || "operator";
  }
  renderParticipants();
  boardChanged();
}

function applyState(data) {
  st.skew = (data.now || Date.now()) - Date.now();
  st.participants = new Map((data.participants || []).map((p) => [p.id, p]));
  st.channels = data.channels || [];
  st.floor = data.floor || [];
  if (data.proposals) {
    // the snapshot lists the open proposals; a state push does not (they change only through
    // the feed's proposal events, which board.js follows)
    const known = new Set();
    for (const p of data.proposals) {
      known.add(p.id);
      mergeProposal(p, "server");
    }
    for (const [id, p] of st.proposals) {
      const open = p.status === "pending" || p.status === "approved";
      if (open && !known.has(id) && !p.sources.has("console")) st.proposals.delete(id); // settled meanwhile
    }
  }
  renderParticipants();
  renderChannels();
  renderFloor();
  boardChanged();
  renderFilterOptions();
  tick();
}
