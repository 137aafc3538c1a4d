#!/usr/bin/env bash
# Rebuild the seed corpus of the fuzz targets, fuzz/corpus/TARGET/, from the
# real fixtures in tests/fixtures (captured /proc files, config files, a
# daemon's journal) and from the values the unit tests use. The result is
# checked in; run this after adding a fixture. Each seed is named after what
# it is. Targets that pick a parser by their first byte get that byte in
# front of the file.
#
# Usage, from anywhere:  scripts/fuzz-corpus.sh
set -euo pipefail
cd "$(dirname "$0")/.."

corpus=fuzz/corpus
fx=tests/fixtures
# Inputs that once crashed a target (regression-*) stay.
mkdir -p "$corpus"
find "$corpus" -type f ! -name 'regression-*' -delete
mkdir -p "$corpus"/{proc_files,macos_kern,config,units,journal,http_query,kmsg,jupyter,kmsg_crash,jetsam,crash_report}

# seed TARGET NAME SELECTOR-BYTE [FILE]: the byte, then FILE (or stdin).
seed() {
  local target=$1 name=$2 byte=$3 file=${4:-/dev/stdin}
  { printf "\\x$(printf %02x "$byte")"; cat "$file"; } >"$corpus/$target/$name"
}

# --- /proc parsers (selector: see fuzz/fuzz_targets/proc_files.rs) ---------
for tree in basic nopsi; do
  seed proc_files "meminfo-$tree" 0 "$fx/proc/$tree/meminfo"
  seed proc_files "vmstat-$tree" 1 "$fx/proc/$tree/vmstat"
  seed proc_files "stat-$tree" 3 "$fx/proc/$tree/stat"
done
seed proc_files pressure-memory 2 "$fx/proc/basic/pressure/memory"
for dir in "$fx"/proc/basic/[0-9]*/; do
  pid=$(basename "$dir")
  [[ -f $dir/statm ]] && seed proc_files "statm-$pid" 4 "$dir/statm"
  [[ -f $dir/stat ]] && seed proc_files "pid-stat-$pid" 5 "$dir/stat"
  [[ -f $dir/status ]] && seed proc_files "status-$pid" 6 "$dir/status"
  [[ -f $dir/cmdline ]] && seed proc_files "cmdline-$pid" 7 "$dir/cmdline"
  [[ -f $dir/maps ]] && seed proc_files "maps-$pid" 8 "$dir/maps"
done
seed proc_files passwd 9 "$fx/proc/passwd"
seed proc_files limits 10 "$fx/proc/limits"
printf 6441 | seed proc_files pid-name 11
# Memory cgroups: /proc/[pid]/cgroup, mountinfo, the cgroup files.
printf '9:name=systemd:/\n4:memory:/process_api/94afa55c08af25b76ab7b7d1f415db95\n0::/\n' |
  seed proc_files cgroup-hybrid 12
seed proc_files mountinfo-hybrid 13 "$fx/cgroup/mountinfo-hybrid-6.18"
for f in "$fx"/cgroup/v1-2g-memory.* "$fx"/cgroup/v2-docker-memory-9000000.stat; do
  seed proc_files "cgroup-$(basename "$f")" 14 "$f"
done

# --- macOS kernel answers (even byte: KERN_PROCARGS2, odd: kinfo_proc) -----
# argc (little-endian int), exec path, NUL padding to 8 bytes, argv, env, "".
printf '\x04\x00\x00\x00/opt/homebrew/Cellar/python@3.11/3.11.9/Frameworks/Python.framework/Versions/3.11/Resources/Python.app/Contents/MacOS/Python\x00\x00\x00\x00\x00/opt/homebrew/opt/python@3.11/bin/python3.11\x00-m\x00ipykernel_launcher\x00-f=/Users/ann/Library/Jupyter/runtime/kernel-5f0c2d1e-7b1a-4c8e-9a57-3f2b8c1d9e60.json\x00PATH=/opt/homebrew/bin:/usr/bin:/bin\x00HOME=/Users/ann\x00\x00' |
  seed macos_kern procargs-jupyter-kernel 0
printf '\x02\x00\x00\x00/usr/sbin/cfprefsd\x00\x00\x00\x00\x00\x00/usr/sbin/cfprefsd\x00agent\x00' |
  seed macos_kern procargs-hidden-env 0
printf '\x01\x00\x00\x00/usr/libexec/secured\x00\x00/usr/libexec/secured\x00' |
  seed macos_kern procargs-no-read 0
# execve("/bin/sleep", ["", "5"], ["A=1"]): five padding NULs, then an empty argv[0].
printf '\x02\x00\x00\x00/bin/sleep\x00\x00\x00\x00\x00\x00\x005\x00A=1\x00\x00' |
  seed macos_kern procargs-empty-argv0 0
# An answer that filled its buffer (selector 2): the tail of a larger area.
printf '\x03\x00\x00\x00H=/Users/ann\x00PATH=/usr/bin\x00ptr_munge=\x00' |
  seed macos_kern procargs-filled-tail 2
# A kinfo_proc (648 bytes) of a Python process: pid 6441 at offset 40,
# sigcatch SIGINT at 236, p_comm "Python" at 243, ruid 501 at 392, ppid at 560
# (the offsets src/os/macos/parse/kinfo.rs pins at compile time).
kinfo=$(mktemp)
head -c 648 /dev/zero >"$kinfo"
put() { printf "$2" | dd of="$kinfo" bs=1 seek="$1" conv=notrunc status=none; }
put 0 '\x8b\x7d\x40\x67\x00\x00\x00\x00'
put 40 '\x29\x19\x00\x00'
put 236 '\x02\x00\x00\x00'
put 243 'Python'
put 392 '\xf5\x01\x00\x00'
put 560 '\xec\x18\x00\x00'
seed macos_kern kinfo-python 1 "$kinfo"
rm -f "$kinfo"

# --- config files ----------------------------------------------------------
cp src/config/default.toml "$corpus/config/default.toml"
cp "$fx"/config/valid/*.toml "$corpus/config/"
for f in "$fx"/config/invalid/*.toml; do
  cp "$f" "$corpus/config/invalid-$(basename "$f")"
done

# --- sizes, size limits, rates, durations (selector 0..3) ------------------
# unit SELECTOR KIND VALUE...: one seed per value, numbered.
unit() {
  local byte=$1 kind=$2 n=0
  shift 2
  for v in "$@"; do
    n=$((n + 1))
    printf %s "$v" | seed units "$kind-$n" "$byte"
  done
}
unit 0 size 8GiB 1.5GiB "512 MiB" 100MB 4096 0.1KiB 16777215TiB
unit 1 limit 60% 0.5% 100% 8GiB
unit 2 rate 1GiB/10s 200MiB/s 512MiB/1m "1 GiB / 1m 30s"
unit 3 duration 250ms 30s "1m 30s" 2h 1d 15m 100ms

# --- journals --------------------------------------------------------------
cp "$fx/journal/daemon-run.jsonl" "$corpus/journal/daemon-run.jsonl"
head -c -40 "$fx/journal/daemon-run.jsonl" >"$corpus/journal/daemon-run-torn.jsonl"

# --- API query strings (0 processes, 1 history, 2 events, 3 none, 4 pid) ---
printf 'sort=growth&limit=5&workload=jupyter' | seed http_query processes 0
printf 'sort=gp%%75&limit=%%31&workload=ml' | seed http_query processes-encoded 0
printf 'minutes=1440' | seed http_query history 1
printf 'since=2023-11-14T22:13:20.123Z' | seed http_query events-rfc3339 2
printf 'since=1700000000123' | seed http_query events-millis 2
printf '' | seed http_query none 3
printf '6441' | seed http_query pid 4

# --- kernel log records (a stream of /dev/kmsg records, one per line) -------
cp "$fx/kmsg/memcg-v1-oom-6.18.txt" "$corpus/kmsg/memcg-v1-oom-6.18"
# The public reports' messages, each as a bare message and as a record.
grep -v '^#' "$fx/kmsg/public-oom-messages.txt" | grep -v '^$' >"$corpus/kmsg/public-messages"
grep -v '^#' "$fx/kmsg/public-oom-messages.txt" | grep -v '^$' |
  awk '{ printf "3,%d,%d,-;%s\n", NR, NR * 1000, $0 }' >"$corpus/kmsg/public-records"

# --- kernel log crash and Xid lines (a stream of records / messages) --------
grep -v '^#' "$fx/kmsg/crashes-6.18.txt" >"$corpus/kmsg_crash/crashes-6.18"
grep -v '^#' "$fx/kmsg/crashes-arm64-6.1.txt" >"$corpus/kmsg_crash/crashes-arm64-6.1"
grep -v '^#' "$fx/kmsg/public-xid-messages.txt" | grep -v '^$' >"$corpus/kmsg_crash/public-xid-messages"

# --- log stream --style ndjson lines (one per line) ------------------------
jq -c . "$fx/jetsam/ndjson-kernel-entry.json" >"$corpus/jetsam/ndjson-kernel-entry"
grep -v '^#' "$fx/jetsam/public-memorystatus-lines.txt" | grep -v '^$' >"$corpus/jetsam/public-messages"
grep -v '^#' "$fx/jetsam/public-memorystatus-lines.txt" | grep -v '^$' |
  while IFS= read -r m; do jq -cn --arg m "$m" '{eventMessage: $m, processID: 0}'; done >"$corpus/jetsam/public-as-ndjson"

# --- macOS .ips reports (crash, JetsamEvent) --------------------------------
for f in "$fx"/ips/*.ips; do
  cp "$f" "$corpus/crash_report/$(basename "$f" .ips)"
done

# --- Jupyter (0 server file, 1 sessions answer, 2 url, 3 runtime file name) -
# jupyter_server 2.21.1's runtime file (token replaced), the classic
# Notebook's fields, and a server on a Unix socket.
printf '{\n  "base_url": "/",\n  "hostname": "127.0.0.1",\n  "password": false,\n  "pid": 13350,\n  "port": 42425,\n  "root_dir": "/tmp/jt/root",\n  "secure": false,\n  "sock": "",\n  "token": "sekrit",\n  "url": "http://127.0.0.1:42425/",\n  "version": "2.21.1"\n}' |
  seed jupyter jpserver 0
printf '{"base_url": "/jupyter/", "hostname": "localhost", "notebook_dir": "/home/ada", "password": false, "pid": 4242, "port": 8888, "secure": false, "sock": "", "token": "abc123", "url": "http://localhost:8888/jupyter/"}' |
  seed jupyter nbserver 0
printf '{"url": "", "sock": "/run/j.sock"}' | seed jupyter socket-server 0
# GET /api/sessions of jupyter_server 2.21.1 with one notebook open.
printf '[{"id": "48357285-7c78-47ed-9e94-907ba22952bb", "path": "work/train.ipynb", "name": "train.ipynb", "type": "notebook", "kernel": {"id": "e0ba03a1-6bb7-409e-a3a5-0ed5604315ad", "name": "python3", "last_activity": "2026-11-22T04:43:20.575568Z", "execution_state": "starting", "connections": 0}, "notebook": {"path": "work/train.ipynb", "name": "train.ipynb"}}]' |
  seed jupyter sessions 1
printf 'http://[::]:8888/lab-base/?token=x' | seed jupyter url-any-v6 2
printf 'http://0.0.0.0:8888/' | seed jupyter url-any-v4 2
printf 'jpserver-13350.json' | seed jupyter runtime-name 3

echo "seeds: $(find "$corpus" -type f | wc -l) files in $corpus"
