#!/usr/bin/env bash
# How fast machine-wide rules react, headroom against earlyoom on this
# machine in the same run (benches/system_reaction.rs): a hog growing as
# fast as the machine allows past "available now − 3 GiB", each contender
# in turn, 3 runs each; the swap scenario where the machine has swap (and
# HEADROOM_BENCH_SWAP=1); a PSI pressure rule (headroom alone).
#
# Installs Debian's earlyoom if it is missing (apt-get; needs root). The
# earlyoom service is not started: the bench runs its own earlyoom with
# the thresholds of each run, and stops it afterwards.
#
#   scripts/bench-earlyoom.sh
#   HEADROOM_BENCH_RUNS=5 HEADROOM_BENCH_RATE=1GiB/s scripts/bench-earlyoom.sh
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v earlyoom >/dev/null; then
  if [[ $(id -u) -ne 0 ]]; then
    echo "bench-earlyoom: earlyoom is not installed; run as root to install it (apt-get install earlyoom)" >&2
    exit 2
  fi
  echo "bench-earlyoom: installing earlyoom from Debian" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  # The package's service would start an earlyoom of its own where systemd
  # runs; stop it so that only the bench's earlyoom acts.
  apt-get install -y -qq --no-install-recommends earlyoom >/dev/null
  if command -v systemctl >/dev/null && systemctl is-active --quiet earlyoom 2>/dev/null; then
    systemctl stop earlyoom
  fi
fi
if pgrep -x earlyoom >/dev/null; then
  echo "bench-earlyoom: an earlyoom is already running (pid $(pgrep -x earlyoom | tr '\n' ' ')); stop it first" >&2
  exit 2
fi

echo "date:    $(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo "kernel:  $(uname -srm)"
echo "cpus:    $(nproc)"
echo "memory:  $(awk '/^MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo)"
echo "swap:    $(awk '/^SwapTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo)"
echo "load:    $(cut -d' ' -f1-3 /proc/loadavg)"
echo "commit:  $(git rev-parse HEAD)$(git diff --quiet HEAD || echo ' (with uncommitted changes)')"
echo
cargo bench --bench system_reaction "$@"
