#!/usr/bin/env bash
# Type-check headroom's macOS code from a Linux machine.
#
# headroom's macOS sampler talks to Mach, libc and IOKit. Without a Mac at hand
# we still want the compiler to check every name, type and signature in that
# code, so this script runs `cargo check` for aarch64-apple-darwin (Apple
# Silicon) and x86_64-apple-darwin (Intel), and `cargo doc` with -D warnings
# for the first, so that links in macOS-only docs resolve. Nothing is linked
# or run.
#
# rustup cannot fetch the Apple standard library here, so the script builds it
# from source with cargo's -Zbuild-std, using Debian's rustc-web, cargo-web and
# rust-web-src packages (rust-web-src ships the source of std). RUSTC_BOOTSTRAP=1
# lets that stable compiler accept the unstable flag. The first run installs
# the packages (needs root and apt) and takes a few minutes; later runs reuse
# target/mac-check.
#
# On a Mac this script is not needed: `cargo check` and `cargo test` run natively.
#
# Usage, from the repository root:
#   scripts/mac-check.sh            # lib, bin, tests and benches, both Apple targets
#   MAC_TARGETS=aarch64-apple-darwin scripts/mac-check.sh
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ $(uname -s) == Darwin ]]; then
  echo "mac-check: on macOS; run 'cargo check --all-targets' natively instead" >&2
  exec cargo check --all-targets
fi

missing=()
[[ -x /usr/bin/rustc ]] || missing+=(rustc-web)
[[ -x /usr/bin/cargo ]] || missing+=(cargo-web)
[[ -d /usr/lib/rustlib/src/rust/library ]] || missing+=(rust-web-src)
if (( ${#missing[@]} )); then
  if [[ $(id -u) -ne 0 ]] || ! command -v apt-get >/dev/null; then
    echo "mac-check: need Debian packages ${missing[*]}; install them with: sudo apt-get install ${missing[*]}" >&2
    exit 2
  fi
  echo "mac-check: installing ${missing[*]} from Debian (first run only)" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq "${missing[@]}" >/dev/null
fi

targets=${MAC_TARGETS:-"aarch64-apple-darwin x86_64-apple-darwin"}
failed=()
for target in $targets; do
  echo "mac-check: cargo check --all-targets --target $target" >&2
  # Debian's compiler differs from the rustup one: a separate target dir keeps
  # the two from throwing away each other's build artifacts.
  if ! RUSTC=/usr/bin/rustc RUSTDOC=/usr/bin/rustdoc RUSTC_BOOTSTRAP=1 \
      CARGO_TARGET_DIR="${MAC_CHECK_TARGET_DIR:-target/mac-check}" \
      /usr/bin/cargo check -q --all-targets \
      -Zbuild-std=std,panic_abort,test,proc_macro --target "$target"; then
    failed+=("$target")
  fi
done

# The docs of the code only macOS compiles: its intra-doc links resolve only
# where it is built, so scripts/test.sh's `cargo doc` on Linux cannot see
# them. One target is enough: both compile the same macOS items.
doc_target=${targets%% *}
echo "mac-check: cargo doc -D warnings --target $doc_target" >&2
if ! RUSTC=/usr/bin/rustc RUSTDOC=/usr/bin/rustdoc RUSTC_BOOTSTRAP=1 \
    RUSTDOCFLAGS="-D warnings" \
    CARGO_TARGET_DIR="${MAC_CHECK_TARGET_DIR:-target/mac-check}" \
    /usr/bin/cargo doc -q --no-deps --document-private-items --lib --bins \
    -Zbuild-std=std,panic_abort,test,proc_macro --target "$doc_target"; then
  failed+=("$doc_target (cargo doc)")
fi

if (( ${#failed[@]} )); then
  echo "mac-check: FAILED for ${failed[*]}" >&2
  exit 1
fi
echo "mac-check: ok ($targets)"
