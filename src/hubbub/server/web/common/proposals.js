// The proposal wire (MEW v0.4 §3.2, document 003): what a proposal asks for, and the
// envelopes that approve or reject it — the same ones as the SDK's Participant.approve and
// Participant.reject, so a person in the browser is one more participant to the agents.

import { json } from "./format.js";

/** The proposal an `mcp/proposal` envelope makes. */
export function proposalFrom(env) {
  const payload = env.payload && typeof env.payload === "object" ? env.payload : {};
  const params = payload.params && typeof payload.params === "object" ? payload.params : {};
  return {
    id: env.id,
    participant: env.from,
    to: Array.isArray(env.to) ? env.to : [],
    channel: env.channel || null,
    method: typeof payload.method === "string" ? payload.method : null,
    tool: typeof params.name === "string" ? params.name : null,
    arguments: params.arguments,
    payload,
    status: "pending",
    ts: env.ts,
  };
}

/** `tools/call add {"a":1}`: the method, tool and arguments of a proposal or request. */
export function proposalWhat(p) {
  const name = p.tool ? `${p.method} ${p.tool}` : p.method || "?";
  return p.arguments === undefined || p.arguments === null ? name : `${name} ${json(p.arguments)}`;
}

/** The fulfilment: the proposal's payload, unchanged, as an `mcp/request` to its targets,
 * correlated with the proposal's id (the gateway also shows the response to the proposer). */
export function approveEnvelope(p) {
  return { kind: "mcp/request", to: p.to, correlation_id: [p.id], payload: p.payload };
}

/** `mcp/reject` to the proposer, in the proposal's channel (by DM when it came by DM). */
export function rejectEnvelope(p, reason) {
  const env = {
    kind: "mcp/reject",
    to: [p.participant],
    correlation_id: [p.id],
    payload: { reason: (reason || "").trim() || "rejected" },
  };
  if (p.channel) env.channel = p.channel;
  else env.private = true;
  return env;
}

/** The text of an MCP result (its text content), else the result as JSON. */
export function resultText(result) {
  if (result && Array.isArray(result.content)) {
    const texts = result.content.filter((c) => c && c.type === "text").map((c) => String(c.text));
    if (texts.length) return texts.join("\n");
  }
  return json(result);
}
