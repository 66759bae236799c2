// The admin kill switch: disconnect, ban and unban (POST /admin/participants/{id}/…).

import { authHeaders, query, showNotice } from "./state.js";

export async function adminAction(action, pid) {
  let resp;
  try {
    resp = await fetch(`/admin/participants/${encodeURIComponent(pid)}/${action}` + query(false), {
      method: "POST",
      // a request a page on another site cannot forge without a CORS preflight (web_guard.py)
      headers: { ...authHeaders(), "Content-Type": "application/json", "X-Hubbub-Request": "1" },
      body: "{}",
    });
  } catch (e) {
    showNotice(`${action} ${pid}: the gateway cannot be reached`);
    return;
  }
  const body = await resp.json().catch(() => ({}));
  if (!resp.ok) showNotice(body.message || `${action} ${pid}: HTTP ${resp.status}`);
  else showNotice(`${pid}: ${action === "disconnect" ? "disconnected" : action + "ned"}`, "info");
}
