#!/usr/bin/env bash
# Check the README's Quick start on a fresh Debian 12 (bookworm) root file
# system, as a new user would follow it: debootstrap a root file system,
# install what the Quick start says to have (a C compiler from Debian, Rust
# from rustup), put a clean clone of this repository's HEAD in it, and run
# the README's first two commands exactly as the README writes them (read
# from between its `<!-- quick-start: ... -->` markers, so that this script
# checks the README literally):
#
#   1. the daemon on its embedded default config: the status page it says
#      it serves must answer over HTTP; then it is stopped;
#   2. with --with-tests, the whole test suite (about 25 minutes on 2 cores).
#
# Each step is timed, and the size of the build output measured (du -sh
# target fuzz/target) after each command; a summary ends the run.
#
# The first command runs in a network namespace of its own (loopback only),
# so that the default port 9717 it binds is free whatever listens on this
# machine; the crates it builds are fetched before (cargo fetch), the one
# step of it that needs the network. The root file system's mounts (/proc,
# /sys, /dev, /dev/pts, /run, /tmp) are made in a mount namespace of their
# own: they go away with it on every path out of this script, even kill -9,
# and are unmounted on the way out besides.
#
# Needs root, debootstrap (installed with apt-get if missing), the network
# through apt's configured Debian mirror, static.rust-lang.org (rustup) and
# crates.io, and about 6 GB of disk (20 GB with --with-tests). Resolver
# settings and the certificate authorities this machine adds
# (/usr/local/share/ca-certificates) are copied in, as the network needs them.
#
# Usage: scripts/fresh-debian.sh [--with-tests] [--keep] [DIR]
#   DIR           where the root file system goes (default
#                 /var/tmp/headroom-fresh-debian); it must not exist, or be
#                 empty
#   --with-tests  also run the second command, scripts/test.sh
#   --keep        leave DIR in place afterwards (default: removed)
set -euo pipefail

usage() {
  echo "usage: scripts/fresh-debian.sh [--with-tests] [--keep] [DIR]" >&2
  exit 2
}

with_tests=0
keep=0
root=
while (($#)); do
  case $1 in
    --with-tests) with_tests=1 ;;
    --keep) keep=1 ;;
    --inner) break ;;
    -*) usage ;;
    *)
      [[ -z $root ]] || usage
      root=$1
      ;;
  esac
  shift
done

repo=$(cd "$(dirname "$0")/.." && pwd)
say() { printf '\n== %s\n' "$*"; }
die() {
  echo "fresh-debian.sh: $*" >&2
  exit 1
}

# The commands inside the root file system, as root, with a login-like
# environment; rustup's cargo on PATH once installed.
in_root() {
  chroot "$root" /usr/bin/env -i HOME=/root TERM="${TERM:-dumb}" LANG=C.UTF-8 \
    PATH=/root/.cargo/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    /bin/bash -c "$1"
}

# ---------------------------------------------------------------------------
# Inside the mount namespace: mounts, the Quick start, timings.
# ---------------------------------------------------------------------------
if [[ ${1:-} == --inner ]]; then
  root=$2
  with_tests=$3
  timings=$4
  daemon_pid=
  mounted=()
  cleanup() {
    local status=$?
    if [[ -n $daemon_pid ]] && kill -0 "$daemon_pid" 2>/dev/null; then
      kill -TERM "$daemon_pid" 2>/dev/null || true
      wait "$daemon_pid" 2>/dev/null || true
    fi
    local i
    for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
      umount -l "${mounted[i]}" 2>/dev/null || true
    done
    exit "$status"
  }
  trap cleanup EXIT
  trap 'exit 130' INT TERM

  mnt() { # mnt ARGS... TARGET
    mount "$@"
    mounted+=("${!#}")
  }
  mnt -t proc proc "$root/proc"
  mnt --rbind /sys "$root/sys"
  mount --make-rslave "$root/sys"
  mnt --rbind /dev "$root/dev"
  mount --make-rslave "$root/dev"
  mnt -t tmpfs -o mode=0755 run "$root/run"
  mnt -t tmpfs -o mode=1777 tmp "$root/tmp"
  cp -L /etc/resolv.conf "$root/etc/resolv.conf"
  # Certificate authorities this machine adds to Debian's (a company's, a
  # TLS-inspecting proxy's): the root file system reaches the network the
  # same way, so rustup and cargo must trust them too. Debian's
  # ca-certificates, installed below, adds them to its bundle.
  local_cas=(/usr/local/share/ca-certificates/*.crt)
  if [[ -e ${local_cas[0]} ]]; then
    mkdir -p "$root/usr/local/share/ca-certificates"
    cp "${local_cas[@]}" "$root/usr/local/share/ca-certificates/"
    echo "trusting this machine's own certificate authorities too: ${local_cas[*]##*/}"
  fi

  # step NAME COMMAND: run COMMAND in the root file system, timed.
  step() {
    local name=$1 started ended
    say "$name"
    started=$(date +%s)
    in_root "$2"
    ended=$(date +%s)
    printf '%s\t%s\n' "$name" "$((ended - started))" >>"$timings"
  }
  # The build output's size, in the clone.
  measure() {
    local size
    size=$(in_root 'cd /root/headroom && du -sh --total target fuzz/target 2>/dev/null | tail -n 1 | cut -f1')
    echo "build output: $size (du -sh target fuzz/target, $1)"
    printf 'build output %s\t%s\n' "$1" "$size" >>"$timings"
  }

  # What the Quick start says to have: a C compiler (Debian's
  # build-essential, as the README says), and Rust from rustup. rustup's
  # own installer script is fetched from static.rust-lang.org.
  step "prerequisites: apt install build-essential (and curl, ca-certificates, git)" \
    'export DEBIAN_FRONTEND=noninteractive; apt-get update -qq &&
     apt-get install -y -qq build-essential curl ca-certificates git >/dev/null'
  step "prerequisites: rustup (stable)" \
    'set -e; arch=$(uname -m); cd /tmp
     curl --proto "=https" --tlsv1.2 -sSf -o rustup-init \
       "https://static.rust-lang.org/rustup/dist/$arch-unknown-linux-gnu/rustup-init"
     chmod +x rustup-init && ./rustup-init -y --profile minimal --no-modify-path -q
     rustc --version; cargo --version'

  first=$(cat "$root/root/first-command")
  second=$(cat "$root/root/second-command")

  step "the first command's crates (cargo fetch)" 'cd /root/headroom && cargo fetch --locked -q'

  # The first command, in a network namespace of its own, until the status
  # page it announces answers.
  say "first command: $first"
  log=$root/root/first-command.log
  started=$(date +%s)
  unshare --net /bin/bash -c '
    ip link set lo up
    exec chroot "$1" /usr/bin/env -i HOME=/root LANG=C.UTF-8 CARGO_NET_OFFLINE=true \
      PATH=/root/.cargo/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
      /bin/bash -c "cd /root/headroom && exec $2"
  ' first-command "$root" "$first" >"$log" 2>&1 &
  daemon_pid=$!
  url=
  for _ in $(seq 1800); do
    url=$(grep -o 'status page: http://[^ ]*' "$log" | head -n 1 | cut -d' ' -f3 || true)
    [[ -n $url ]] && break
    kill -0 "$daemon_pid" 2>/dev/null || break
    sleep 1
  done
  if [[ -z $url ]]; then
    tail -n 40 "$log" >&2
    die "the first command printed no status page address (its output above, and in $log)"
  fi
  built=$(date +%s)
  echo "built and started in $((built - started)) s; it says: status page: $url"
  # The status page, fetched from inside the daemon's network namespace.
  page=$(nsenter --net --target "$daemon_pid" curl -sS --max-time 10 --retry 5 --retry-connrefused "$url")
  if ! grep -q '<title>[^<]*headroom' <<<"$page"; then
    head -c 2000 <<<"$page" >&2
    die "$url did not answer with headroom's status page"
  fi
  echo "status page: $url answered with $(wc -c <<<"$page") bytes of HTML"
  kill -INT "$daemon_pid"
  daemon_status=0
  wait "$daemon_pid" || daemon_status=$?
  daemon_pid=
  ended=$(date +%s)
  echo "stopped with Ctrl-C (SIGINT): exit $daemon_status; last lines:"
  tail -n 3 "$log"
  ((daemon_status == 0 || daemon_status == 130)) || die "the daemon exited $daemon_status on SIGINT"
  printf '%s\t%s\n' "first command: built, status page answered" "$((built - started))" >>"$timings"
  printf '%s\t%s\n' "first command: whole, until stopped" "$((ended - started))" >>"$timings"
  measure "after the first command"

  if ((with_tests)); then
    step "second command: $second" "cd /root/headroom && $second"
    measure "after the second command"
  fi
  exit 0
fi

# ---------------------------------------------------------------------------
# Outside: the root file system, the clone, the commands from the README.
# ---------------------------------------------------------------------------
[[ $(id -u) -eq 0 ]] || die "needs root (debootstrap, chroot, mounts)"
root=${root:-/var/tmp/headroom-fresh-debian}
if [[ -e $root ]] && [[ -n $(ls -A "$root" 2>/dev/null) ]]; then
  die "$root exists and is not empty; remove it or name another directory"
fi

# The README's commands, from between its markers: the first ```sh block
# after each marker, one line.
quick_start() {
  awk -v marker="$1" '
    index($0, "<!-- quick-start: " marker) == 1 { found = 1; next }
    found && /^```sh$/ { inside = 1; next }
    inside && /^```$/ { exit }
    inside { print }
  ' "$repo/README.md"
}
first=$(quick_start "first command")
second=$(quick_start "second command")
for c in "$first" "$second"; do
  [[ -n $c && $c != *$'\n'* ]] || die "README.md: each quick-start marker must be followed by one command in a \`\`\`sh block (found: '$c')"
done
grep -q 'apt install build-essential' "$repo/README.md" ||
  die "README.md's Quick start no longer says to install build-essential, which this script installs"
echo "README, first command:  $first"
echo "README, second command: $second"

# The Debian mirror apt uses here (deb822 .sources or one-line lists).
mirror=$(
  cat /etc/apt/sources.list.d/*.sources 2>/dev/null |
    awk '/^URIs:/ { uri = $2 } /^Suites:/ && / bookworm( |$)/ && uri ~ /debian\/?$/ { print uri; exit }'
)
if [[ -z $mirror ]]; then
  mirror=$(
    cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
      awk '$1 == "deb" && $3 == "bookworm" { print $2; exit }'
  )
fi
mirror=${mirror:-http://deb.debian.org/debian}

timings=$(mktemp)
cleanup_outer() {
  local status=$?
  if ((keep == 0)) && [[ -d $root ]]; then
    # Mounts live only in the inner namespace; refuse to remove through one
    # left behind all the same.
    if findmnt -rn -o TARGET | grep -q "^$root/"; then
      echo "fresh-debian.sh: mounts remain under $root; not removing it" >&2
    else
      rm -rf --one-file-system "$root"
    fi
  fi
  rm -f "$timings"
  exit "$status"
}
trap cleanup_outer EXIT

if ! command -v debootstrap >/dev/null; then
  say "apt-get install debootstrap"
  DEBIAN_FRONTEND=noninteractive apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
fi

say "debootstrap bookworm into $root from $mirror"
mkdir -p "$root"
started=$(date +%s)
debootstrap --variant=minbase bookworm "$root" "$mirror" >"$root.debootstrap.log" 2>&1 || {
  tail -n 30 "$root.debootstrap.log" >&2
  die "debootstrap failed (log: $root.debootstrap.log)"
}
rm -f "$root.debootstrap.log"
printf '%s\t%s\n' "debootstrap (minbase)" "$(($(date +%s) - started))" >>"$timings"

say "a clean clone of HEAD ($(git -C "$repo" rev-parse --short HEAD)) into $root/root/headroom"
git clone -q --no-hardlinks "$repo" "$root/root/headroom"
printf '%s\n' "$first" >"$root/root/first-command"
printf '%s\n' "$second" >"$root/root/second-command"

status=0
unshare --mount --propagation private "$repo/scripts/fresh-debian.sh" --inner "$root" "$with_tests" "$timings" || status=$?

say "times"
while IFS=$'\t' read -r name value; do
  if [[ $name == "build output "* ]]; then
    printf '%-70s %8s\n' "$name" "$value"
  else
    printf '%-70s %6d s\n' "$name" "$value"
  fi
done <"$timings"
((with_tests)) || echo "(the second command, $second, runs with --with-tests)"
((status == 0)) && say "the README's commands worked on a fresh Debian 12" ||
  echo "fresh-debian.sh: failed (exit $status), see above" >&2
exit "$status"
