# Installing what a script needs from Debian, for the scripts that source it
# (test.sh, soak.sh, bench-jitter.sh).
#
# debian_install WHO PACKAGE...: install the packages with apt-get when
# running as root on Debian or Ubuntu; anywhere else, exit 2 with the
# command to run. WHO names the script in its messages. Nothing to do
# without packages.
debian_install() {
  local who=$1
  shift
  (($#)) || return 0
  if [[ $(id -u) -ne 0 ]] || ! command -v apt-get >/dev/null; then
    echo "$who: missing $*; install them (e.g. sudo apt-get install $*)" >&2
    exit 2
  fi
  echo "$who: installing $* from Debian" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}
