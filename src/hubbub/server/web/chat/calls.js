// Tool calls and proposals: an agent's `tools/call` requests and their results, proposals
// and their outcome (approved, done, rejected, withdrawn), folded under its next message.

import { json } from "../common/format.js";
import { proposalFrom, resultText } from "../common/proposals.js";
import { addEntry, conversation, convKeyOf, touch } from "./conversations.js";
import { chat } from "./state.js";

export function addMcp(env, ctx) {
  const conv = conversation(convKeyOf(env));
  const p = env.payload || {};
  const cids = Array.isArray(env.correlation_id) ? env.correlation_id : [];
  switch (env.kind) {
    case "mcp/proposal": {
      if (chat.proposals.has(env.id)) return;
      const entry = { type: "proposal", id: env.id, proposal: proposalFrom(env), status: "pending", by: null, outcome: null, error: null, host: null };
      chat.proposals.set(env.id, entry);
      addEntry(conv, env, entry, ctx);
      return;
    }
    case "mcp/request": {
      if (chat.requests.has(env.id)) return;
      const prop = cids.map((c) => chat.proposals.get(c)).find(Boolean);
      if (prop) {
        // a fulfilment: someone approved the proposal; its response is the proposal's result
        chat.requests.set(env.id, { proposal: prop });
        if (prop.status === "pending" || prop.status === "approving") {
          prop.status = "approved";
          prop.by = env.from;
          prop.error = null;
          touch(prop);
        }
        return;
      }
      if (p.method !== "tools/call") return; // discovery (tools/list, …) stays out of the chat
      const params = p.params && typeof p.params === "object" ? p.params : {};
      const entry = {
        type: "call",
        id: env.id,
        from: env.from,
        to: Array.isArray(env.to) ? env.to : [],
        tool: typeof params.name === "string" ? params.name : "?",
        arguments: params.arguments,
        result: null,
        ok: null,
        host: null,
      };
      chat.requests.set(env.id, { call: entry });
      addEntry(conv, env, entry, ctx);
      return;
    }
    case "mcp/response":
      for (const cid of cids) {
        const req = chat.requests.get(cid);
        if (!req) continue;
        const err = p.error;
        const text = err ? (err && err.message) || json(err) : resultText(p.result);
        if (req.call) {
          req.call.ok = !err;
          req.call.result = text;
          touch(req.call);
        }
        if (req.proposal) {
          const entry = req.proposal;
          entry.status = "done";
          entry.outcome = { ok: !err, text: err ? `${env.from} failed: ${text}` : `${env.from} answered: ${text}` };
          touch(entry);
        }
      }
      return;
    case "mcp/reject":
    case "mcp/withdraw":
      for (const cid of cids) {
        const entry = chat.proposals.get(cid);
        if (!entry || entry.status === "done") continue;
        const reason = p.reason ? String(p.reason) : "";
        if (env.kind === "mcp/reject") {
          entry.status = "rejected";
          entry.outcome = { ok: false, text: `rejected by ${env.from}${reason ? ": " + reason : ""}` };
        } else {
          entry.status = "withdrawn";
          entry.outcome = { ok: false, text: `withdrawn by ${env.from}${reason ? " (" + reason + ")" : ""}` };
        }
        entry.error = null;
        touch(entry);
      }
      return;
    default:
      return;
  }
}

/** My approve or reject of `entry` was refused: the proposal is open again, with the error. */
export function actionFailed(entry, error) {
  if (entry.status === "approving" || entry.status === "rejecting") entry.status = "pending";
  entry.error = `${error.error}: ${error.message}`;
  touch(entry);
}

export function actionSent(entry, status) {
  entry.status = status;
  entry.error = null;
  touch(entry);
}
