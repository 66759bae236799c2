// People of the space and their presence (online, sleeping until, offline), from the
// welcome, presence events and the roster.

import { setCapabilities } from "./allowed.js";
import { bus, chat } from "./state.js";

export function setPerson(e, online) {
  if (!e || typeof e.id !== "string") return;
  const have = chat.people.get(e.id) || { id: e.id, kind: null, presence: "offline", wakeAt: null, online: false };
  have.kind = e.kind || have.kind;
  if (typeof e.name === "string" && e.name) have.name = e.name; // display name: @Name addresses
  have.online = online;
  have.presence = online ? e.presence || "online" : "offline";
  const wake = e.wake_at ?? (e.sleeping && e.sleeping.wake_at);
  have.wakeAt = have.presence === "sleeping" && wake ? (typeof wake === "number" ? wake : Date.parse(wake)) : null;
  delete have.stale;
  chat.people.set(e.id, have);
}

export function applyPresence(p) {
  const entries = Array.isArray(p.participants) ? p.participants : p.participant ? [p.participant] : [];
  const touched = new Set();
  const member = (name, id, joins) => {
    const conv = chat.convs.get(name);
    if (!conv) return;
    if (joins) conv.members.add(id);
    else conv.members.delete(id);
    touched.add(name);
  };
  for (const e of entries) {
    if (!e || typeof e.id !== "string") continue;
    if (e.id === chat.me) setCapabilities(e.capabilities); // a grant or revoke changed them
    if (p.channel) {
      // membership of one channel
      if (p.event === "join" || p.event === "leave") member(p.channel, e.id, p.event === "join");
      if (p.event === "join" && !(chat.people.get(e.id) || {}).online) setPerson(e, true);
    } else {
      // connected (with the channels it joined) or disconnected (from those it was in)
      setPerson(e, p.event !== "leave");
      if ((p.event === "join" || p.event === "leave") && Array.isArray(e.channels)) {
        for (const name of e.channels) member(name, e.id, p.event === "join");
      }
    }
  }
  for (const name of touched) bus.emit("conv", name);
  bus.emit("people");
}

/** The people of the space as `GET /participants` lists them (offline ones too). */
export function setRoster(list) {
  for (const e of list) {
    if (e.id === chat.me) chat.callbacks = e.pending_callbacks || 0;
    setPerson(e, !!e.online);
  }
  bus.emit("people");
  bus.emit("status");
}
