#!/usr/bin/env bash
# Sampling-interval jitter of `headroom run` while wrk hammers its HTTP server.
#
# Starts a release build of the daemon on a free loopback port (interval 1s),
# records how far apart its samples are taken (`taken_at` of /api/v1/history,
# millisecond resolution) first with the server idle, then while two wrk
# processes (1 thread, 4 connections each) request /metrics and
# /api/v1/processes as fast as they can, and prints the jitter |gap - 1000 ms|:
# median, p99 and max, for each phase. Loopback only, bounded in time.
#
#   scripts/bench-jitter.sh              # 60 s per phase
#   JITTER_SECONDS=120 scripts/bench-jitter.sh
#   JITTER_CHILDREN=1000 scripts/bench-jitter.sh   # with 1000 idle processes
#
# Installs Debian's wrk if missing (needs root and apt-get).
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${JITTER_SECONDS:-60}
children=${JITTER_CHILDREN:-0}
source scripts/debian.sh
command -v wrk >/dev/null || debian_install bench-jitter wrk

cargo build --release --locked -q
log=$(mktemp)
sleepers=()
cleanup() {
  kill "$daemon" "${sleepers[@]}" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -f "$log"
}
for _ in $(seq "$children"); do
  sleep 3600 &
  sleepers+=($!)
done
target/release/headroom run --listen 127.0.0.1:0 2>"$log" &
daemon=$!
trap cleanup EXIT

addr=
for _ in $(seq 100); do
  addr=$(grep -o 'status page: http://[0-9.:]*' "$log" | head -1 | sed 's|status page: http://||') || true
  [[ -n $addr ]] && break
  sleep 0.1
done
if [[ -z $addr ]]; then
  echo "bench-jitter: the daemon did not start:" >&2
  cat "$log" >&2
  exit 1
fi

now_ms() { date +%s%3N; }

# Gaps between samples taken in [from, to] ms, as jitter statistics.
report() {
  local name=$1 from=$2 to=$3
  curl -sf "http://$addr/api/v1/history?minutes=$(( seconds / 60 + 2 ))" |
    grep -o '"at":[0-9]*' | cut -d: -f2 |
    awk -v from="$from" -v to="$to" '$1 >= from && $1 <= to' |
    awk 'NR > 1 { d = $1 - prev - 1000; if (d < 0) d = -d; print d } { prev = $1 }' |
    sort -n |
    awk -v name="$name" '
      { v[NR] = $1; sum += $1 }
      END {
        if (NR == 0) { print name ": no samples"; exit }
        p50 = v[int((NR - 1) * 0.50) + 1]; p99 = v[int((NR - 1) * 0.99 + 0.5) + 1]
        printf "| %s | %d | %d | %d | %d |\n", name, NR, p50, p99, v[NR]
      }'
}

echo "date:    $(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo "kernel:  $(uname -srm)"
echo "cpus:    $(nproc)"
echo "rustc:   $(rustc --version)"
echo "wrk:     $(wrk -v 2>&1 | head -1)"
echo "daemon:  http://$addr/, interval 1s, $seconds s per phase, $children extra idle processes"
sleep 5

start=$(now_ms)
sleep "$seconds"
idle=$(report "idle" "$start" "$(now_ms)")

start=$(now_ms)
wrk -t1 -c4 -d"${seconds}s" "http://$addr/metrics" >/tmp/headroom-wrk-metrics.txt &
w1=$!
wrk -t1 -c4 -d"${seconds}s" "http://$addr/api/v1/processes" >/tmp/headroom-wrk-processes.txt &
w2=$!
wait "$w1" "$w2"
loaded=$(report "wrk on /metrics + /api/v1/processes" "$start" "$(now_ms)")

echo
echo "| phase | gaps | jitter ms, median | p99 | max |"
echo "|---|---:|---:|---:|---:|"
echo "$idle"
echo "$loaded"
echo
echo "wrk /metrics:          $(grep -E 'Requests/sec' /tmp/headroom-wrk-metrics.txt)"
echo "wrk /api/v1/processes: $(grep -E 'Requests/sec' /tmp/headroom-wrk-processes.txt)"
grep -q "fast" "$log" && echo "note: the daemon switched to the fast interval during the run (pressure)" || true
