// Unread counts and mentions of me, per conversation; what was read is remembered per person.

import { mentions } from "../common/mentions.js";
import { bus, chat, loadPerson, storePerson } from "./state.js";

export function viewing(conv) {
  return chat.current === conv.key && document.visibilityState === "visible";
}

export function recountUnread(conv) {
  if (viewing(conv)) {
    markRead(conv);
    return;
  }
  let unread = 0;
  let mentions = 0;
  for (const item of conv.items) {
    if (item.type !== "chat" || item.from === chat.me || item.era !== conv.era) continue;
    if ((item.seq ?? 0) > conv.lastRead) {
      unread += 1;
      if (mentionsMe(item.text)) mentions += 1;
    }
  }
  conv.unread = unread;
  conv.mentions = mentions;
}

/** Everything in `conv` is read (the page remembers up to which seq). */
export function markRead(conv) {
  let last = conv.lastRead;
  for (const item of conv.items) if (item.era === conv.era && item.seq !== null) last = Math.max(last, item.seq);
  const changed = conv.unread || conv.mentions || last !== conv.lastRead;
  if (conv.unread && conv.lastRead > 0 && (conv.newSince === null || conv.newSince === undefined)) {
    conv.newSince = conv.lastRead; // came while the page was hidden: marked as new
    bus.emit("new-marker", conv);
  }
  conv.unread = 0;
  conv.mentions = 0;
  conv.lastRead = last;
  if (!changed) return;
  const read = loadPerson("read", {});
  read[conv.key] = last;
  storePerson("read", read);
  bus.emit("conv-list");
}

export function mentionsMe(text) {
  return !!chat.me && mentions(text, chat.me);
}
