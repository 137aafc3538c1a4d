#!/usr/bin/env bash
# Run headroom's whole test suite: formatting, lints, the API docs' links,
# the unit tests and the hermetic integration tests (plain `cargo test`),
# the environment tier of integration tests (`cargo test --test
# environment`: root, a second user, a browser, Prometheus, Jupyter,
# systemd, the soak), and (on Linux) a short run of every fuzz target and
# the macOS type-check.
#
# On a fresh Debian/Ubuntu machine it installs what the environment tier
# needs (as root, with apt-get; the tier's root tests need root too);
# elsewhere it tells you what is missing. On macOS it runs the same tests
# natively and skips the cross-check.
#
# Usage, from anywhere:  scripts/test.sh [--tidy]
#
# The whole run leaves about 4.5 GB of build output (target/, fuzz/target/)
# besides the packages it installs. With --tidy (CI passes it) each stage's
# build output is removed once that stage passes, so the peak is the largest
# stage, about 1.7 GB (the tests), rather than the sum; leave it out on a
# workstation to keep the build cache.
set -euo pipefail
cd "$(dirname "$0")/.."

tidy_stages=0
case "${1:-}" in
  "") ;;
  --tidy) tidy_stages=1 ;;
  *)
    echo "usage: scripts/test.sh [--tidy]" >&2
    exit 2
    ;;
esac

say() { printf '\n== %s\n' "$*"; }
source scripts/debian.sh

# Free space where the build output goes, in MiB.
free_mib() { df -Pm . | awk 'NR == 2 { print $4 }'; }

report_disk() {
  local free
  free=$(free_mib)
  echo "disk: ${free} MiB free for build output under $(pwd)"
  if ((free < 4096)); then
    echo "test.sh: warning: under 4 GiB free; a build may fail with 'No space left on device'." >&2
    echo "test.sh: free space, or run with --tidy to remove each stage's build output after it passes." >&2
  fi
}

# With --tidy, remove a finished stage's build output.
tidy() {
  ((tidy_stages)) || return 0
  rm -rf "$@"
  echo "tidy: removed $*; $(free_mib) MiB free"
}

# Debian packages the environment tier (tests/environment/) and the fuzz
# targets use. Each entry: "command-to-test package".
need_debian=(
  # systemd-analyze verify of the units (tests/environment/service.rs).
  "/usr/bin/systemd-analyze systemd"
  # promtool checks and a real Prometheus scraping a real daemon
  # (tests/environment/prometheus.rs).
  "/usr/bin/prometheus prometheus"
  "/usr/bin/promtool prometheus"
  # The status page in a real headless browser over WebDriver
  # (tests/environment/status_page_browser.rs).
  "/usr/bin/chromium chromium"
  "/usr/bin/chromedriver chromium-driver"
  # An unprivileged user for the root tests (tests/environment/privileges.rs,
  # attacks.rs, limits.rs, ...): useradd creates it, setpriv runs processes
  # as it, prlimit raises the attacker's file limit.
  "/usr/sbin/useradd passwd"
  "/usr/bin/setpriv util-linux"
  # The service installer where systemd is not PID 1: strace sees that it
  # writes nothing (tests/environment/service.rs).
  "/usr/bin/strace strace"
  "/usr/bin/prlimit util-linux"
  # The attacker's programs and other users' listeners (attacks.rs,
  # jupyter_lookup.rs, http_router.rs in tests/environment).
  "/usr/bin/python3 python3"
  # setfacl/getfacl: a POSIX ACL shows in the mode bits (tests/environment/permissions.rs).
  "/usr/bin/setfacl acl"
  # libFuzzer's C++ sources, built by the fuzz targets (scripts/fuzz.sh).
  "/usr/bin/c++ g++"
  # A real OCI runtime for a kernel in a container with its own pid
  # namespace (tests/environment/scenarios.rs, h6_).
  "/usr/sbin/runc runc"
  # The native library real kernels crash in (tests/environment/crash_postmortems.rs).
  "/usr/bin/cc gcc"
  # JSON seeds of the jetsam fuzz target (scripts/fuzz-corpus.sh).
  "/usr/bin/jq jq"
  # HTTP load in the soak test (tests/environment/soak.rs, scripts/soak.sh).
  "/usr/bin/wrk wrk"
  # The packages: the .deb's Depends (dpkg-shlibdeps, scripts/package-deb.sh,
  # tests/environment/package.rs), the static build's C compiler
  # (scripts/package-static.sh) and the Homebrew formula's syntax check.
  "/usr/bin/dpkg-shlibdeps dpkg-dev"
  "/usr/bin/musl-gcc musl-tools"
  "/usr/bin/ruby ruby"
  # A real terminal for `headroom top` (tests/environment/top.rs).
  "/usr/bin/tmux tmux"
)

# What need_debian lacks here, each package once (two probes may name one).
install_debian_packages() {
  local pkgs=()
  for entry in "${need_debian[@]}"; do
    read -r probe pkg <<<"$entry"
    [[ -e $probe ]] || pkgs+=("$pkg")
  done
  (( ${#pkgs[@]} )) || return 0
  mapfile -t pkgs < <(printf '%s\n' "${pkgs[@]}" | sort -u)
  debian_install test.sh "${pkgs[@]}"
}

# The notebook tests (tests/environment/jupyter.rs) run a real Jupyter server and kernel
# from a virtual environment that scripts/jupyter-venv.sh fills from PyPI;
# Debian's python3 needs python3-venv for `python3 -m venv`.
install_python_venv() {
  python3 -c 'import ensurepip, venv' 2>/dev/null || debian_install test.sh python3 python3-venv
}

ensure_rust_components() {
  if command -v rustup >/dev/null; then
    rustup component list --installed 2>/dev/null | grep -q '^rustfmt' || rustup component add rustfmt
    rustup component list --installed 2>/dev/null | grep -q '^clippy' || rustup component add clippy
  fi
}

os=$(uname -s)
ensure_rust_components
if [[ $os == Linux ]]; then
  install_debian_packages
  install_python_venv
  say "Jupyter virtual environment for the notebook tests"
  scripts/jupyter-venv.sh
fi

say "disk"
report_disk

say "cargo fmt --check"
cargo fmt --all -- --check

say "cargo clippy --all-targets -- -D warnings"
cargo clippy --all-targets --locked -- -D warnings
# The environment tier has `test = false`, so --all-targets leaves it out.
cargo clippy --test environment --locked -- -D warnings
# The fuzz targets (fuzz/, a crate of their own) call the parsers' public
# API: linted here with the stable toolchain, so that an API change fails
# in a minute rather than at the fuzz stage's sanitizer build.
cargo clippy --manifest-path fuzz/Cargo.toml --bins --locked -- -D warnings

# The API docs of the library and the binaries, private items included:
# a broken intra-doc link (an item renamed or moved), a link to an item
# cfg'd out on this OS, an ambiguous link or a bare URL fails here.
say "cargo doc -D warnings (intra-doc links)"
RUSTDOCFLAGS="-D warnings" cargo doc --locked --no-deps --document-private-items --lib --bins
tidy target/doc

# The unit tests and the hermetic tier: what any contributor's plain
# `cargo test` runs, with nothing installed.
say "cargo test (unit tests, hermetic tier)"
cargo test --locked --no-fail-fast

# The deployment files: the Kubernetes manifests against the API's schemas
# (from PyPI, offline), the kustomization, the ConfigMap's headroom.toml,
# the Containerfile's lint. kubectl, which Debian does not package, is used
# where it is installed and its step skipped, saying so, where it is not.
say "deploy/ (scripts/deploy-check.sh)"
if command -v python3 >/dev/null; then
  scripts/deploy-check.sh
else
  echo "skipped: python3 is not installed, and the checks' tools come from PyPI"
fi

# The environment tier: root, a second user and the tools installed above.
# The attacks and the soak measure the daemon's memory, reaction and
# sampling jitter, which a browser or Prometheus started beside them would
# disturb: they run after the rest, each set alone.
# labels:: runs here: its processes hold 8 MiB each and its cgroups are
# its own (one directory per test process in the memory hierarchy).
say "cargo test --test environment (all but the attacks, the soak, the thrash test and the whole-machine notebook test, the cgroup ceilings and the scenario corpus)"
env_status=0
cargo test --locked --no-fail-fast --test environment -- --skip attacks:: --skip soak:: --skip thrash:: --skip whole_machine:: --skip ceilings:: --skip scenarios:: --skip package:: || env_status=1
say "cargo test --test environment attacks::"
cargo test --locked --no-fail-fast --test environment -- attacks:: || env_status=1
say "cargo test --test environment soak::"
cargo test --locked --no-fail-fast --test environment -- soak:: || env_status=1
# A notebook cell growing toward exhausting the machine (the rule acts on
# its pace, which tests started beside it on two cores would slow), and jobs
# compared with the machine's own memory figures, which they would move.
say "cargo test --test environment whole_machine::"
cargo test --locked --no-fail-fast --test environment -- whole_machine:: || env_status=1
# Hogs growing at a set pace toward their memory cgroups' limits (a rule
# must act on that pace before the cgroup's OOM killer does), 4 GiB held at
# once, and the kernel's OOM killer made to act: alone, so that neither
# tests beside them slow the pace nor they take the memory others measure.
say "cargo test --test environment ceilings::"
cargo test --locked --no-fail-fast --test environment -- ceilings:: --test-threads=1 || env_status=1
# The scenario corpus: real kernels' benign and harmful work in memory
# cgroups under the embedded default rules, each measured against its pace
# and its cgroup's limit (scripts/scenarios.sh tabulates the same run):
# alone and one at a time, for the reasons of the ceilings above, and
# because the default rule covers every kernel on the machine.
say "cargo test --test environment scenarios::"
cargo test --locked --no-fail-fast --test environment -- scenarios:: --test-threads=1 || env_status=1
# A swap file and most of the memory locked: alone, after everything else.
say "cargo test --test environment thrash::"
cargo test --locked --no-fail-fast --test environment -- thrash:: || env_status=1
# The .deb installed on this machine with dpkg and purged: alone, since it
# takes /usr/bin/headroom, /etc/headroom and /var/lib/headroom, which root
# daemons of the tests above write to. Its release build reuses the soak's.
say "cargo test --test environment package:: (the .deb, scripts/package-deb.sh)"
cargo test --locked --no-fail-fast --test environment -- package:: || env_status=1
((env_status == 0)) || { echo "test.sh: the environment tier failed (see above)" >&2; exit 1; }

if [[ $os == Linux && $(uname -m) == x86_64 ]]; then
  # The static binary: built for musl, checked to link nothing at run time
  # and to run --version, snapshot and doctor here, tarred with SHA256SUMS.
  say "static Linux binary (scripts/package-static.sh)"
  scripts/package-static.sh
fi
# The Homebrew formula with its source tarball and checksum filled in
# (Homebrew itself does not run here): the tarball holds what the build
# needs and the formula parses (ruby -c, Debian installs ruby above).
say "Homebrew formula (scripts/package-brew.sh)"
scripts/package-brew.sh
tidy target/debug target/release target/x86_64-unknown-linux-musl dist

if [[ $os == Linux ]]; then
  # A short run of every fuzz target, so that a parser that starts to crash
  # on its seeds, or on what a few seconds of fuzzing finds, fails CI.
  say "fuzz every target for 20 s (scripts/fuzz.sh)"
  scripts/fuzz.sh 20
  tidy fuzz/target
fi

if [[ $os == Linux ]]; then
  say "macOS type-check (aarch64-apple-darwin, x86_64-apple-darwin)"
  scripts/mac-check.sh
else
  say "on $os: macOS cross-check skipped, the tests above ran natively"
fi

say "all checks passed"
