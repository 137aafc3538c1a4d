#!/usr/bin/env bash
# CPU of the release daemon with a 9-process forked job, against the
# per-process path.
#
# A `headroom run --dry-run` on the embedded default config runs while
# `headroom-hog --max 2600MiB --fork 8` (started as `torchrun`: ML work, so a
# job) holds 2.6 GiB shared by 9 processes; then, with a fresh daemon, the
# same hog without forks and 8 hogs of 1 MiB (9 ML processes that share
# nothing). For each, the daemon's utime + stime from /proc/PID/stat over
# SECS seconds (default 60), starting 5 s after it started, as a share of one
# core, and the `pss` collector's account from /api/v1/snapshot at the end
# (its share is over the daemon's whole run).
#
#   scripts/bench-job-cpu.sh            # SECS=120 for a longer window
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --bin headroom --example headroom-hog -q
B=$PWD/target/release
SECS=${SECS:-60}
HZ=$(getconf CLK_TCK)
WORK=$(mktemp -d)
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

hog() { # name, args...: a hog started as torchrun, its output in $WORK/name
    local name=$1
    shift
    (exec -a torchrun "$B/examples/headroom-hog" "$@" >"$WORK/$name" 2>&1) &
    PIDS+=($!)
}

wait_lines() { # file, pattern, count
    for _ in $(seq 600); do
        [ "$(grep -c "$2" "$1" 2>/dev/null || true)" -ge "$3" ] && return 0
        sleep 0.2
    done
    echo "timed out waiting for $3 × '$2' in $1" >&2
    exit 1
}

measure() { # label
    HEADROOM_LOG=info "$B/headroom" run --dry-run --listen 127.0.0.1:0 2>"$WORK/daemon.log" &
    local d=$!
    PIDS+=("$d")
    sleep 5
    local c0 c1 addr pss
    c0=$(cpu_ticks "$d")
    sleep "$SECS"
    c1=$(cpu_ticks "$d")
    addr=$(grep -o 'status page: http://[^/]*' "$WORK/daemon.log" | head -1 | sed 's|.*http://||')
    pss=$(curl -s "http://$addr/api/v1/snapshot" | python3 -c '
import json, sys
v = json.load(sys.stdin)
c = v.get("collectors") or v.get("snapshot", {}).get("collectors", [])
print(next((x["detail"] for x in c if x["name"] == "pss"), "(no pss collector)"))
jobs = v.get("jobs") or v.get("snapshot", {}).get("jobs", [])
if jobs:
    j = jobs[0]
    print("largest job: %d members, %.2f GiB (%s)" % (len(j["members"]), j["footprint"] / 2**30, j["basis"]))
')
    kill "$d"
    wait "$d" 2>/dev/null || true
    awk -v l="$1" -v a="$c0" -v b="$c1" -v hz="$HZ" -v s="$SECS" \
        'BEGIN { printf "%s: %d ticks of CPU in %d s = %.3f %% of one core\n", l, b - a, s, (b - a) / hz / s * 100 }'
    echo "  pss: $pss"
}

hog job --rate max --max 2600MiB --fork 8
wait_lines "$WORK/job" '^forked pid=' 8
sleep 2
measure "job (1 + 8 forked, shared)"
kill "${PIDS[0]}"
wait "${PIDS[0]}" 2>/dev/null || true
PIDS=()
sleep 2

hog big --rate max --max 2600MiB
for i in 1 2 3 4 5 6 7 8; do hog "small$i" --rate max --max 1MiB; done
for f in big small1 small2 small3 small4 small5 small6 small7 small8; do
    wait_lines "$WORK/$f" '^holding ' 1
done
sleep 2
measure "per-process (9 separate, nothing shared)"
