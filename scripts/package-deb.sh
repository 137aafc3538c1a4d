#!/usr/bin/env bash
# Build headroom's Debian package with cargo-deb: dist/headroom_VERSION-1_ARCH.deb.
#
# The package (see [package.metadata.deb] in Cargo.toml and packaging/debian/):
#   /usr/bin/headroom                       root:root 0755, the release build
#   /etc/headroom/headroom.toml             conffile, the embedded default config
#   /usr/lib/systemd/system/headroom.service  the system unit, running /usr/bin/headroom
#   /usr/share/doc/headroom/                README, the API, the Slurm notes
#   /usr/share/headroom/grafana/            the Grafana dashboard
#   /usr/share/headroom/prometheus/         the alert rules, their tests, a scrape config
# Installing enables and starts the unit where systemd runs the machine, and
# says what to do where it does not; purging deletes /var/lib/headroom and
# /var/log/headroom.
#
# The config is the embedded default, written out by the binary it ships
# with (`headroom print-config`), so it cannot drift from the defaults.
#
# Installs cargo-deb (pinned) with `cargo install` if it is missing, and
# Debian's dpkg-dev (dpkg-shlibdeps, for the Depends line) as root.
#
# Usage: scripts/package-deb.sh        prints the path of the .deb on its last line
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/debian.sh

CARGO_DEB_VERSION=3.8.0

if ! cargo deb --version 2>/dev/null | grep -qF "$CARGO_DEB_VERSION"; then
  echo "package-deb.sh: installing cargo-deb $CARGO_DEB_VERSION" >&2
  cargo install cargo-deb --locked --version "$CARGO_DEB_VERSION" >&2
fi
command -v dpkg-shlibdeps >/dev/null || debian_install package-deb.sh dpkg-dev

target_dir=${CARGO_TARGET_DIR:-target}

# The binary first, so that it can write the config it ships with.
cargo build --release --locked --bin headroom >&2
mkdir -p target/package
"$target_dir/release/headroom" print-config >target/package/headroom.toml
"$target_dir/release/headroom" check-config target/package/headroom.toml >/dev/null

mkdir -p dist
# --no-build: the binary above is the one packaged. --no-strip: the release
# profile already dropped the debug info; the symbol table it keeps names
# the functions of a backtrace.
cargo deb --no-build --no-strip --locked --output dist/ >&2
version=$("$target_dir/release/headroom" --version | awk '{ print $2 }')
arch=$(dpkg --print-architecture)
deb="dist/headroom_${version}-1_${arch}.deb"
[[ -f $deb ]] || { echo "package-deb.sh: cargo-deb did not write $deb" >&2; exit 1; }
echo "$PWD/$deb"
