#!/usr/bin/env bash
# Run MEW's own e2e scenarios against hubbub (README.md here). Not run by CI: needs Node and
# a built checkout of rjcorwin/mew-protocol.
#
#   tests/interop/mew_e2e/run.sh MEW_CHECKOUT [scenario-dir-name ...]
#
# Each scenario runs unchanged (its setup.sh, check.sh, teardown.sh, its space.yaml) from a
# copy of MEW's e2e/ (e2e-hubbub/ inside the checkout, so the scenarios find the checkout as
# their repo root) in which lib/gateway-logs.sh is ./gateway-logs.sh, with ./mew first on
# PATH: `mew space up` then starts `hubbub serve --space-config <the scenario's MEW
# space.yaml>` where it would start MEW's gateway. MEW_E2E_MEW_GATEWAY=1 runs MEW's own
# gateway instead (and MEW's own log helpers), for a baseline.
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "${here}/../../.." && pwd)"
mew_root="$(cd "${1:?usage: run.sh MEW_CHECKOUT [scenario ...]}" && pwd)"
shift
[[ -f "${mew_root}/dist/cli/index.js" ]] || {
  echo "${mew_root}/dist/cli/index.js is missing: run npm install && npm run build there" >&2
  exit 2
}
scenarios=("$@")
if [[ ${#scenarios[@]} -eq 0 ]]; then
  scenarios=(scenario-1-basic scenario-2-mcp scenario-3-proposals scenario-5-reasoning
    scenario-6-errors scenario-7-mcp-bridge scenario-8-grant scenario-8-typescript-agent
    scenario-9-typescript-proposals scenario-10-multi-agent scenario-11-chat-controls
    scenario-12-stream-controls scenario-13-participant-controls scenario-17-space-invite
    scenario-4-capabilities)
fi

e2e="${mew_root}/e2e-hubbub"
rm -rf "${e2e}"
mkdir -p "${e2e}"
(cd "${mew_root}/e2e" && tar --exclude=.workspace -cf - .) | (cd "${e2e}" && tar -xf -)
if [[ -z "${MEW_E2E_MEW_GATEWAY:-}" ]]; then
  cp "${here}/gateway-logs.sh" "${e2e}/lib/gateway-logs.sh"
fi

export PATH="${here}:${PATH}"
export MEW_DIST="${mew_root}/dist"
export HUBBUB="${HUBBUB:-${repo}/.venv/bin/hubbub}"
results="${MEW_E2E_RESULTS:-${e2e}/results}"
mkdir -p "${results}"

printf '%-36s %-6s %s\n' scenario result checks
for name in "${scenarios[@]}"; do
  log="${results}/${name}.log"
  timeout "${MEW_E2E_TIMEOUT:-300}" "${e2e}/${name}/test.sh" > "${log}" 2>&1
  rc=$?
  plain="$(sed 's/\x1b\[[0-9;]*m//g' "${log}")"  # the scenarios colour their summaries
  passed="$(sed -n 's/^\(Tests passed\|Passed\): //p' <<< "${plain}" | tail -1)"
  failed="$(sed -n 's/^\(Tests failed\|Failed\): //p' <<< "${plain}" | tail -1)"
  result=pass
  [[ ${rc} -eq 0 ]] || result=FAIL
  printf '%-36s %-6s passed %s, failed %s (%s)\n' "${name}" "${result}" "${passed:-?}" \
    "${failed:-?}" "${log}"
done
