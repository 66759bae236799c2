// hubbub dashboard: live state over server-sent events, and an operator console over /ws
// (MEW). ES modules served by the gateway, no build step, no dependencies; everything from the
// server is rendered as text. Module map: docs/dashboard.md.

import { $ } from "../common/dom.js";
import { store } from "../common/store.js";
import { consoleDisconnect, initConsole } from "./console.js";
import { initFilters } from "./feed.js";
import { initKeys } from "./keys.js";
import { tick } from "./panels.js";
import { initProposals } from "./proposals.js";
import { TOKEN_KEY, st } from "./state.js";
import { initToken, renderViewer, start } from "./stream.js";

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
initProposals();
initConsole();
initFilters();
initKeys();
setInterval(tick, 1000); // the countdowns tick locally; the data comes from the stream

initToken();
renderViewer();
start();
