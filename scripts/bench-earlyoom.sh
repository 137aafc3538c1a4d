#!/usr/bin/env bash
# How fast machine-wide rules react, headroom against earlyoom on this
# machine in the same run (benches/system_reaction.rs): a hog growing as
# fast as the machine allows past "available now − 3 GiB", each contender
# in turn, 3 runs each; the swap and thrash scenarios where the machine has
# swap (and HEADROOM_BENCH_SWAP=1); a PSI pressure rule (headroom alone).
#
# With HEADROOM_BENCH_SWAPFILE=SIZE (e.g. 4G) the script provides the swap
# itself: a swap file of SIZE in HEADROOM_BENCH_SWAPDIR (default /var/tmp,
# which must be a file system that takes swap files: ext4, xfs), switched on
# for the run and always switched off and removed when the script ends,
# however it ends; it sets HEADROOM_BENCH_SWAP=1. Needs root.
#
# Installs Debian's earlyoom if it is missing (apt-get; needs root). The
# earlyoom service is not started: the bench runs its own earlyoom with
# the thresholds of each run, and stops it afterwards.
#
#   scripts/bench-earlyoom.sh
#   HEADROOM_BENCH_RUNS=5 HEADROOM_BENCH_RATE=1GiB/s scripts/bench-earlyoom.sh
#   HEADROOM_BENCH_SWAPFILE=4G HEADROOM_BENCH_ONLY=swap,thrash scripts/bench-earlyoom.sh
set -euo pipefail
cd "$(dirname "$0")/.."

swapfile=""
bench_pid=""
stop_bench() {
  [[ -n $bench_pid ]] || return 0
  kill -TERM "$bench_pid" 2>/dev/null || true
  wait "$bench_pid" 2>/dev/null || true
}
remove_swapfile() {
  [[ -n $swapfile ]] || return 0
  # The bench's children may still be giving their memory back: swapoff
  # needs room for what is in swap, so try a few times.
  for _ in 1 2 3 4 5; do
    grep -q "^$swapfile " /proc/swaps || break
    swapoff "$swapfile" 2>/dev/null && break
    sleep 2
  done
  if grep -q "^$swapfile " /proc/swaps; then
    echo "bench-earlyoom: swapoff $swapfile failed; run it by hand, then rm $swapfile" >&2
  fi
  if ! grep -q "^$swapfile " /proc/swaps; then
    rm -f "$swapfile"
  fi
  swapfile=""
}

if [[ -n ${HEADROOM_BENCH_SWAPFILE:-} ]]; then
  if [[ $(id -u) -ne 0 ]]; then
    echo "bench-earlyoom: HEADROOM_BENCH_SWAPFILE needs root (mkswap, swapon); run with sudo" >&2
    exit 2
  fi
  size=$HEADROOM_BENCH_SWAPFILE
  if ! [[ $size =~ ^[0-9]+[KMG]$ ]]; then
    echo "bench-earlyoom: HEADROOM_BENCH_SWAPFILE=$size: give a size like 4G or 512M" >&2
    exit 2
  fi
  dir=${HEADROOM_BENCH_SWAPDIR:-/var/tmp}
  swapfile="$dir/headroom-bench-$$.swap"
  # Removed on every way out: normal end, error, Ctrl-C, SIGTERM (the
  # bench is stopped first; its children die with it).
  trap remove_swapfile EXIT
  trap 'stop_bench; exit 130' INT
  trap 'stop_bench; exit 143' TERM
  if ! fallocate -l "$size" "$swapfile" 2>/dev/null; then
    rm -f "$swapfile"
    # File systems without fallocate: write it out.
    count=${size%[KMG]}
    case $size in
      *K) bs=1K ;;
      *M) bs=1M ;;
      *G) bs=1G ;;
    esac
    if ! dd if=/dev/zero of="$swapfile" bs="$bs" count="$count" status=none; then
      echo "bench-earlyoom: cannot write a $size swap file at $swapfile (disk full? set HEADROOM_BENCH_SWAPDIR)" >&2
      exit 2
    fi
  fi
  chmod 600 "$swapfile"
  mkswap -q "$swapfile" >/dev/null
  if ! err=$(swapon "$swapfile" 2>&1); then
    echo "bench-earlyoom: swapon $swapfile was refused: $err" >&2
    echo "bench-earlyoom: swap files need a file system that takes them (ext4, xfs; not tmpfs, overlayfs or" >&2
    echo "bench-earlyoom: btrfs without nocow) and the right to swapon (a container may not have it);" >&2
    echo "bench-earlyoom: set HEADROOM_BENCH_SWAPDIR to a directory on another file system" >&2
    exit 2
  fi
  export HEADROOM_BENCH_SWAP=1
  echo "swap file: $swapfile ($size), removed at the end"
fi

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
# Not exec, and waited for in the background: the traps above stop the
# bench at once on a signal (it dies with cargo, and its children with it)
# and remove the swap file once it has ended.
cargo bench --bench system_reaction "$@" &
bench_pid=$!
wait "$bench_pid"
