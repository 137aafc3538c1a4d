#!/usr/bin/env bash
# Soak headroom under churn and load for DURATION: the release daemon,
# sampling every 250 ms, while a few hundred short-lived processes with odd
# names start and exit every second, headroom-hog grows to 256 MiB and
# frees it over and over, and two wrk's hammer /metrics and
# /api/v1/processes (tests/environment/soak.rs says how). Prints the report (samples,
# sample duration and interval jitter percentiles, HTTP errors, RSS growth,
# collector errors, panics), keeps it in target/soak/, and exits 1 if a goal
# is missed: no panic, no HTTP error, p99 jitter under 50 ms, RSS growth
# after warm-up under 2 MiB.
#
# Installs wrk (Debian package) if missing.
#
# Usage, from anywhere:  scripts/soak.sh DURATION     e.g. 10m, 600s, 90
set -euo pipefail
cd "$(dirname "$0")/.."

duration=${1:-}
if [[ -z $duration ]]; then
  echo "usage: scripts/soak.sh DURATION   (e.g. 10m, 600s, or 90 for seconds)" >&2
  exit 2
fi
[[ $duration =~ ^[0-9]+$ ]] && duration="${duration}s"

source scripts/debian.sh
command -v wrk >/dev/null || debian_install soak.sh wrk

HEADROOM_SOAK_DURATION=$duration \
  cargo test --release --locked --test environment -- --nocapture --test-threads=1 soak::
