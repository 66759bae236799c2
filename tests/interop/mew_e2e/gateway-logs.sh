#!/usr/bin/env bash
# MEW's e2e/lib/gateway-logs.sh for scenarios run against hubbub (README.md here).
#
# MEW's gateway writes .mew/logs/envelope-history.jsonl and capability-decisions.jsonl, and
# the scenarios' checks grep them. hubbub writes neither; these helpers answer the same
# questions from what hubbub shows over HTTP, with the scenario's own TEST_PORT:
#   received (wait_for_envelope, wait_for_envelope_receipt): the envelope is in the space's
#     stored history (GET /channels/%23general/messages), from the participant if one is named;
#     hubbub stores a message before it acknowledges or delivers it. A direct message (a
#     capability/grant or /revoke, which hubbub delivers to its recipient alone) is in no
#     channel's history: it counts as received when a participant's output log
#     ($WORKSPACE_DIR/logs/*-output.log, what hubbub delivered to it) holds it.
#   delivered (wait_for_delivery): received, and the participant is online
#     (GET /participants) — hubbub delivers every stored message to its online addressees.
#   capability allowed (wait_for_capability_grant): a message of exactly that kind from the
#     participant (with that id, if one is named) is stored — hubbub stores only what the
#     sender's capabilities allow.
# Rejections and routing decisions have no HTTP view: those helpers fail, saying so.

set -euo pipefail

_hub() {
  curl -sf "http://localhost:${TEST_PORT:?}$1"
}

_history() {
  _hub "/channels/%23general/messages?limit=1000"
}

# every envelope hubbub delivered to the participants that keep an output log, as one
# {"messages": [...]} like the history's (lines that are not JSON left out)
_delivered() {
  cat "${WORKSPACE_DIR:-/nonexistent}"/logs/*-output.log 2> /dev/null |
    jq -R -s '{messages: [split("\n")[] | fromjson? // empty | select(type == "object")]}'
}

_seen() {
  _history
  _delivered
}

assert_envelope_received() {
  local id="$1" participant="${2:-}"
  _seen | jq -s -e --arg id "$id" --arg p "$participant" \
    'map(.messages) | add | any(.id == $id and ($p == "" or .from == $p))' > /dev/null
}

assert_envelope_delivered() {
  local id="$1" participant="$2"
  assert_envelope_received "$id" || return 1
  _hub "/participants" | jq -e --arg p "$participant" \
    '.participants | any(.id == $p and .online)' > /dev/null
}

assert_capability_granted() {
  local participant="$1" capability="$2" id="${3:-}"
  _seen | jq -s -e --arg p "$participant" --arg k "$capability" --arg id "$id" \
    'map(.messages) | add | any(.from == $p and .kind == $k and ($id == "" or .id == $id))' \
    > /dev/null
}

_poll() {
  for _ in {1..300}; do
    if "$@" 2> /dev/null; then
      return 0
    fi
    sleep 0.1
  done
  return 1
}

wait_for_envelope() { _poll assert_envelope_received "$1"; }
wait_for_envelope_receipt() { _poll assert_envelope_received "$1" "${2:-}"; }
wait_for_delivery() { _poll assert_envelope_delivered "$1" "$2"; }
wait_for_capability_grant() { _poll assert_capability_granted "$1" "$2" "${3:-}"; }

_no_view() {
  echo "hubbub has no HTTP view of $1 (MEW's gateway log); this check cannot pass here" >&2
  return 1
}

assert_envelope_rejected() { _no_view "rejected envelopes"; }
wait_for_envelope_rejection() { _no_view "rejected envelopes"; }
wait_for_capability_decision() { _no_view "capability decisions"; }
get_envelope_routing_decision() { _no_view "routing decisions"; }

generate_envelope_id() {
  date +"env-%s%N-$RANDOM"
}
