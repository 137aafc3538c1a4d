#!/usr/bin/env bash
# Build a statically linked Linux binary of headroom (musl) and its tarball:
#   dist/headroom-VERSION-x86_64-linux-musl.tar.gz  (headroom, README.md, the
#       default config as headroom.toml, the systemd unit, the dashboard and
#       the alert rules)
#   dist/SHA256SUMS                                 (sha256sum -c checks it)
# and check that the binary runs here and links nothing at run time.
#
# A static binary has no dynamic loader, so it cannot load NVIDIA's
# libnvidia-ml.so.1: the GPU collector of this build reports that (in
# `headroom doctor`, the log and the metrics) and the rest works as in the
# glibc build. For GPU memory use the .deb (scripts/package-deb.sh), the
# container image or a build from source.
#
# Installs the musl target with rustup and Debian's musl-tools (musl-gcc, for
# the C parts of dependencies) where they are missing.
#
# Usage: scripts/package-static.sh   prints the tarball's path on its last line
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/debian.sh

target=x86_64-unknown-linux-musl
if [[ $(uname -m) != x86_64 || $(uname -s) != Linux ]]; then
  echo "package-static.sh: builds $target on an x86_64 Linux machine only (this is $(uname -sm))" >&2
  exit 2
fi
if ! rustup target list --installed | grep -qx "$target"; then
  rustup target add "$target" >&2
fi
command -v musl-gcc >/dev/null || debian_install package-static.sh musl-tools

target_dir=${CARGO_TARGET_DIR:-target}
# musl's target links its own libc statically (crt-static is its default).
CC_x86_64_unknown_linux_musl=musl-gcc \
  cargo build --release --locked --target "$target" --bin headroom >&2
bin="$target_dir/$target/release/headroom"

# Statically linked, and it runs.
described=$(file -b "$bin")
case $described in
  *"statically linked"* | *"static-pie linked"*) ;;
  *)
    echo "package-static.sh: $bin is not statically linked: $described" >&2
    exit 1
    ;;
esac
# No shared library asked for (glibc's ldd says "statically linked" and
# exits 0 for a static-pie binary: look for what it would resolve instead).
if ldd "$bin" 2>&1 | grep -q '=>'; then
  echo "package-static.sh: $bin needs shared libraries:" >&2
  ldd "$bin" >&2
  exit 1
fi
version=$("$bin" --version | awk '{ print $2 }')
"$bin" snapshot >/dev/null
"$bin" doctor >/dev/null || {
  echo "package-static.sh: '$bin doctor' failed; its report:" >&2
  "$bin" doctor >&2 || true
  exit 1
}

name="headroom-$version-x86_64-linux-musl"
stage="target/package/$name"
rm -rf "$stage"
mkdir -p "$stage" dist
install -m 0755 "$bin" "$stage/headroom"
"$bin" print-config >"$stage/headroom.toml"
install -m 0644 README.md packaging/debian/headroom.service dashboards/headroom.json \
  prometheus/alerts.yml "$stage/"
# The unit in the tarball runs /usr/bin/headroom: install the binary there
# (root:root 0755) for it to work as it is.
tar -C target/package --owner=0 --group=0 --numeric-owner --sort=name \
  -czf "dist/$name.tar.gz" "$name"
# SHA256SUMS covers every release file in dist/ (the .deb too, if built).
(
  cd dist
  shopt -s nullglob
  sha256sum -- headroom-*.tar.gz headroom_*.deb >SHA256SUMS
  sha256sum -c SHA256SUMS >&2
)
echo "static: $(stat -c %s "$bin") bytes, $described" >&2
echo "$PWD/dist/$name.tar.gz"
