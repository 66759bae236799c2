// hubbub web chat: people talk with agents in the browser. ES modules served by the gateway
// (no build step), speaking the MEW dialect over /ws through the session the dashboard's
// console uses too (../common/session.js). Module map: docs/webchat.md.

import { $ } from "../common/dom.js";
import { Session } from "../common/session.js";
import { CB_FIRE, SERVER } from "../common/wire.js";
import { loadDms, openConversation, refreshRoster, refused } from "./actions.js";
import { initActivity } from "./activity.js";
import { avatar } from "./avatar.js";
import { actionFailed } from "./calls.js";
import { initComposer } from "./composer.js";
import { expire } from "./floor.js";
import { setStatus } from "./messages.js";
import { onEnvelope, onEpoch, onHistory, onJoined, onLeft, onWelcome } from "./model.js";
import { initSidebar, tickCountdowns } from "./sidebar.js";
import { dmSeq, forgetSignin, initSignin, initialSignin, showSignin } from "./signin.js";
import { bus, chat, loadPerson } from "./state.js";
import { initTimeline } from "./timeline.js";

let lastError = null; // the gateway's last error before a close (why a join was refused)
let welcomed = false;

function setConn(state, text) {
  const chip = $("conn");
  chip.dataset.state = state;
  chip.textContent = text;
}

function banner(text) {
  const box = $("banner");
  box.hidden = !text;
  box.textContent = text || "";
}

/** Who I am, in the top bar (on a phone too) and at the top of the drawer. */
function renderMe() {
  $("me").textContent = chat.me;
  $("me-avatar").replaceChildren(avatar(chat.me, chat.kind));
  $("drawer-me").replaceChildren(avatar(chat.me, chat.kind), ` ${chat.me}`);
}

function renderCallbacks() {
  const chip = $("callbacks");
  chip.hidden = !chat.callbacks;
  chip.textContent = chat.callbacks ? `${chat.callbacks} callback${chat.callbacks === 1 ? "" : "s"} pending` : "";
}

function onState(state, detail) {
  if (state === "connecting") setConn("connecting", "connecting…");
  else if (state === "live") {
    setConn("live", "connected");
    banner(null);
  } else if (state === "reconnecting") {
    setConn("reconnecting", "reconnecting…");
    banner("Connection lost — reconnecting… Messages you write now are sent once it is back; nothing shown here is lost.");
  } else if (state === "closed") {
    closed(detail);
  }
}

function closed(detail) {
  if (detail.code === 4000) {
    setConn("error", "signed in elsewhere");
    banner(`This page was replaced by another sign-in as ${chat.me} (another tab or device). Reload to use it here again.`);
  } else if (detail.code === 4001) {
    setConn("error", "disconnected");
    banner(`Disconnected by an admin${detail.reason ? ": " + detail.reason : ""}.`);
  } else if (!welcomed || detail.code === 1008) {
    // the gateway refused the sign-in itself: back to the form, with its reason
    const why = (lastError && lastError.message) || detail.reason || "the gateway refused to sign you in";
    chat.session = null;
    showSignin(why);
  } else {
    setConn("error", "disconnected");
  }
}

function connect(signin) {
  chat.signin = signin;
  chat.space = signin.space;
  chat.me = signin.id || signin.name;
  renderMe();
  $("app").hidden = false;
  const channels = loadPerson("channels", null);
  const session = new Session({
    hello: () =>
      signin.token
        ? { participantId: signin.id, space: signin.space, token: signin.token }
        : { participantId: signin.name, space: signin.space, kind: "human" },
    channels: Array.isArray(channels) && channels.length ? channels : ["#general"],
    // DMs newer than now arrive by themselves; the page asks for the last page of the older
    // ones, and for more as the person scrolls up (as for a channel)
    dmStart: () => dmSeq(signin),
  });
  chat.session = session;
  session.on("state", onState);
  session.on("welcome", (env) => {
    welcomed = true;
    lastError = null;
    onWelcome(env);
    renderMe();
    refreshRoster();
  });
  session.on("joined", (channel, info) => {
    onJoined(channel, info);
    if (!chat.current || chat.wantOpen === channel) {
      chat.wantOpen = null;
      openConversation(channel);
    }
  });
  session.on("left", (channel) => {
    onLeft(channel);
    if (chat.current === channel) {
      const next = [...chat.convs.values()].find((c) => c.kind === "channel" && c.joined);
      if (next) openConversation(next.key);
    }
  });
  session.on("history", onHistory);
  session.on("dmstart", loadDms);
  session.on("envelope", (env) => {
    onEnvelope(env);
    const p = env.payload || {};
    if (env.from === SERVER && typeof p.text === "string" && p.text.startsWith(CB_FIRE) && p.cb_origin === chat.me) {
      refreshRoster(); // one callback fewer pending
    }
  });
  session.on("ack", (id, echo, sent) => {
    chat.actions.delete(id);
    const text = sent.payload && sent.payload.text;
    if (typeof text === "string" && text.includes("@@")) refreshRoster(); // a callback, maybe
  });
  session.on("failed", (id, error) => {
    const entry = chat.actions.get(id);
    if (entry) {
      chat.actions.delete(id);
      actionFailed(entry, error);
    } else {
      setStatus(id, "failed", error);
    }
  });
  session.on("kept", (id) => {
    setStatus(id, "kept");
    refreshRoster();
  });
  session.on("error", (error, env) => {
    lastError = error;
    if (error.error === "callback_rejected") refreshRoster();
    if (welcomed) refused(error, env);
  });
  session.on("epoch", onEpoch);
  session.start();
}

function signOut() {
  forgetSignin();
  if (chat.session) chat.session.stop(1000, "signed out");
  location.reload();
}

/** Alt+↑ / Alt+↓: the previous / next conversation of the sidebar. */
function onKey(e) {
  if (!e.altKey || (e.key !== "ArrowUp" && e.key !== "ArrowDown")) return;
  const keys = [...document.querySelectorAll("#sidebar button.conv")].map((b) => b.dataset.conv);
  if (!keys.length) return;
  e.preventDefault();
  const at = keys.indexOf(chat.current);
  const next = keys[(at + (e.key === "ArrowDown" ? 1 : keys.length - 1) + keys.length) % keys.length];
  openConversation(next);
}

async function boot() {
  initSidebar();
  initTimeline();
  initActivity();
  initComposer();
  initSignin(connect);
  bus.on("status", renderCallbacks);
  $("signout").addEventListener("click", signOut);
  document.addEventListener("keydown", onKey);
  setInterval(() => {
    tickCountdowns();
    expire();
  }, 1000);
  const { signin, error } = await initialSignin();
  if (signin) connect(signin);
  else showSignin(error || null);
}

boot();
