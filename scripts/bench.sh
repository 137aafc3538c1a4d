#!/usr/bin/env bash
# Run the sampling-cost benchmark and print the machine it ran on, in the
# form BENCHMARKS.md records. Extra arguments go to `cargo bench`.
#
#   scripts/bench.sh                      # 1000 idle processes, 30 iterations
#   HEADROOM_BENCH_ITERS=100 scripts/bench.sh
set -euo pipefail
cd "$(dirname "$0")/.."

echo "date:    $(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo "kernel:  $(uname -srm)"
echo "cpus:    $(nproc)"
echo "memory:  $(awk '/^MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo)"
echo "rustc:   $(rustc --version)"
echo "load:    $(cut -d' ' -f1-3 /proc/loadavg)"
echo "nofile:  $(ulimit -Sn) (soft limit on open files)"
echo
cargo bench --bench sample_cost "$@"
