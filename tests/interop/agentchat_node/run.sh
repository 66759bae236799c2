#!/usr/bin/env bash
# Run agentchat's own test files against hubbub (docs/compatibility.md, "agentchat's own test
# files"). Needs Node >= 20 and npm; not part of `make test` (CI needs no Node).
#
#   tests/interop/agentchat_node/run.sh [AGENTCHAT_CHECKOUT] [TEST_FILE...]
#
# AGENTCHAT_CHECKOUT: a clone of github.com/tjamescouch/agentchat (default
# /work/agentchat-src). Its dependencies are installed without the ones only its Akash deploy
# and geo-IP logging need (one of them is not on the public registry); its build's
# dist/lib/server.js is replaced by hubbub_server.mjs, which starts `hubbub serve` (the
# `hubbub` on PATH, or $HUBBUB) on each test's port.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=${1:-/work/agentchat-src}
shift || true
files=("$@")
if [ ${#files[@]} -eq 0 ]; then
  files=(client.integration presence history.integration identity.integration
    server-directory daemon session-conflict challenge-auth verification allowlist banlist
    health file-chunk captcha proposal sig-verification escrow-hooks)
fi
cd "$src"
if [ ! -d node_modules/ws ]; then
  [ -f package.json.orig ] || cp package.json package.json.orig
  node -e '
    const fs = require("fs"); const p = JSON.parse(fs.readFileSync("package.json.orig"));
    for (const d of ["@akashnetwork/akashjs", "@cosmjs/proto-signing", "@cosmjs/stargate",
                     "@tjamescouch/gro", "geoip-lite"]) delete p.dependencies[d];
    delete p.devDependencies.knip;
    fs.writeFileSync("package.json", JSON.stringify(p, null, 2));'
  rm -f package-lock.json
  npm install --no-audit --no-fund
fi
npx tsc >/dev/null || true  # the Akash deploy and geo-IP modules do not compile without them
cp "$here/hubbub_server.mjs" dist/lib/server.js
mkdir -p test/run && cd test/run  # agentchat's daemon refuses a directory near the root
for f in "${files[@]}"; do
  log="/tmp/agentchat-$f.log"
  timeout 300 node --test --test-force-exit "../$f.test.js" >"$log" 2>&1 || true
  echo "$f: $(grep -E '^# (pass|fail)' "$log" | tr '\n' ' ') ($log)"
done
