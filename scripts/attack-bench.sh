#!/usr/bin/env bash
# The attacks of tests/environment/attacks.rs on the release daemon, as root, with the
# figures as a table: for each flood, the daemon's peak memory (VmHWM) and
# its reaction to a hog crossing a SIGTERM rule (MiB past the limit when
# signalled, ms from crossing to signal), first with no attack and then
# during the attack, on the same daemon in the same run. "none" means the
# hog was never signalled. The test's full output is kept in
# target/attack-bench/.
#
# Needs root (the attacks are an unprivileged user's, against a root
# daemon); creates the users headroom-test and headroom-test-regular if
# missing. Exits with the test's status: 0 when every attack was withstood.
#
# Usage, from anywhere:  scripts/attack-bench.sh [TEST-NAME-START]
# (e.g. huge_argv: the attack tests whose names start so)
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ $(id -u) -ne 0 ]]; then
  echo "attack-bench.sh: run as root: the attacks need a root daemon and a second user" >&2
  exit 2
fi

filter=${1:-}
out=target/attack-bench
mkdir -p "$out"
log="$out/$(date -u +%Y%m%dT%H%M%SZ).log"
cmd=(cargo test --release --locked --test environment -- --nocapture --test-threads=1 "attacks::$filter")

cargo build --release --locked --bin headroom --example headroom-hog
echo "running: ${cmd[*]}"
status=0
"${cmd[@]}" 2>&1 | tee "$log" || status=$?

echo
echo "command: ${cmd[*]}"
echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo), $(uname -r)"
awk -F'\t' '
  function get(key,   i, kv) {
    for (i = 3; i <= NF; i++) { split($i, kv, "="); if (kv[1] == key) return kv[2] }
    return "-"
  }
  BEGIN {
    printf "%-38s %10s %10s %10s %10s %9s %9s\n", "attack", "HWM base", "HWM attack", \
      "MiB past", "MiB past", "ms to", "ms to"
    printf "%-38s %10s %10s %10s %10s %9s %9s\n", "", "(MiB)", "(MiB)", "base", "attack", \
      "signal", "signal"
    printf "%-38s %10s %10s %10s %10s %9s %9s\n", "", "", "", "", "", "base", "attack"
  }
  $1 == "attack-figures" {
    printf "%-38s %10s %10s %10s %10s %9s %9s\n", $2, get("hwm_base_mib"), get("hwm_attack_mib"), \
      get("past_base_mib"), get("past_attack_mib"), get("ms_base"), get("ms_attack")
  }
' "$log"
echo
# The names of the failed tests, and the summary.
awk '/^failures:$/ { n++ } n == 2 && /^    [a-z_0-9]+$/ { print "FAILED:" $0 } /^test result:/' "$log"
echo "full output: $log"
exit "$status"
