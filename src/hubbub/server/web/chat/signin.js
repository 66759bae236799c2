// Signing in: with a name where the space is open (as a human), or with a token. The sign-in
// is remembered in this browser for this gateway (localStorage belongs to one origin) until
// "Sign out" forgets it.

import { $ } from "../common/dom.js";
import { loadJSON, storeJSON, takeTokenFromUrl } from "../common/store.js";
import { ID_RE } from "../common/wire.js";
import { SIGNIN_KEY } from "./state.js";

const params = new URLSearchParams(location.search);
let done = null; // (signin) => void

/** GET /chat/session: who a token is, or how space `space` signs people in. */
async function ask(space, token) {
  const q = space ? "?space=" + encodeURIComponent(space) : "";
  const resp = await fetch("/chat/session" + q, {
    headers: token ? { Authorization: "Bearer " + token } : {},
    cache: "no-store",
  });
  const body = await resp.json().catch(() => ({}));
  return { ok: resp.ok, status: resp.status, body };
}

/** The space's current DM seq (`/chat/session`'s `dm_seq`), where this sign-in's DMs start
 * arriving by themselves; null when the gateway does not say. Rejects if it cannot be reached. */
export async function dmSeq(signin) {
  const answer = await ask(signin.token ? null : signin.space, signin.token || null);
  return answer.ok && typeof answer.body.dm_seq === "number" ? answer.body.dm_seq : null;
}

function problem(text) {
  const box = $("signin-error");
  box.hidden = !text;
  box.textContent = text || "";
}

function wantedSpace() {
  return params.get("space") || null;
}

/** Show the sign-in form (with `message` when a sign-in was refused). */
export async function showSignin(message) {
  $("app").hidden = true;
  $("signin").hidden = false;
  problem(message);
  let answer;
  try {
    answer = await ask(wantedSpace(), null);
  } catch (e) {
    $("signin-hint").textContent = "Cannot reach the gateway. Is it running? Reload this page to try again.";
    return;
  }
  const open = answer.ok && answer.body.open;
  $("signin-name-form").hidden = !open;
  $("signin-token-form").hidden = false;
  $("signin-hint").textContent = open
    ? `Space ${answer.body.space} is open: choose a name (or use a token if you have one).`
    : answer.body.message || `The gateway answered HTTP ${answer.status}.`;
  (open ? $("signin-name") : $("signin-token")).focus();
}

function finish(signin) {
  storeJSON(SIGNIN_KEY, $("signin-remember").checked ? signin : null);
  problem(null);
  $("signin").hidden = true;
  done(signin);
}

async function withToken(token, space) {
  let answer;
  try {
    answer = await ask(space, token);
  } catch (e) {
    return { error: "Cannot reach the gateway; try again." };
  }
  if (!answer.ok) return { error: answer.body.message || `The gateway refused the token (HTTP ${answer.status}).` };
  return { signin: { space: answer.body.space, id: answer.body.id, token } };
}

/** The sign-in to use at once: a token in the address (taken out of it), else the stored one. */
export async function initialSignin() {
  const token = takeTokenFromUrl(params);
  if (token) {
    const got = await withToken(token, wantedSpace());
    if (got.signin) storeJSON(SIGNIN_KEY, got.signin);
    return got;
  }
  const stored = loadJSON(SIGNIN_KEY, null);
  const space = wantedSpace();
  if (stored && typeof stored === "object" && (!space || stored.space === space)) return { signin: stored };
  return {};
}

export function forgetSignin() {
  storeJSON(SIGNIN_KEY, null);
}

export function initSignin(onSignedIn) {
  done = onSignedIn;
  $("signin-name-form").addEventListener("submit", async (e) => {
    e.preventDefault();
    const name = $("signin-name").value.trim();
    if (!ID_RE.test(name)) {
      problem("A name is 1–32 of letters, digits, _ . and - (no spaces).");
      $("signin-name").focus();
      return;
    }
    const answer = await ask(wantedSpace(), null).catch(() => null);
    finish({ space: (answer && answer.body.space) || wantedSpace() || "default", name });
  });
  $("signin-token-form").addEventListener("submit", async (e) => {
    e.preventDefault();
    const token = $("signin-token").value.trim();
    if (!token) return;
    const got = await withToken(token, wantedSpace());
    if (got.error) {
      problem(got.error);
      $("signin-token").focus();
      return;
    }
    $("signin-token").value = "";
    finish(got.signin);
  });
}
