"use strict";
// hubbub dashboard: live state over server-sent events, and an operator console over /ws (MEW).
// No build step and no dependencies. Everything from the server is rendered as text.
(() => {
  const $ = (id) => document.getElementById(id);
  const params = new URLSearchParams(location.search);
  const TOKEN_KEY = "hubbub.dashboard.token";
  const CONSOLE_ID_KEY = "hubbub.dashboard.console-id";
  const FEED_MAX = 600;
  const LOG_MAX = 1000;
  const SETTLED_MAX = 20;
  const ID_RE = /^[A-Za-z0-9_.-]{1,32}$/;

  const st = {
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

  // ------------------------------------------------------------------ helpers

  function el(tag, attrs, ...children) {
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

  const pad = (n) => String(n).padStart(2, "0");
  function clock(ms) {
    if (typeof ms !== "number" && typeof ms !== "string") return "?";
    const d = new Date(ms);
    if (isNaN(d.getTime())) return "?";
    return `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
  }
  function span(ms) {
    const s = Math.max(0, Math.ceil(ms / 1000));
    if (s < 60) return `${s}s`;
    if (s < 3600) return `${Math.floor(s / 60)}m ${pad(s % 60)}s`;
    return `${Math.floor(s / 3600)}h ${pad(Math.floor((s % 3600) / 60))}m`;
  }
  const serverNow = () => Date.now() + st.skew;
  const short = (id) => (typeof id === "string" && id.length > 8 ? "…" + id.slice(-6) : String(id));
  const plural = (n, word) => `${n} ${word}${n === 1 ? "" : "s"}`;
  function json(value) {
    try {
      return JSON.stringify(value);
    } catch (e) {
      return String(value);
    }
  }
  function store(key, value) {
    try {
      if (value === null) localStorage.removeItem(key);
      else localStorage.setItem(key, value);
    } catch (e) {
      /* storage may be disabled: the token then lives for this page only */
    }
  }
  function load(key) {
    try {
      return localStorage.getItem(key);
    } catch (e) {
      return null;
    }
  }

  function notice(text, kind) {
    const box = $("notice");
    if (!text) {
      box.hidden = true;
      box.textContent = "";
      return;
    }
    box.hidden = false;
    box.className = kind === "info" ? "info" : "";
    box.textContent = text;
  }
  function setConn(state, text) {
    const c = $("conn");
    c.dataset.state = state;
    c.textContent = text;
  }

  function authHeaders() {
    return st.token ? { Authorization: "Bearer " + st.token } : {};
  }
  function query(withToken) {
    const q = new URLSearchParams();
    if (st.space && !st.token) q.set("space", st.space);
    if (withToken && st.token) q.set("token", st.token);
    const s = q.toString();
    return s ? "?" + s : "";
  }

  // ------------------------------------------------------------------ session and stream

  function initToken() {
    const fromUrl = params.get("token");
    if (fromUrl) {
      store(TOKEN_KEY, fromUrl);
      st.token = fromUrl;
      params.delete("token"); // keep the secret out of the address bar and history
      const rest = params.toString();
      history.replaceState(null, "", location.pathname + (rest ? "?" + rest : "") + location.hash);
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

  async function start() {
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
      notice("Cannot reach the gateway; retrying…");
      st.retry = setTimeout(start, 3000);
      return;
    }
    const body = await resp.json().catch(() => ({}));
    if (!resp.ok) {
      st.viewer = null;
      setConn("error", resp.status === 401 ? "token needed" : "refused");
      notice(body.message || `the gateway answered HTTP ${resp.status}`);
      renderViewer();
      $("token-input").focus();
      return;
    }
    st.viewer = body;
    st.space = body.space;
    notice(null);
    renderViewer();
    if (body.can_observe) {
      openStream();
    } else {
      setConn("idle", "console only");
      notice(
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
      applyState(data, true);
      resetFeed(data.recent || []);
      setConn("live", "live");
    });
    es.addEventListener("state", (e) => applyState(JSON.parse(e.data), false));
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

  function renderViewer() {
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
    renderProposals();
  }

  // ------------------------------------------------------------------ state panels

  function applyState(data, isSnapshot) {
    st.skew = (data.now || Date.now()) - Date.now();
    st.participants = new Map((data.participants || []).map((p) => [p.id, p]));
    st.channels = data.channels || [];
    st.floor = data.floor || [];
    const known = new Set();
    for (const p of data.proposals || []) {
      known.add(p.id);
      mergeProposal(p, "server");
    }
    for (const [id, p] of st.proposals) {
      const open = p.status === "pending" || p.status === "approved";
      if (open && !known.has(id) && !p.sources.has("console")) {
        // settled without us seeing the outcome (or forgotten by the server)
        if (isSnapshot) st.proposals.delete(id);
        else if (p.status === "pending") st.proposals.delete(id);
      }
    }
    renderParticipants();
    renderChannels();
    renderFloor();
    renderProposals();
    renderFilterOptions();
    tick();
  }

  const PRESENCE_RANK = { online: 0, sleeping: 1, away: 2, offline: 3 };

  function renderParticipants() {
    const list = $("participants");
    list.replaceChildren();
    const admin = !!(st.viewer && st.viewer.can_admin);
    const people = [...st.participants.values()].sort(
      (a, b) =>
        (PRESENCE_RANK[a.presence] ?? 4) - (PRESENCE_RANK[b.presence] ?? 4) ||
        a.id.localeCompare(b.id),
    );
    const online = people.filter((p) => p.online).length;
    $("participants-count").textContent = people.length ? `${online} online / ${people.length}` : "";
    for (const p of people) list.append(participantRow(p, admin));
  }

  function participantRow(p, admin) {
    const line1 = el(
      "div",
      { class: "line1" },
      el("span", { class: "dot", "aria-hidden": "true" }),
      el("span", { class: "name" }, p.id),
      el("span", { class: "kind" }, p.kind + (p.role && p.role !== "participant" ? ` · ${p.role}` : "")),
      p.sleeping
        ? el("span", { class: "sleeping-badge", title: "sleeping: observation only" }, "sleeping")
        : el("span", { class: "presence" }, p.presence),
      p.banned ? el("span", { class: "banned-badge" }, "banned") : null,
    );
    if (admin) {
      const actions = el("span", { class: "actions" });
      if (p.online) {
        actions.append(
          el(
            "button",
            {
              class: "small secondary kick",
              type: "button",
              title: `Disconnect ${p.id} (it may reconnect)`,
              onclick: () => adminAction("disconnect", p.id),
            },
            "Disconnect",
          ),
        );
      }
      actions.append(
        p.banned
          ? el(
              "button",
              { class: "small secondary unban", type: "button", onclick: () => adminAction("unban", p.id) },
              "Unban",
            )
          : el(
              "button",
              {
                class: "small danger ban",
                type: "button",
                title: `Disconnect ${p.id} and refuse it until unbanned`,
                onclick: () => adminAction("ban", p.id),
              },
              "Ban",
            ),
      );
      line1.append(actions);
    }
    const details = el("div", { class: "details" });
    if (p.sleeping) {
      const s = p.sleeping;
      details.append(
        el("span", { class: "sleep countdown", dataset: { wakeAt: String(s.wake_at) } }, "wakes in …"),
        el("span", { class: "sleep wake-time", title: new Date(s.wake_at).toISOString() }, `at ${clock(s.wake_at)}`),
        el("span", { class: "sleep buffered" }, bufferedText(s)),
      );
    }
    if (p.pending_callbacks) {
      details.append(el("span", { class: "callbacks" }, plural(p.pending_callbacks, "callback") + " pending"));
    }
    for (const c of st.floor.filter((c) => c.holder === p.id)) {
      details.append(
        el(
          "span",
          { class: "floor-held", title: c.msg_id },
          `holds the floor on ${short(c.msg_id)} in ${c.channel} until ${clock(c.expires_at)}`,
        ),
      );
    }
    if (p.channels && p.channels.length) details.append(el("span", { class: "in" }, p.channels.join(" ")));
    return el(
      "li",
      { class: "participant", dataset: { pid: p.id, presence: p.presence, online: String(p.online) } },
      line1,
      details.childNodes.length ? details : null,
    );
  }

  function bufferedText(s) {
    const dropped = s.dropped ? ` (${s.dropped} oldest dropped)` : "";
    if (s.mode === "drop") return "dropping everything";
    const what = s.mode === "buffer" ? "message" : "DM";
    return `${plural(s.buffered, what)} buffered${dropped}`;
  }

  function renderChannels() {
    const list = $("channels");
    list.replaceChildren();
    for (const ch of st.channels) {
      const asleep = new Set(ch.sleeping || []);
      const members = el("div", { class: "members" });
      ch.members.forEach((m, i) => {
        if (i) members.append(", ");
        members.append(asleep.has(m) ? el("span", { class: "asleep", title: "sleeping" }, `${m} (asleep)`) : m);
      });
      if (!ch.members.length) members.append("no members");
      list.append(
        el(
          "li",
          { class: "channel", dataset: { channel: ch.name } },
          el("span", { class: "name" }, ch.name),
          " ",
          el("span", { class: "kind" }, `${plural(ch.members.length, "member")} · ${plural(ch.seq, "message")}`),
          members,
        ),
      );
    }
  }

  function renderFloor() {
    const rows = $("floor-rows");
    rows.replaceChildren();
    for (const c of st.floor) {
      rows.append(
        el(
          "tr",
          { dataset: { holder: c.holder, msgId: c.msg_id } },
          el("td", {}, c.holder),
          el("td", { class: "mono", title: c.msg_id }, short(c.msg_id)),
          el("td", {}, c.channel),
          el("td", {}, clock(c.expires_at), " ", el("span", { class: "until", dataset: { until: String(c.expires_at) } })),
        ),
      );
    }
    $("floor-empty").hidden = st.floor.length > 0;
    $("floor").hidden = st.floor.length === 0;
  }

  function tick() {
    const now = serverNow();
    for (const node of document.querySelectorAll(".countdown")) {
      const left = Number(node.dataset.wakeAt) - now;
      node.textContent = left > 0 ? `wakes in ${span(left)}` : "waking…";
    }
    for (const node of document.querySelectorAll(".until")) {
      const left = Number(node.dataset.until) - now;
      node.textContent = left > 0 ? `(${span(left)})` : "";
    }
  }
  setInterval(tick, 1000); // the countdowns tick locally; the data comes from the stream

  async function adminAction(action, pid) {
    let resp;
    try {
      resp = await fetch(`/admin/participants/${encodeURIComponent(pid)}/${action}` + query(false), {
        method: "POST",
        // a request a page on another site cannot forge without a CORS preflight (web_guard.py)
        headers: { ...authHeaders(), "Content-Type": "application/json", "X-Hubbub-Request": "1" },
        body: "{}",
      });
    } catch (e) {
      notice(`${action} ${pid}: the gateway cannot be reached`);
      return;
    }
    const body = await resp.json().catch(() => ({}));
    if (!resp.ok) notice(body.message || `${action} ${pid}: HTTP ${resp.status}`);
    else notice(`${pid}: ${action === "disconnect" ? "disconnected" : action + "ned"}`, "info");
  }

  // ------------------------------------------------------------------ activity feed

  function describe(ev) {
    const p = ev.participant;
    const ch = ev.channel;
    const inCh = ch ? ` in ${ch}` : "";
    switch (ev.event) {
      case "message":
        if (ev.kind !== "chat") {
          // reasoning/* and mcp/* traffic: its own check box, off by default
          if (ev.dm) return ["traffic", "dm", `${p} → ${(ev.to || []).join(", ")} (direct ${ev.kind})`];
          return ["traffic", ev.kind, `${p}${inCh}: ${ev.kind}${ev.method ? " " + ev.method : ""}`];
        }
        if (ev.dm) return ["message", "dm", `${p} → ${(ev.to || []).join(", ")} (direct ${ev.kind})`];
        return ["message", "msg", `${ch} ${p}: ${ev.text}`];
      case "connect":
        return ["presence", "online", `${p} connected (${ev.kind})`];
      case "disconnect":
        return ["presence", "offline", `${p} disconnected`];
      case "join":
        return ["presence", "join", `${p} joined ${ch}`];
      case "leave":
        return ["presence", "leave", `${p} left ${ch}`];
      case "presence":
        return ["presence", "presence", `${p} is ${ev.presence}`];
      case "claim":
        return ["floor", "claim", `${p} claims the floor on ${short(ev.msg_id)}${inCh} until ${clock(ev.expires_at)}`];
      case "yield":
        return ["floor", "yield", `${p} yields to ${ev.winner} on ${short(ev.msg_id)}${inCh}`];
      case "claim-released":
        return ["floor", "released", `${p} released the floor on ${short(ev.msg_id)}${inCh} (${ev.reason})`];
      case "callback-scheduled":
        return ["callback", "callback", `${p} scheduled a callback due ${clock(ev.due)}${inCh}`];
      case "callback-fired":
        return ["callback", "fired", `callback of ${p} fired${inCh}`];
      case "callback-dropped":
        return ["callback", "dropped", `callback of ${p} dropped (${ev.reason})`];
      case "sleep":
        return ["sleep", "sleep", `${p} sleeps until ${clock(ev.wake_at)} (${ev.mode} mode)`];
      case "wake": {
        const lost = ev.dropped_oldest ? `, ${ev.dropped_oldest} dropped` : "";
        return ["sleep", "wake", `${p} woke (${ev.reason}): ${plural(ev.buffered, "buffered message")} delivered${lost}`];
      }
      case "sleep-cancelled":
        return ["sleep", "sleep", `${p}'s sleep was cancelled (disconnected)`];
      case "proposal":
        return ["proposal", "proposal", `${p} proposes ${proposalWhat(ev)} on ${(ev.to || []).join(", ")}`];
      case "proposal-approved":
        return ["proposal", "approved", `${p} approved proposal ${short(ev.id)}`];
      case "proposal-result":
        return ev.ok === false
          ? ["proposal", "failed", `${p} failed proposal ${short(ev.id)}: ${ev.error || ev.result}`]
          : ["proposal", "result", `${p} answered proposal ${short(ev.id)}: ${ev.result}`];
      case "proposal-rejected":
        return ["proposal", "rejected", `${p} rejected proposal ${short(ev.id)}${ev.reason ? ": " + ev.reason : ""}`];
      case "proposal-withdrawn":
        return ["proposal", "withdrawn", `${p} withdrew proposal ${short(ev.id)}${ev.reason ? " (" + ev.reason + ")" : ""}`];
      case "error":
        return ["error", "error", `${p}: ${ev.code} — ${ev.message}`];
      case "kick":
        return ["admin", "kick", `${p} was disconnected by ${ev.by || "an admin"}${ev.was === "sleeping" ? " while sleeping" : ""}`];
      case "ban":
        return ["admin", "ban", `${p} was banned by ${ev.by || "an admin"}${ev.disconnected ? " and disconnected" : ""}`];
      case "unban":
        return ["admin", "unban", `${p} was unbanned by ${ev.by || "an admin"}`];
      default:
        return ["other", ev.event, json(ev)];
    }
  }

  function hidden(ev) {
    // the sleep and wake events already say what these presence updates say
    if (ev.event !== "presence") return false;
    if (ev.presence === "sleeping") return true;
    return ev.presence === "online" && st.lastEvent.get(ev.participant) === "wake";
  }

  function matches(ev, group) {
    const chan = $("filter-channel").value;
    const who = $("filter-agent").value;
    if (group === "message" && !$("filter-messages").checked) return false;
    if (group === "presence" && !$("filter-presence").checked) return false;
    if (group === "traffic" && !$("filter-traffic").checked) return false;
    if (chan && ev.channel !== chan && !(ev.channels || []).includes(chan)) return false;
    if (who && ev.participant !== who && ev.winner !== who && !(ev.to || []).includes(who)) return false;
    return true;
  }

  function feedRow(ev) {
    const [group, tag, text] = describe(ev);
    if (!matches(ev, group)) return null;
    return el(
      "li",
      { dataset: { event: ev.event, group, participant: ev.participant || "" } },
      el("time", { datetime: new Date(ev.ts).toISOString() }, clock(ev.ts)),
      el("span", { class: "tag" }, tag),
      el("span", { class: "body" }, text),
    );
  }

  function addEvent(ev) {
    ev.hidden = hidden(ev);
    if (ev.participant) st.lastEvent.set(ev.participant, ev.event);
    st.feed.push(ev);
    if (st.feed.length > FEED_MAX) st.feed.shift();
    proposalEvent(ev);
    if (ev.hidden) return;
    const row = feedRow(ev);
    if (!row) return;
    const feed = $("feed");
    feed.prepend(row);
    while (feed.childElementCount > FEED_MAX) feed.lastElementChild.remove();
  }

  function resetFeed(events) {
    st.feed = [];
    st.lastEvent = new Map();
    $("feed").replaceChildren();
    for (const ev of events) addEvent(ev);
  }

  function refilter() {
    const rows = [];
    for (const ev of st.feed) {
      if (ev.hidden) continue;
      const row = feedRow(ev);
      if (row) rows.push(row);
    }
    rows.reverse();
    $("feed").replaceChildren(...rows);
  }

  function renderFilterOptions() {
    const fill = (select, values) => {
      const current = select.value;
      const want = ["", ...values];
      const have = [...select.options].map((o) => o.value);
      if (have.join("\n") === want.join("\n")) return;
      select.replaceChildren(...want.map((v) => el("option", { value: v }, v || "all")));
      select.value = want.includes(current) ? current : "";
    };
    fill($("filter-channel"), st.channels.map((c) => c.name));
    fill($("filter-agent"), [...st.participants.keys()].sort());
  }

  for (const id of ["filter-channel", "filter-agent", "filter-messages", "filter-presence", "filter-traffic"]) {
    $(id).addEventListener("change", refilter);
  }

  // ------------------------------------------------------------------ proposals

  function proposalWhat(p) {
    const name = p.tool ? `${p.method} ${p.tool}` : p.method || "?";
    return p.arguments === undefined || p.arguments === null ? name : `${name} ${json(p.arguments)}`;
  }

  function fromEnvelope(env) {
    const payload = env.payload || {};
    const params = payload.params && typeof payload.params === "object" ? payload.params : {};
    return {
      id: env.id,
      participant: env.from,
      to: env.to || [],
      channel: env.channel || null,
      method: payload.method,
      tool: typeof params.name === "string" ? params.name : null,
      arguments: params.arguments,
      payload,
      status: "pending",
      ts: env.ts,
    };
  }

  function mergeProposal(p, source) {
    const have = st.proposals.get(p.id);
    if (have) {
      have.sources.add(source);
      if (!have.payload && p.payload) have.payload = p.payload;
      if (have.status === "pending" && p.status === "approved") have.status = "approved";
      return have;
    }
    const entry = { ...p, sources: new Set([source]), outcome: null };
    st.proposals.set(p.id, entry);
    if (!st.selected) st.selected = p.id;
    return entry;
  }

  function settle(id, status, outcome) {
    const p = st.proposals.get(id);
    if (!p) return;
    if (p.status === "done" || p.status === "rejected" || p.status === "withdrawn") {
      if (outcome && !p.outcome) p.outcome = outcome;
      return;
    }
    p.status = status;
    if (outcome) p.outcome = outcome;
    p.settledAt = Date.now();
    if (st.selected === id && status !== "approved") st.selected = nextPending(id);
    const settled = [...st.proposals.values()].filter((q) => q.settledAt).sort((a, b) => b.settledAt - a.settledAt);
    for (const old of settled.slice(SETTLED_MAX)) st.proposals.delete(old.id);
  }

  function proposalEvent(ev) {
    switch (ev.event) {
      case "proposal":
        mergeProposal(ev, "server");
        break;
      case "proposal-approved": {
        const p = st.proposals.get(ev.id);
        if (p && p.status === "pending") {
          p.status = "approved";
          p.approvedBy = ev.participant;
        }
        break;
      }
      case "proposal-result":
        settle(ev.id, "done", ev.ok === false
          ? { ok: false, text: `${ev.participant} failed: ${ev.error || ev.result}` }
          : { ok: true, text: `${ev.participant} answered: ${ev.result}` });
        break;
      case "proposal-rejected":
        settle(ev.id, "rejected", { ok: false, text: `rejected by ${ev.participant}${ev.reason ? ": " + ev.reason : ""}` });
        break;
      case "proposal-withdrawn":
        settle(ev.id, "withdrawn", { ok: false, text: `withdrawn by ${ev.participant}${ev.reason ? " (" + ev.reason + ")" : ""}` });
        break;
      default:
        return;
    }
    renderProposals();
  }

  function ordered() {
    const all = [...st.proposals.values()];
    const open = all.filter((p) => !p.settledAt).sort((a, b) => String(a.id).localeCompare(String(b.id)));
    const done = all.filter((p) => p.settledAt).sort((a, b) => b.settledAt - a.settledAt);
    return [...open, ...done];
  }

  function nextPending(after) {
    const list = ordered().filter((p) => p.status === "pending" && p.id !== after);
    const later = list.find((p) => String(p.id) > String(after));
    return (later || list[0] || {}).id || null;
  }

  function reasonInput() {
    // one input for the reason, kept across re-renders: its text and caret survive updates
    if (!st.reasonInput) {
      st.reasonInput = el("input", {
        class: "reason",
        placeholder: "reason — Enter rejects, Esc cancels",
        "aria-label": "reason for rejecting",
      });
    }
    return st.reasonInput;
  }

  function proposalsSignature() {
    const parts = [consoleReady(), st.selected, st.rejecting];
    for (const p of st.proposals.values()) {
      parts.push(p.id, p.status, p.approvedBy || "", p.outcome ? p.outcome.text : "");
    }
    return JSON.stringify(parts);
  }

  function renderProposals() {
    const signature = proposalsSignature();
    if (signature === st.proposalsSignature) return; // nothing changed: leave the focus alone
    st.proposalsSignature = signature;
    const list = $("proposals");
    const hadFocus = list.contains(document.activeElement) ? document.activeElement : null;
    const focusedId = hadFocus && hadFocus.closest(".proposal") ? hadFocus.closest(".proposal").dataset.id : null;
    const reasonFocused = hadFocus && hadFocus === st.reasonInput;
    const caret = reasonFocused ? [hadFocus.selectionStart, hadFocus.selectionEnd] : null;
    list.replaceChildren();
    const items = ordered();
    const pending = items.filter((p) => p.status === "pending").length;
    $("proposals-count").textContent = pending ? String(pending) : "";
    $("proposals-empty").hidden = items.length > 0;
    const ready = consoleReady();
    for (const p of items) {
      const open = p.status === "pending";
      const buttons = el("div", { class: "buttons" });
      if (open) {
        const why = ready ? null : "connect the operator console first";
        buttons.append(
          el("button", { type: "button", class: "approve", disabled: !ready, title: why || "approve (a)", onclick: (e) => { e.stopPropagation(); approve(p.id); } }, "Approve"),
          el("button", { type: "button", class: "danger reject", disabled: !ready, title: why || "reject (r)", onclick: (e) => { e.stopPropagation(); startReject(p.id); } }, "Reject"),
        );
        if (st.rejecting === p.id) {
          const form = el(
            "form",
            {
              class: "reject-form",
              onsubmit: (e) => {
                e.preventDefault();
                confirmReject(p.id, reasonInput().value);
              },
            },
            reasonInput(),
          );
          buttons.append(form);
        }
      }
      const meta = [`from ${p.participant}`, `to ${(p.to || []).join(", ") || "?"}`];
      if (p.channel) meta.push(p.channel);
      if (p.approvedBy && p.status === "approved") meta.push(`approved by ${p.approvedBy}`);
      const item = el(
        "li",
        {
          class: "proposal",
          tabindex: "0",
          "aria-selected": String(st.selected === p.id),
          dataset: { id: p.id, status: p.status },
          onclick: () => select(p.id, false),
          onfocus: () => select(p.id, false),
        },
        el("div", { class: "what" }, p.tool ? `${p.method} ${p.tool}` : p.method || "?"),
        p.arguments !== undefined && p.arguments !== null ? el("code", { class: "args" }, json(p.arguments)) : null,
        el("div", { class: "meta" }, meta.join(" · ")),
        buttons.childNodes.length ? buttons : null,
        p.outcome ? el("div", { class: "outcome " + (p.outcome.ok ? "ok" : "bad") }, p.outcome.text) : null,
      );
      list.append(item);
    }
    if (reasonFocused && st.reasonInput.isConnected) {
      st.reasonInput.focus({ preventScroll: true });
      st.reasonInput.setSelectionRange(caret[0], caret[1]);
    } else if (focusedId) {
      const again = list.querySelector(`.proposal[data-id="${CSS.escape(focusedId)}"]`);
      if (again) again.focus({ preventScroll: true });
    }
  }

  function select(id, focus) {
    if (!id) return;
    if (st.selected !== id) {
      st.selected = id;
      for (const node of document.querySelectorAll("#proposals .proposal")) {
        node.setAttribute("aria-selected", String(node.dataset.id === id));
      }
    }
    if (focus) {
      const node = document.querySelector(`#proposals .proposal[data-id="${CSS.escape(id)}"]`);
      if (node) node.focus();
    }
  }

  function move(delta) {
    const items = ordered();
    if (!items.length) return;
    const at = items.findIndex((p) => p.id === st.selected);
    const next = items[Math.min(items.length - 1, Math.max(0, at < 0 ? 0 : at + delta))];
    select(next.id, true);
  }

  function approve(id) {
    const p = st.proposals.get(id);
    if (!p || p.status !== "pending") return;
    if (!consoleReady()) {
      notice("Connect the operator console to approve or reject proposals.");
      return;
    }
    if (!p.payload) {
      notice(`Proposal ${short(id)} is too large for the feed; wait for it in the console's channel.`);
      return;
    }
    if (!p.to || !p.to.length) {
      notice(`Proposal ${short(id)} names no target, so it cannot be fulfilled.`);
      return;
    }
    // exactly what the SDK's Participant.approve sends: the proposal's payload, unchanged,
    // as an mcp/request DM to its targets, correlated with the proposal's id
    const cid = cs.newId();
    cs.send({ kind: "mcp/request", id: cid, to: p.to, correlation_id: [p.id], payload: p.payload });
    cs.actions.set(cid, p.id);
    p.status = "approved";
    p.approvedBy = cs.id;
    p.sources.add("console");
    consoleLine("system", `approved ${proposalWhat(p)} on ${p.to.join(", ")}; waiting for the result…`);
    const next = nextPending(id);
    renderProposals();
    if (next) select(next, true);
  }

  function startReject(id) {
    const p = st.proposals.get(id);
    if (!p || p.status !== "pending") return;
    if (!consoleReady()) {
      notice("Connect the operator console to approve or reject proposals.");
      return;
    }
    st.rejecting = id;
    reasonInput().value = "";
    st.selected = id;
    renderProposals();
    const input = document.querySelector(`#proposals .proposal[data-id="${CSS.escape(id)}"] .reason`);
    if (input) input.focus();
  }

  function cancelReject() {
    const id = st.rejecting;
    st.rejecting = null;
    renderProposals();
    if (id) select(id, true);
  }

  function confirmReject(id, reason) {
    const p = st.proposals.get(id);
    st.rejecting = null;
    if (!p || p.status !== "pending") {
      renderProposals();
      return;
    }
    const why = (reason || "").trim() || "rejected";
    // as the SDK's Participant.reject: mcp/reject to the proposer, in the proposal's channel
    const env = { kind: "mcp/reject", id: cs.newId(), to: [p.participant], correlation_id: [p.id], payload: { reason: why } };
    if (p.channel) env.channel = p.channel;
    else env.private = true; // a proposal made by DM is rejected by DM
    cs.send(env);
    cs.actions.set(env.id, p.id);
    p.sources.add("console");
    settle(id, "rejected", { ok: false, text: `rejected by ${cs.id}: ${why}` });
    consoleLine("system", `rejected ${proposalWhat(p)} from ${p.participant}: ${why}`);
    renderProposals();
    if (st.selected) select(st.selected, true);
  }

  // ------------------------------------------------------------------ operator console

  const cs = {
    ws: null,
    id: null,
    ready: false,
    channels: new Map(), // name -> {messages: Map(seq -> env), hasMore, unread}
    current: null,
    actions: new Map(), // client id of an approve/reject -> proposal id
    requests: new Map(), // server id of our fulfilment request -> proposal id
    counter: 0,
    newId() {
      cs.counter += 1;
      return `op-${Date.now().toString(36)}-${cs.counter}`;
    },
    send(env) {
      if (cs.ws && cs.ws.readyState === WebSocket.OPEN) cs.ws.send(JSON.stringify(env));
      else consoleLine("error", "the console is not connected");
    },
  };
  const DM = "@dm";

  function consoleOpen() {
    return !!cs.ws;
  }
  function consoleReady() {
    return !!(cs.ws && cs.ready);
  }

  function consoleConnect() {
    const v = st.viewer;
    if (!v || !v.can_console || cs.ws) return;
    const id = v.open ? $("console-id").value.trim() : v.id;
    if (!ID_RE.test(id || "")) {
      notice("The operator id must be 1-32 of A-Z a-z 0-9 _ . -");
      $("console-id").focus();
      return;
    }
    if (v.open) store(CONSOLE_ID_KEY, id);
    const ws = new WebSocket((location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/ws");
    cs.ws = ws;
    cs.ready = false;
    cs.channels = new Map();
    cs.current = null;
    $("console-connect").hidden = true;
    ws.addEventListener("open", () => {
      const hello = { type: "join", participantId: id, space: v.space, kind: "human", channels: ["#general"] };
      if (!v.open && st.token) hello.token = st.token;
      ws.send(JSON.stringify(hello));
    });
    ws.addEventListener("message", (e) => {
      let env;
      try {
        env = JSON.parse(e.data);
      } catch (err) {
        return;
      }
      onEnvelope(env);
    });
    ws.addEventListener("close", (e) => {
      if (cs.ws !== ws) return;
      cs.ws = null;
      cs.ready = false;
      const why = {
        4000: "replaced by another connection with the same id",
        4001: e.reason || "disconnected by an admin",
        1008: e.reason || "refused",
        1001: "the server is shutting down",
      }[e.code] || e.reason || `closed (${e.code})`;
      consoleLine("error", `console disconnected: ${why}`);
      $("console-connect").hidden = !(st.viewer && st.viewer.can_console);
      renderProposals();
    });
  }

  function consoleDisconnect() {
    if (cs.ws) cs.ws.close(1000, "operator left");
  }

  function channelState(name) {
    let ch = cs.channels.get(name);
    if (!ch) {
      ch = { messages: new Map(), hasMore: false, unread: 0 };
      cs.channels.set(name, ch);
    }
    return ch;
  }

  function onEnvelope(env) {
    const p = env.payload || {};
    switch (env.kind) {
      case "system/welcome":
        cs.id = (p.you && p.you.id) || cs.id;
        cs.ready = true;
        $("console-main").hidden = false;
        consoleLine("system", `connected as ${cs.id}`);
        renderProposals();
        $("console-input").focus();
        return;
      case "channel/joined": {
        const ch = channelState(p.channel);
        for (const m of p.history || []) remember(p.channel, m);
        const seqs = (p.history || []).map((m) => m.seq).filter((n) => typeof n === "number");
        ch.hasMore = !!p.has_more || (seqs.length > 0 && Math.min(...seqs) > 1);
        if (!cs.current || cs.current === DM) cs.current = p.channel;
        for (const m of p.history || []) if (m.kind === "mcp/proposal") noteHistoryProposal(m);
        renderConsole();
        return;
      }
      case "channel/left":
        cs.channels.delete(p.channel);
        if (cs.current === p.channel) cs.current = cs.channels.keys().next().value || null;
        renderConsole();
        return;
      case "history/response": {
        const ch = channelState(p.channel);
        for (const m of p.messages || []) remember(p.channel, m);
        ch.hasMore = !!p.has_more;
        renderConsole(true);
        return;
      }
      case "system/error": {
        const cid = (env.correlation_id || [])[0];
        const pid = cs.actions.get(cid);
        if (pid) {
          const prop = st.proposals.get(pid);
          if (prop && prop.status === "approved") prop.status = "pending"; // it did not go out
          if (prop) prop.outcome = { ok: false, text: `${p.error}: ${p.message}` };
          renderProposals();
        }
        consoleLine("error", `${p.error}: ${p.message}`);
        return;
      }
      case "mcp/proposal":
        mergeProposal(fromEnvelope(env), "console");
        renderProposals();
        break;
      case "mcp/request":
        if (env.from === cs.id) {
          for (const cid of env.correlation_id || []) {
            if (st.proposals.has(cid)) cs.requests.set(env.id, cid);
          }
        }
        break;
      case "mcp/response":
        for (const cid of env.correlation_id || []) {
          const pid = cs.requests.get(cid);
          if (!pid) continue;
          cs.requests.delete(cid);
          const err = p.error;
          const text = err ? `${env.from} failed: ${err.message || json(err)}` : `${env.from} answered: ${resultText(p.result)}`;
          settle(pid, "done", { ok: !err, text });
          consoleLine(err ? "error" : "system", `proposal ${short(pid)} — ${text}`);
          renderProposals();
        }
        break;
      case "mcp/reject":
        for (const cid of env.correlation_id || []) {
          if (st.proposals.has(cid) && env.from !== cs.id) {
            settle(cid, "rejected", { ok: false, text: `rejected by ${env.from}: ${p.reason || ""}` });
            renderProposals();
          }
        }
        break;
      case "mcp/withdraw":
        for (const cid of env.correlation_id || []) {
          if (st.proposals.has(cid)) {
            settle(cid, "withdrawn", { ok: false, text: `withdrawn by ${env.from}${p.reason ? " (" + p.reason + ")" : ""}` });
            renderProposals();
          }
        }
        break;
      default:
        break;
    }
    if (env.kind === "chat" || env.kind === "mcp/proposal") {
      const where = env.channel || DM;
      remember(where, env);
      const ch = channelState(where);
      if (where !== cs.current) ch.unread += 1;
      renderConsole(false, where !== cs.current);
    }
  }

  function noteHistoryProposal(env) {
    // a proposal from history is shown only if the observer feed still has it pending
    const have = st.proposals.get(env.id);
    if (have && !have.payload) have.payload = env.payload;
  }

  function resultText(result) {
    if (result && Array.isArray(result.content)) {
      const texts = result.content.filter((c) => c && c.type === "text").map((c) => c.text);
      if (texts.length) return texts.join("\n");
    }
    return json(result);
  }

  function remember(where, env) {
    const ch = channelState(where);
    const key = env.seq !== undefined && env.seq !== null ? env.seq : env.id;
    ch.messages.set(key, env);
    if (ch.messages.size > LOG_MAX) ch.messages.delete(ch.messages.keys().next().value);
  }

  const systemLines = [];

  function consoleLine(kind, text) {
    systemLines.push({ kind, text, at: Date.now(), where: cs.current });
    if (systemLines.length > 200) systemLines.shift();
    renderConsole();
  }

  function messageText(env) {
    const p = env.payload || {};
    if (env.kind === "mcp/proposal") {
      const prop = fromEnvelope(env);
      return `proposes ${proposalWhat(prop)} on ${prop.to.join(", ")}`;
    }
    let text = typeof p.text === "string" ? p.text : json(p);
    if (!env.channel && env.to) text = `→ ${env.to.join(", ")}: ${text}`;
    return text;
  }

  function renderConsole(keepScroll, tabsOnly) {
    const tabs = $("console-tabs");
    tabs.replaceChildren();
    const names = [...cs.channels.keys()].sort((a, b) => (a === DM) - (b === DM) || a.localeCompare(b));
    for (const name of names) {
      const ch = cs.channels.get(name);
      tabs.append(
        el(
          "button",
          {
            type: "button",
            role: "tab",
            "aria-selected": String(name === cs.current),
            dataset: { channel: name },
            onclick: () => {
              cs.current = name;
              ch.unread = 0;
              renderConsole();
              $("console-input").focus();
            },
          },
          name === DM ? "direct" : name,
          ch.unread ? el("span", { class: "unread" }, String(ch.unread)) : null,
        ),
      );
    }
    if (tabsOnly) return;
    const log = $("console-log");
    const atBottom = log.scrollTop + log.clientHeight >= log.scrollHeight - 4;
    const ch = cs.current ? cs.channels.get(cs.current) : null;
    const rows = []; // [time, order, node]: messages by seq, the console's own lines by time
    if (ch) {
      const msgs = [...ch.messages.values()].sort(
        (a, b) => (a.seq || 0) - (b.seq || 0) || String(a.id).localeCompare(String(b.id)),
      );
      let last = 0;
      for (const m of msgs) {
        last = Math.max(last, Date.parse(m.ts) || 0);
        const cls = m.from === cs.id ? "mine" : m.from === "system:gateway" ? "system" : "";
        rows.push([
          last,
          0,
          el(
            "li",
            { class: cls, dataset: { seq: m.seq ?? "", kind: m.kind } },
            el("time", {}, clock(m.ts)),
            el("span", { class: "from" }, m.from),
            el("span", { class: "body" }, messageText(m)),
          ),
        ]);
      }
    }
    for (const line of systemLines) {
      if (line.where && line.where !== cs.current) continue;
      const node = el("li", { class: line.kind }, el("time", {}, clock(line.at)), el("span", { class: "body" }, line.text));
      rows.push([line.at, 1, node]);
    }
    rows.sort((a, b) => a[0] - b[0] || a[1] - b[1]); // stable: equal times keep their order
    log.replaceChildren(...rows.map((r) => r[2]));
    if (!keepScroll && atBottom) log.scrollTop = log.scrollHeight;
    const older = $("console-older");
    older.hidden = !(ch && ch.hasMore && cs.current !== DM);
    $("console-input").placeholder =
      cs.current === DM || !cs.current
        ? "/dm id text — Enter sends · /join #ch"
        : `Message ${cs.current} — Enter sends · /dm id text · /join #ch · /leave`;
  }

  function loadOlder() {
    const ch = cs.channels.get(cs.current);
    if (!ch || cs.current === DM) return;
    const seqs = [...ch.messages.values()].map((m) => m.seq).filter((s) => typeof s === "number");
    const oldest = seqs.length ? Math.min(...seqs) : undefined;
    const req = { kind: "history/request", id: cs.newId(), payload: { channel: cs.current, limit: 50 } };
    if (oldest !== undefined) req.payload.before_seq = oldest;
    cs.send(req);
  }

  function submitConsole(text) {
    const line = text.trim();
    if (!line) return;
    const dm = /^\/dm\s+(\S+)\s+([\s\S]+)$/.exec(line);
    const join = /^\/join\s+(#\S+)$/.exec(line);
    if (dm) {
      cs.send({ kind: "chat", id: cs.newId(), to: [dm[1].replace(/^@/, "")], private: true, payload: { text: dm[2] } });
    } else if (join) {
      cs.send({ kind: "channel/join", id: cs.newId(), payload: { channel: join[1] } });
    } else if (/^\/leave\s*$/.test(line)) {
      if (cs.current && cs.current !== DM) cs.send({ kind: "channel/leave", id: cs.newId(), payload: { channel: cs.current } });
    } else if (line.startsWith("/")) {
      consoleLine("error", "commands: /dm id text, /join #channel, /leave");
      return;
    } else if (!cs.current || cs.current === DM) {
      consoleLine("error", "pick a channel tab, or write /dm id text");
      return;
    } else {
      cs.send({ kind: "chat", id: cs.newId(), channel: cs.current, payload: { text } });
    }
    $("console-input").value = "";
  }

  // ------------------------------------------------------------------ wiring and keys

  $("token-form").addEventListener("submit", (e) => {
    e.preventDefault();
    const value = $("token-input").value.trim();
    if (!value) return;
    st.token = value;
    store(TOKEN_KEY, value);
    $("token-input").value = "";
    consoleDisconnect();
    start();
  });
  $("token-forget").addEventListener("click", () => {
    st.token = null;
    store(TOKEN_KEY, null);
    consoleDisconnect();
    start();
  });
  $("console-connect").addEventListener("submit", (e) => {
    e.preventDefault();
    consoleConnect();
  });
  $("console-disconnect").addEventListener("click", consoleDisconnect);
  $("console-older").addEventListener("click", loadOlder);
  $("console-form").addEventListener("submit", (e) => {
    e.preventDefault();
    submitConsole($("console-input").value);
  });
  $("console-join").addEventListener("submit", (e) => {
    e.preventDefault();
    const input = $("console-join-input");
    let name = input.value.trim();
    if (!name) return;
    if (!name.startsWith("#")) name = "#" + name;
    cs.send({ kind: "channel/join", id: cs.newId(), payload: { channel: name } });
    input.value = "";
  });

  document.addEventListener("keydown", (e) => {
    const target = e.target;
    if (target instanceof HTMLElement && target.classList.contains("reason")) {
      if (e.key === "Escape") {
        e.preventDefault();
        cancelReject();
      }
      return;
    }
    if (e.key === "Escape" && target === $("console-input")) {
      target.blur();
      return;
    }
    const typing =
      target instanceof HTMLInputElement || target instanceof HTMLTextAreaElement || target instanceof HTMLSelectElement;
    if (typing || e.ctrlKey || e.metaKey || e.altKey) return;
    switch (e.key) {
      case "j":
      case "k":
      case "ArrowDown":
      case "ArrowUp": {
        // j/k anywhere; the arrows only while a proposal has the focus (they scroll otherwise)
        const inList = document.activeElement && document.activeElement.closest("#proposals");
        if (e.key.startsWith("Arrow") && !inList) return;
        e.preventDefault();
        move(e.key === "j" || e.key === "ArrowDown" ? 1 : -1);
        break;
      }
      case "a":
        e.preventDefault();
        approve(st.selected);
        break;
      case "r":
        e.preventDefault();
        startReject(st.selected);
        break;
      case "/":
        if (consoleReady()) {
          e.preventDefault();
          $("console-input").focus();
        }
        break;
      default:
        break;
    }
  });

  initToken();
  renderViewer();
  start();
})();
