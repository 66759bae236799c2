#!/usr/bin/env bash
# The scale table (docs/performance.md, "Scale") on a big machine without network access.
#
# Usage, from the repository root:  OUT=/some/dir benchmarks/scale_device.sh [.device]
#
# Needs python3 (3.12) with aiohttp, click, pyyaml, prometheus-client, regex and psutil; the
# folder (default .device/) carries what such a machine lacks: wheels/ (msgspec, websockets,
# redis, hiredis: cp312 manylinux x86_64) and bin/redis-server (a wrapper running the carried
# redis-server binary with its own loader and libraries from lib/). Each point runs
# benchmarks/scale.py and writes $OUT/<point>.json and .txt; $OUT/summary.md is the table.
set -u -o pipefail
CARRIED=${1:-.device}
OUT=${OUT:?set OUT to the folder for the results}
SITE=${SITE:-/tmp/hubbub-site}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target "$SITE" "$CARRIED"/wheels/*.whl || { echo "installing the wheels failed"; exit 1; }
export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
export PATH="$(readlink -f "$CARRIED")/bin:$PATH"
python3 - <<'PY' | tee "$OUT/versions.txt" || exit 1
import os, platform, aiohttp, msgspec, websockets, redis, psutil, yaml, click, prometheus_client
print("python", platform.python_version(), "cpus", os.cpu_count(), "aiohttp", aiohttp.__version__,
      "msgspec", msgspec.__version__, "websockets", websockets.__version__, "redis", redis.__version__)
major, minor = (int(x) for x in aiohttp.__version__.split(".")[:2])
assert (major, minor) >= (3, 11), "hubbub needs aiohttp >= 3.11: carry its wheel too"
PY
redis-server --version | tee -a "$OUT/versions.txt" || { echo "the carried redis-server does not run"; exit 1; }
ulimit -n "$(ulimit -Hn)" 2>/dev/null

point() {  # name, then scale.py's arguments
    local name=$1; shift
    echo "== $name: $*"
    timeout 150 python3 benchmarks/scale.py --warmup 2 --window 5 --label "$name" "$@" \
        --json "$OUT/$name.json" >"$OUT/$name.txt" 2>&1
    echo "   exit $?"; grep -v '^  (' "$OUT/$name.txt" | tail -6
}
point single-k1000 --k 1000
for w in 1 2 4 8; do point "workers$w-k1000" --cluster --workers "$w" --k 1000; done
point spaces8-k100-workers8 --cluster --workers 8 --spaces 8 --k 100
point spaces8-k100-workers1 --cluster --workers 1 --spaces 8 --k 100
python3 benchmarks/scale.py --table "$OUT" | tee "$OUT/summary.md"
# the leader's CPU per message with 8 followers, without and with the profiler (issue 26)
timeout 150 python3 benchmarks/leader_profile.py --followers 8 --k 1000 --seconds 10 --no-profile \
    --json "$OUT/leader-cpu.json" >"$OUT/leader-cpu.txt" 2>&1; tail -2 "$OUT/leader-cpu.txt"
timeout 150 python3 benchmarks/leader_profile.py --followers 8 --k 1000 --seconds 20 \
    --json "$OUT/leader-profile.json" >"$OUT/leader-profile.txt" 2>&1; tail -30 "$OUT/leader-profile.txt"
