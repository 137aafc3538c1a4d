#!/usr/bin/env bash
# The daemon's CPU time on an idle machine with 1000 idle processes, at the
# default interval on the embedded default config: this checkout's build
# against a previous version's, side by side, and against the floor of
# reading every process's statm once a second (benches/idle_cost.rs).
#
#   scripts/bench-idle.sh                 # previous = the merge base with main
#   BEFORE=v0.1.0 scripts/bench-idle.sh   # any revision git knows
#   HEADROOM_BENCH_SECONDS=120 scripts/bench-idle.sh
#   ISOLATE=1 scripts/bench-idle.sh       # in a pid namespace of its own
#
# On a shared machine other work creates processes all the time, which
# light ticks then list and read; ISOLATE=1 runs the bench (daemons, the
# 1000 processes and the floor) in a new pid namespace with its own /proc
# (unshare(1), needs root), the picture of an otherwise idle machine.
#
# The previous version is exported with `git archive` and built once into
# target/bench-before/<commit>/ (release profile).
set -euo pipefail
cd "$(dirname "$0")/.."

rev=${BEFORE:-$(git merge-base HEAD main 2>/dev/null || git rev-parse HEAD~1)}
commit=$(git rev-parse --verify "$rev^{commit}")
out=target/bench-before/$commit
if [[ ! -x $out/release/headroom ]]; then
  echo "building the previous version ($commit) into $out" >&2
  rm -rf "$out/src"
  mkdir -p "$out/src"
  git archive "$commit" | tar -x -C "$out/src"
  cargo build --release --locked --bin headroom \
    --manifest-path "$out/src/Cargo.toml" --target-dir "$out"
fi

echo "date:    $(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo "kernel:  $(uname -srm)"
echo "cpus:    $(nproc)"
echo "memory:  $(awk '/^MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo)"
echo "load:    $(cut -d' ' -f1-3 /proc/loadavg)"
echo "before:  $commit"
echo "after:   $(git rev-parse HEAD)$(git diff --quiet HEAD || echo ' (with uncommitted changes)')"
echo
export HEADROOM_BEFORE="$PWD/$out/release/headroom"
if [[ ${ISOLATE:-0} == 1 ]]; then
  echo "isolated: a pid namespace of its own (unshare --pid --fork --mount-proc)"
  cargo bench --bench idle_cost --no-run
  exec unshare --pid --fork --mount-proc cargo bench --bench idle_cost "$@"
fi
cargo bench --bench idle_cost "$@"
