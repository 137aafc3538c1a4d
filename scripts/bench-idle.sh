#!/usr/bin/env bash
# The daemon's CPU time on an idle machine with 1000 idle processes, at the
# default interval on the embedded default config: this checkout's build
# against a previous version's, side by side, and against the floor of
# reading every process's statm once a second (benches/idle_cost.rs).
#
#   scripts/bench-idle.sh                 # previous = the merge base with main
#   BEFORE=v0.1.0 scripts/bench-idle.sh   # any revision git knows
#   HEADROOM_BENCH_SECONDS=120 scripts/bench-idle.sh
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
HEADROOM_BEFORE="$PWD/$out/release/headroom" cargo bench --bench idle_cost "$@"
