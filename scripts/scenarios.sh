#!/usr/bin/env bash
# Run the scenario corpus (tests/environment/scenarios.rs: real ipykernel
# kernels doing benign and harmful ML-like work inside memory cgroups, under
# the real daemon on the embedded default rules) and print a confusion
# table: per scenario, whether headroom signalled, which signal went to whom,
# when (seconds from the start of the work) and at what cgroup usage, what
# the OOM killers did, and how long the cgroup spent at critical pressure.
#
# Critical pressure is measured as the seconds the cgroup had under 5% of
# its limit left (its usage sampled every 100 ms by the test), with the
# times it hit its limit (v1 memory.failcnt, v2 memory.events max) and the
# machine's memory stall time over the scenario (PSI /proc/pressure/memory
# `some` total; cgroup v1 has no per-cgroup PSI).
#
# Needs root (memory cgroups, a tmpfs mount) and python3 with venv (the
# kernels come from target/jupyter-venv, which scripts/jupyter-venv.sh
# makes). Takes about 8 minutes. The full output goes to
# target/scenarios.log. Exits 1 if any scenario's test failed.
#
# Usage, from anywhere:  scripts/scenarios.sh
set -uo pipefail
cd "$(dirname "$0")/.."

if [[ $(id -u) != 0 ]]; then
  echo "scenarios.sh: run as root (the scenarios make memory cgroups)" >&2
  exit 2
fi
scripts/jupyter-venv.sh || exit 2

log=target/scenarios.log
mkdir -p target
echo "scenarios.sh: running the corpus (about 8 minutes), log in $log"
status=0
cargo test --locked --test environment -- scenarios:: --test-threads=1 --nocapture >"$log" 2>&1 || status=1

echo
echo "machine: $(uname -sr), $(nproc) cores, $(awk '/MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)"
echo

# The failed tests' ids (h3_... -> H3), from cargo's failure list.
failed=$(sed -n 's/^    scenarios::\([a-z][0-9]\)_.*/\1/p' "$log" | tr 'a-z' 'A-Z' | sort -u | tr '\n' ' ')

grep -o '^.*scenario [A-Z][0-9] kind=.*$' "$log" | sed 's/^.*scenario /scenario /' |
  awk -v failed=" $failed " '
    {
      delete f
      for (i = 3; i <= NF; i++) {
        split($i, kv, "=")
        k = kv[1]
        v = substr($i, length(k) + 2)
        f[k] = v
      }
      id = $2
      harmful = f["kind"] == "harmful"
      oom = f["oom_cgroup"] + 0 > 0 || f["oom_machine"] + 0 > 0
      if (!harmful) verdict = (f["signalled"] == "no" && !oom) ? "TN" : "FP"
      else verdict = (f["signalled"] == "yes" && !oom) ? "TP" : "FN"
      test = index(failed, " " id " ") ? "FAIL" : "pass"
      first = f["signalled"] == "yes" ? f["first_signal"] " -> " f["first_target"] : "-"
      at = f["first_at_s"] == "-" ? "-" : f["first_at_s"] " s"
      usage = f["usage_at_signal_mib"] == "-" ? "-" : f["usage_at_signal_mib"] "/" f["limit_mib"]
      rows[++n] = sprintf("| %s | %s | %s | %s | %s | %s | %s | %s | %s/%s | %s | %s | %s | %s |",
        id, f["kind"], verdict, first, at, usage, f["signals"], f["peak_mib"],
        f["oom_cgroup"], f["oom_machine"], f["near_limit_s"], f["failcnt"], f["psi_some_s"], test)
      count[verdict]++
    }
    END {
      print "| id | kind | verdict | first signal | at | cgroup MiB then/limit | all signals (target@s) | peak MiB | OOM kills cgroup/machine | s under 5% room | limit hits | PSI some s | test |"
      print "|---|---|---|---|---:|---:|---|---:|---:|---:|---:|---:|---|"
      for (i = 1; i <= n; i++) print rows[i]
      printf "\nbenign: %d left alone (TN), %d signalled (FP); harmful: %d stopped in time (TP), %d missed (FN)\n",
        count["TN"], count["FP"], count["TP"], count["FN"]
    }'

if ((status != 0)); then
  echo
  echo "scenarios.sh: failed: ${failed:-see $log}(details in $log)" >&2
fi
exit "$status"
