#!/usr/bin/env bash
# Check headroom's GPU figures against nvidia-smi on a machine with an NVIDIA
# GPU, and measure what the NVML collector costs per sample.
#
# Needs: the NVIDIA driver (nvidia-smi), cargo, and python3 with PyTorch
# built for CUDA. It
#   1. builds headroom (release) and the gpu_cost benchmark,
#   2. starts a Python process that allocates 8 GiB on the first GPU with
#      torch.empty(..., device="cuda"), fills it, and holds it,
#   3. runs `headroom snapshot --json` and
#      `nvidia-smi --query-compute-apps=pid,used_memory --format=csv`,
#   4. checks that headroom lists that process with GPU memory within 5 % of
#      what nvidia-smi reports, and prints the device and the figures,
#   5. runs `cargo bench --bench gpu_cost` (the collector's CPU time per
#      sample) while the memory is still held,
#   6. stops the Python process (also on failure or Ctrl-C).
#
# Exit status: 0 the figures agree, 1 they do not (or a step failed),
# 2 this machine cannot run the check.
#
# Usage, from anywhere:  scripts/gpu-check.sh
# HEADROOM_GPU_CHECK_GIB=4 allocates 4 GiB instead of 8.
set -euo pipefail
cd "$(dirname "$0")/.."

gib=${HEADROOM_GPU_CHECK_GIB:-8}
tolerance=0.05

say() { printf '\n== %s\n' "$*"; }
cannot() { echo "gpu-check: $*" >&2; exit 2; }
fail() { echo "gpu-check: FAILED: $*" >&2; exit 1; }

command -v nvidia-smi >/dev/null ||
  cannot "nvidia-smi not found: this check needs a machine with an NVIDIA GPU and its driver"
command -v cargo >/dev/null || cannot "cargo not found"
command -v python3 >/dev/null || cannot "python3 not found"
python3 -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' ||
  cannot "python3 cannot use CUDA through PyTorch (import torch; torch.cuda.is_available() is not True)"

say "machine"
echo "date:    $(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo "kernel:  $(uname -srm)"
echo "cpus:    $(nproc)"
echo "rustc:   $(rustc --version)"
echo "torch:   $(python3 -c 'import torch; print(torch.__version__, "CUDA", torch.version.cuda)')"
nvidia-smi --query-gpu=index,name,uuid,driver_version,memory.total,memory.used,memory.reserved \
  --format=csv

say "building headroom and the gpu_cost benchmark (release)"
cargo build --release --locked --bin headroom
cargo bench --locked --bench gpu_cost --no-run
bin=target/release/headroom

work=$(mktemp -d)
holder=
cleanup() {
  if [[ -n $holder ]] && kill -0 "$holder" 2>/dev/null; then
    kill "$holder" 2>/dev/null || true
    wait "$holder" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

say "allocating ${gib} GiB on cuda:0 in a Python process"
# `exec` keeps the pid: $! is the python3 process itself.
(exec python3 - "$gib" "$work/ready" <<'PY'
import sys, time
import torch

gib, ready = int(sys.argv[1]), sys.argv[2]
x = torch.empty(gib << 30, dtype=torch.uint8, device="cuda")
x.fill_(1)  # touch it: the allocation is real, not just reserved
torch.cuda.synchronize()
with open(ready, "w") as f:
    f.write(str(x.numel()))
while True:
    time.sleep(3600)
PY
) &
holder=$!
for _ in $(seq 1 240); do
  [[ -s $work/ready ]] && break
  kill -0 "$holder" 2>/dev/null || fail "the Python process exited before it held the memory"
  sleep 0.5
done
[[ -s $work/ready ]] || fail "the Python process did not allocate ${gib} GiB within 120 s"
echo "pid $holder holds $(cat "$work/ready") bytes on cuda:0"
sleep 1 # let the driver's per-process accounting settle

say "headroom snapshot --json and nvidia-smi"
"$bin" snapshot --json >"$work/snapshot.json"
nvidia-smi --query-compute-apps=pid,used_memory --format=csv >"$work/apps.csv"
cat "$work/apps.csv"

python3 - "$holder" "$tolerance" "$work/snapshot.json" "$work/apps.csv" <<'PY'
import csv, json, sys

holder, tolerance = int(sys.argv[1]), float(sys.argv[2])
snap = json.load(open(sys.argv[3]))
MIB, GIB = 1 << 20, 1 << 30

def fail(msg):
    print(f"gpu-check: FAILED: {msg}", file=sys.stderr)
    sys.exit(1)

def gib(b):
    return "?" if b is None else f"{b / GIB:.3f} GiB"

for c in snap.get("collectors", []):
    print(f"collector {c['name']}: {'up' if c['up'] else 'DOWN'}: {c['detail']}")
for note in snap.get("notes", []):
    print(f"note: {note}")
nvml = [c for c in snap.get("collectors", []) if c["name"] == "nvml"]
if not nvml or not nvml[0]["up"]:
    fail("the nvml collector is not up (see above)")
for d in snap.get("gpus", []):
    print(f"GPU {d['index']} {d['name']} {d.get('uuid')}: used {gib(d.get('memory_used'))} "
          f"of {gib(d.get('memory_total'))}, reserved {gib(d.get('memory_reserved'))}, "
          f"utilization {d.get('utilization')}, {len(d.get('processes', []))} processes listed")

# nvidia-smi: one row per pid and GPU, used_memory in MiB ("[N/A]" under MIG).
smi = {}
rows = list(csv.reader(open(sys.argv[4])))
for row in rows[1:]:
    if len(row) < 2:
        continue
    pid, used = int(row[0]), row[1].strip()
    if not used.endswith("MiB"):
        fail(f"nvidia-smi gives no figure for pid {pid}: {used!r} (MIG?)")
    smi[pid] = smi.get(pid, 0) + int(used.split()[0]) * MIB
if holder not in smi:
    fail(f"nvidia-smi does not list pid {holder}; it lists {sorted(smi)}. Inside a container "
         "the driver reports host pids: run this on the host")

proc = next((p for p in snap["processes"] if p["pid"] == holder), None)
if proc is None:
    fail(f"headroom's snapshot has no process {holder}")
ours = proc.get("gpu_memory")
theirs = smi[holder]
print(f"pid {holder} ({proc['name']}): headroom {gib(ours)} ({ours} B), "
      f"nvidia-smi {gib(theirs)} ({theirs} B)")
print(f"evidence: {proc['workload']['evidence']}, frameworks: {proc['workload']['frameworks']}")
if ours is None:
    fail(f"headroom lists pid {holder} without GPU memory")
diff = abs(ours - theirs) / theirs
print(f"difference: {diff * 100:.2f} % (allowed {tolerance * 100:.0f} %)")
if diff > tolerance:
    fail(f"headroom's {ours} B and nvidia-smi's {theirs} B differ by more than "
         f"{tolerance * 100:.0f} %")
if "cuda" not in proc["workload"]["frameworks"]:
    fail("the process holding GPU memory is not marked as CUDA work")
print("gpu-check: the figures agree")
PY

say "collector cost: cargo bench --bench gpu_cost (while ${gib} GiB are held)"
cargo bench --locked --bench gpu_cost

say "gpu-check passed"
