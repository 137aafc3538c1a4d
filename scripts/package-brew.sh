#!/usr/bin/env bash
# The Homebrew formula with a real source tarball behind it:
#   dist/headroom-VERSION.tar.gz   the source of HEAD (git archive), what the
#                                  formula builds with `cargo install`
#   dist/headroom.rb               packaging/homebrew/headroom.rb with its url
#                                  and sha256 naming that tarball
# then checks that the tarball holds what the build needs (Cargo.lock for
# --locked, the sources) and, where ruby is installed, that the formula
# parses (`ruby -c`). Homebrew itself does not run here.
#
# Usage: scripts/package-brew.sh [URL-PREFIX]
#   URL-PREFIX: where the tarball will be published (the formula's url is
#   URL-PREFIX/headroom-VERSION.tar.gz); without it the url is the file
#   itself (file://…/dist/headroom-VERSION.tar.gz), for a local tap:
#     brew tap-new local/headroom
#     cp dist/headroom.rb "$(brew --repository local/headroom)/Formula/"
#     brew install local/headroom/headroom
set -euo pipefail
cd "$(dirname "$0")/.."

version=$(sed -n 's/^version *= *"\(.*\)"$/\1/p' Cargo.toml | head -n 1)
if [[ -z $version ]]; then
  echo "package-brew.sh: no version in Cargo.toml's [package]" >&2
  exit 1
fi
if ! git rev-parse --verify -q HEAD >/dev/null; then
  echo "package-brew.sh: needs a git checkout with a commit (the tarball is HEAD's source)" >&2
  exit 2
fi
if [[ -n $(git status --porcelain --untracked-files=no) ]]; then
  echo "package-brew.sh: note: the tarball is HEAD's source; uncommitted changes are not in it" >&2
fi

mkdir -p dist
name=headroom-$version
tarball=dist/$name.tar.gz
git archive --format=tar.gz --prefix="$name/" -o "$tarball" HEAD
sum=$(sha256sum "$tarball" | cut -d ' ' -f 1)
if [[ $# -ge 1 ]]; then
  url="${1%/}/$name.tar.gz"
else
  url="file://$PWD/$tarball"
fi

for needed in Cargo.toml Cargo.lock src/main.rs; do
  if ! tar -tzf "$tarball" "$name/$needed" >/dev/null 2>&1; then
    echo "package-brew.sh: $tarball lacks $name/$needed, which the formula's build needs" >&2
    exit 1
  fi
done

formula=dist/headroom.rb
awk -v url="$url" -v sum="$sum" '
  /^  url "/    { print "  url \"" url "\""; seen_url++; next }
  /^  sha256 "/ { print "  sha256 \"" sum "\""; seen_sum++; next }
  { print }
  END { if (seen_url != 1 || seen_sum != 1) exit 1 }
' packaging/homebrew/headroom.rb > "$formula" || {
  echo "package-brew.sh: packaging/homebrew/headroom.rb must have exactly one url and one sha256 line" >&2
  exit 1
}
if command -v ruby >/dev/null; then
  ruby -c "$formula" >/dev/null
else
  echo "package-brew.sh: ruby is not installed; the formula's syntax was not checked" >&2
fi
echo "package-brew.sh: $tarball (sha256 $sum)" >&2
echo "$formula"
