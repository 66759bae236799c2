// The chat page's state: who is signed in, the conversations (channels and DMs) with their
// messages, the people of the space, and what the agents are doing. Views listen on `bus`:
// "conv-list", "conv" (key), "item-added" / "item-updated" / "item-removed" (conv, item),
// "older" (conv, items), "people", "activity", "status".

import { Emitter } from "../common/emitter.js";
import { loadJSON, storeJSON } from "../common/store.js";
import { SERVER } from "../common/wire.js";

export const SIGNIN_KEY = "hubbub.chat.signin";

export const bus = new Emitter();

export const chat = {
  signin: null, // {space, name} or {space, token, id}
  remember: true,
  session: null,
  me: null,
  kind: null,
  space: null,
  caps: null, // what I may send (Capabilities, see allowed.js); null until the welcome
  convs: new Map(), // key ("#general", "@bob", "@bob,carol") -> conversation
  current: null,
  wantOpen: null, // a channel to open once joined (the person asked to join or create it)
  invitedShown: null, // the private channel whose header says whom I just invited
  people: new Map(), // id -> {id, kind, presence, wakeAt, online}
  channelsKnown: new Map(), // name -> {members} from the welcome and channel/list
  byId: new Map(), // message id -> item (for acks, retries, floor lines)
  proposals: new Map(), // proposal id -> its entry (folded under the proposer's message)
  requests: new Map(), // mcp/request id -> {call} (a tool call) or {proposal} (a fulfilment)
  actions: new Map(), // id of my approve / reject -> the proposal entry
  floor: new Map(), // msg_id -> {channel, msgId, claimants: Set, holder, expiresAt, done, answer, answered: Set}
  answering: new Map(), // "conv|pid" -> {conv, pid, trigger, thought, since, via}
  dm: null, // paging back through my DMs: {before, hasOlder, loading, want} (model.startDms)
  callbacks: 0,
  skew: 0, // the gateway's clock minus Date.now()
  era: 0, // bumped when the gateway's history is replaced (history_reset)
};

export const serverNow = () => Date.now() + chat.skew;

/** The ids a mention can name: the people of the space and the members of my channels. */
export function knownIds() {
  const ids = new Set(chat.people.keys());
  for (const conv of chat.convs.values()) for (const id of conv.members) ids.add(id);
  return ids;
}

/** Every known participant's display name (`{id: name or null}`), for the addressing rule. */
export function knownNames() {
  const names = {};
  for (const id of knownIds()) names[id] = (chat.people.get(id) || {}).name || null;
  return names;
}

/** Per-person keys of what the page remembers (last read seqs, joined channels). */
function personKey(what) {
  return `hubbub.chat.${what}.${chat.space}.${chat.me}`;
}

export function loadPerson(what, fallback) {
  return loadJSON(personKey(what), fallback);
}

export function storePerson(what, value) {
  storeJSON(personKey(what), value);
}

/** The conversation key of a DM between me and `others`. */
export function dmKey(others) {
  return "@" + [...new Set(others)].sort().join(",");
}

export function peersOf(key) {
  return key.slice(1).split(",");
}

/** How a conversation is named: `#channel`, or its other parties (the gateway for callbacks). */
export function convTitle(key) {
  if (key.startsWith("#")) return key;
  return peersOf(key)
    .map((id) => (id === SERVER ? "gateway (callbacks)" : id))
    .join(", ");
}
