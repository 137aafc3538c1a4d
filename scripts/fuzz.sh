#!/usr/bin/env bash
# Fuzz headroom's parsers of untrusted input with cargo-fuzz (libFuzzer, on
# the nightly toolchain): each target in fuzz/fuzz_targets runs for SECONDS,
# starting from the checked-in seeds in fuzz/corpus/TARGET. New inputs
# libFuzzer finds go to fuzz/target/corpus/TARGET (not checked in); a crash,
# panic, overflow, leak or hang stops that target and leaves the input in
# fuzz/artifacts/TARGET/. Prints one summary line per target and exits 1 if
# any target found something.
#
# Installs what it needs when missing: the pinned nightly toolchain
# (fuzz/rust-toolchain.toml, through rustup) and cargo-fuzz at the version
# below (cargo install --locked).
#
# Usage, from anywhere:  scripts/fuzz.sh SECONDS [TARGET...]
#   scripts/fuzz.sh 20                 every target, 20 s each (the test suite)
#   scripts/fuzz.sh 600 config units   two targets, 10 minutes each
# Reproduce a finding: cd fuzz && cargo fuzz run TARGET artifacts/TARGET/crash-…
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-}
if [[ ! $seconds =~ ^[0-9]+$ ]] || ((seconds < 1)); then
  echo "usage: scripts/fuzz.sh SECONDS [TARGET...]" >&2
  exit 2
fi
shift

# The nightly of fuzz/rust-toolchain.toml, and the cargo-fuzz known to
# build the targets with it.
toolchain=$(sed -n 's/^channel *= *"\(.*\)"$/\1/p' fuzz/rust-toolchain.toml)
if [[ ! $toolchain =~ ^nightly-[0-9]{4}-[0-9]{2}-[0-9]{2}$ ]]; then
  echo "fuzz.sh: fuzz/rust-toolchain.toml must pin a dated nightly (channel = \"nightly-YYYY-MM-DD\"), found '${toolchain}'" >&2
  exit 2
fi
cargo_fuzz_version=0.13.2
if ! rustup run "$toolchain" rustc --version >/dev/null 2>&1; then
  echo "fuzz.sh: installing the $toolchain toolchain" >&2
  rustup toolchain install "$toolchain" --profile minimal
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "fuzz.sh: installing cargo-fuzz $cargo_fuzz_version" >&2
  cargo install cargo-fuzz --locked --version "$cargo_fuzz_version"
fi
echo "fuzz.sh: $(rustup run "$toolchain" rustc --version), $(cargo fuzz --version)"

if (($#)); then
  targets=("$@")
else
  mapfile -t targets < <(cd fuzz && cargo +"$toolchain" fuzz list)
fi

# One build of every target first, so that the time limit is fuzzing time.
(cd fuzz && cargo +"$toolchain" fuzz build)

mkdir -p fuzz/target/logs
failed=()
printf '%-12s %12s %10s %8s %8s  %s\n' target runs exec/s cov corpus result
for t in "${targets[@]}"; do
  work=fuzz/target/corpus/$t
  seeds=fuzz/corpus/$t
  mkdir -p "$work" "$seeds" "fuzz/artifacts/$t"
  dict=()
  if [[ -f fuzz/dict/$t.dict ]]; then dict=("-dict=dict/$t.dict"); fi
  log=fuzz/target/logs/$t.log
  status=0
  # The first corpus directory receives new inputs; the seeds are read only.
  (cd fuzz && cargo +"$toolchain" fuzz run "$t" "target/corpus/$t" "corpus/$t" -- \
    -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    "${dict[@]}") >"$log" 2>&1 || status=$?
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -n 1 | cut -d' ' -f2 || true)
  units=$(find "$work" -type f | wc -l)
  if ((status == 0)); then
    result=ok
  else
    result="FOUND (exit $status): see $log and fuzz/artifacts/$t/"
    failed+=("$t")
  fi
  printf '%-12s %12s %10s %8s %8s  %s\n' "$t" "${runs:-?}" "${rate:-?}" "${cov:-?}" "$units" "$result"
done

if ((${#failed[@]})); then
  echo "fuzz.sh: findings in: ${failed[*]}" >&2
  for t in "${failed[@]}"; do
    echo "--- $t: last lines of fuzz/target/logs/$t.log" >&2
    tail -n 40 "fuzz/target/logs/$t.log" >&2
  done
  exit 1
fi
