#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The memory-guard benchmark (one GPU, 1 rank): for fp32 and bf16
# gradients of a 350M-parameter transformer and each free size F (none,
# 2 GiB ... 64 MiB), Horovod's defaults, DDP's defaults and collguard
# (NCCL backend), each case in a fresh process (memguard.py); then a
# ballast growing under collguard until the early warning fires. Writes
# OUTDIR/results.jsonl, OUTDIR/table.md, OUTDIR/memguard.png and each
# case's log under OUTDIR/logs/. Exit 0: every target met; 77: no GPU.
# usage: integration/gpu/memguard/run.sh OUTDIR BUILD_DIR [PYTHON]
#   MEMGUARD_FREES="2048 1024 ..." (MiB), MEMGUARD_DTYPES and
#   MEMGUARD_MODES ("horovod ddp collguard grow") narrow it;
#   MEMGUARD_RANKS=N (default 1) runs every case on N ranks under
#   collguard-run, a rank per GPU (the ballast leaves F free on each), and
#   records rank 0's figures with every rank's outcome (issue 17);
#   MEMGUARD_DEVICE=cpu with MEMGUARD_SCALE=16 is a dry run without a GPU
#   (no ballast: MEMGUARD_FREES="").
set -u
out=${1:?usage: $0 OUTDIR BUILD_DIR [PYTHON]}
build=${2:?usage: $0 OUTDIR BUILD_DIR [PYTHON]}
py=${3:-$(command -v python3)}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
nranks=${MEMGUARD_RANKS:-1}
device=${MEMGUARD_DEVICE:-auto}
scale=${MEMGUARD_SCALE:-1}
if [ "$device" != cpu ]; then
    nvidia-smi -L >/dev/null 2>&1 || { echo "no GPU: skipped"; exit 77; }
fi
mod=$(ls "$build"/integration/python/mpi_lib_v2/mpi_lib_v2*.so 2>/dev/null | head -1)
[ -n "$mod" ] || { echo "$0: mpi_lib_v2 not built in $build"; exit 1; }
mkdir -p "$out/logs"
export PYTHONPATH=$root/integration/python COLLGUARD_LIB=$mod
export NCCL_NVLS_ENABLE=0 HOROVOD_GPU_OPERATIONS=${HOROVOD_GPU_OPERATIONS:-NCCL}
frees=${MEMGUARD_FREES-"2048 1024 512 256 128 64"}
dtypes=${MEMGUARD_DTYPES:-"fp32 bf16"}
modes=" ${MEMGUARD_MODES:-horovod ddp collguard grow} "
res=$out/results.jsonl
: >"$res"
merge() { # LOG MODE DTYPE FREE_BYTES|null: every rank's last JSON line ->
          # rank 0's record, completed/exact over all ranks, each rank's
          # own GPU peak
    "$py" - "$1" "$nranks" "$2" "$3" "$4" <<'PYEOF'
import json, re, sys
recs = {}
for line in open(sys.argv[1], errors="replace"):
    m = re.match(r"^\[(\d+)\] (\{.*\})\s*$", line)
    if m:
        recs[int(m.group(1))] = json.loads(m.group(2))
n = int(sys.argv[2])
base = dict(recs.get(0) or {"completed": False, "oom": False})
base.setdefault("mode", sys.argv[3])
base.setdefault("dtype", sys.argv[4])
base.setdefault("free_req", json.loads(sys.argv[5]))
missing = [r for r in range(n) if r not in recs]
if missing:
    base["completed"] = False
    base.setdefault("error", "rank(s) %s printed no result" % missing)
else:
    base["completed"] = all(recs[r].get("completed") for r in range(n))
    ex = [recs[r].get("exact") for r in range(n)]
    base["exact"] = False if False in ex else (None if None in ex else True)
    errs = [recs[r].get("max_rel_err") for r in range(n)]
    if all(e is not None for e in errs):
        base["max_rel_err"] = max(errs)
    base["oom"] = any(recs[r].get("oom") for r in range(n))
    for r in range(n):
        if not recs[r].get("completed") and "error" in recs[r]:
            base["error"] = "rank %d: %s" % (r, recs[r]["error"])
            break
base["rank_peaks"] = [sum(((recs.get(r) or {}).get("collguard") or {})
                          .get("device_peak_bytes", {}).values())
                      for r in range(n)]
base["ranks"] = n
print(json.dumps(base))
PYEOF
}

case1() { # MODE DTYPE FREE_MIB|none [ARGS...]
    local mode=$1 dtype=$2 free=$3 log
    shift 3
    log=$out/logs/$mode-$dtype-$free.txt
    local fa=()
    [ "$free" = none ] || fa=(--free $((free << 20)))
    local cmd=("$py" "$here/memguard.py" --mode "$mode" --dtype "$dtype"
               --device "$device" --scale "$scale" "${fa[@]}" "$@")
    if [ "$nranks" -gt 1 ]; then
        MASTER_PORT=$((29500 + RANDOM % 2000)) timeout 150 \
            "$build/transport/collguard-run" -np "$nranks" --timeout 140s \
            -- "${cmd[@]}" >"$log" 2>&1
    else
        timeout 90 "${cmd[@]}" >"$log" 2>&1
    fi
    local rc=$?
    if [ "$nranks" -gt 1 ]; then # "[r] {...}" lines: one record
        merge "$log" "$mode" "$dtype" \
            "$([ "$free" = none ] && echo null || echo $((free << 20)))" >>"$res"
    elif tail -1 "$log" | grep -q '^{'; then
        tail -1 "$log" >>"$res"
    else # killed or crashed before printing: still a row
        printf '{"mode":"%s","dtype":"%s","free_req":%s,"completed":false,'`
               `'"oom":false,"error":"exit %d: %s"}\n' "$mode" "$dtype" \
            "$([ "$free" = none ] && echo null || echo $((free << 20)))" \
            "$rc" "$(tail -1 "$log" | tr -d '"\\' | cut -c1-150)" >>"$res"
    fi
    printf '%-10s %-5s %-5s %s\n' "$mode" "$dtype" "$free" \
        "$(tail -1 "$res" | "$py" -c 'import json,sys; c=json.load(sys.stdin);
print("ok %.2f ms" % c["step_ms_median"] if c.get("completed") else
      "FAILED " + c.get("error", "")[:100])')"
}
for dtype in $dtypes; do
    for mode in horovod ddp collguard; do
        [[ $modes == *" $mode "* ]] || continue
        for free in none $frees; do
            case1 $mode $dtype $free
        done
    done
done
[[ $modes == *" grow "* ]] && case1 grow fp32 4096
"$py" "$here/report.py" "$res" "$out"
