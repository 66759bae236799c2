// The protocol's constants as the pages need them, in one place. Each is the Python one of
// the same meaning (named below); tests/webchat/test_wire_parity.py loads this module in
// Chromium and holds every value equal to Python's.

/** The gateway's own id in the MEW dialect (hubbub.protocol.ids.SERVER_ID). */
export const SERVER = "system:gateway";

/** The DM stream's key in `resume` and `history/request` (hubbub.protocol.ids.DM_STREAM). */
export const DM = "@dm";

/** A participant id, unanchored (hubbub.protocol.ids.PARTICIPANT_ID_RE). */
export const ID_PATTERN = "[A-Za-z0-9_.-]{1,32}";

/** A whole participant id. */
export const ID_RE = new RegExp(`^${ID_PATTERN}$`);

/** A fired callback's text starts with this (hubbub.protocol.markers.CB_FIRE). */
export const CB_FIRE = "@@cb-fire@@";

/** A wake-up note's text starts with this (hubbub.protocol.markers.WAKE). */
export const WAKE = "@@wake@@";

/** Close codes after which reconnecting is wrong: refused, replaced by a newer connection
 * with the same id, kicked (hubbub.server.connection CLOSE_POLICY, CLOSE_REPLACED,
 * CLOSE_KICKED). */
export const FINAL_CLOSE_CODES = Object.freeze([1008, 4000, 4001]);
