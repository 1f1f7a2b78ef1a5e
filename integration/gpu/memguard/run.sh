#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The memory-guard benchmark (one GPU, 1 rank): for fp32 and bf16
# gradients of a 350M-parameter transformer and each free size F (none,
# 2 GiB ... 64 MiB), Horovod's defaults, DDP's defaults and collguard
# (NCCL backend), each case in a fresh process (memguard.py); then the
# same three with the ballast before the first collective (no NCCL
# communicator made yet; collguard with HOROVOD_GPU_OPERATIONS unset, so
# AUTO chooses its backend) at F below NCCL's cost (256, 128, 64 MiB);
# then collguard host-staged against collguard over NCCL, alternating
# blocks in one process; then a ballast growing under collguard until
# the early warning fires. Writes OUTDIR/results.jsonl, OUTDIR/table.md,
# OUTDIR/memguard.png and each case's log under OUTDIR/logs/. Exit 0:
# every target met; 77: no GPU.
# usage: integration/gpu/memguard/run.sh OUTDIR BUILD_DIR [PYTHON]
#   MEMGUARD_FREES="2048 1024 ..." (MiB), MEMGUARD_DTYPES and
#   MEMGUARD_MODES ("horovod ddp collguard grow compare") narrow it;
#   MEMGUARD_FIRST_FREES (MiB, default "256 128 64"; "none" is no
#   ballast; "" skips) and MEMGUARD_FIRST_DTYPES (default fp32) the rows
#   with the ballast first; MEMGUARD_COMPARE_FREES (default "none",
#   unconstrained; "" skips) and MEMGUARD_COMPARE_DTYPES (default
#   MEMGUARD_DTYPES) host-staged against NCCL;
#   MEMGUARD_RANKS=N (default 1) runs every case on N ranks under
#   collguard-run, a rank per GPU (the ballast leaves F free on each), and
#   records rank 0's figures with every rank's outcome (issue 17);
#   MEMGUARD_DEVICE=cpu with MEMGUARD_SCALE=16 is a dry run without a GPU
#   (no ballast: MEMGUARD_FREES="" MEMGUARD_FIRST_FREES=none; the compare
#   then runs host tensors on both sides: the code, not the comparison).
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
modes=" ${MEMGUARD_MODES:-horovod ddp collguard grow compare} "
first_frees=${MEMGUARD_FIRST_FREES-"256 128 64"}
first_dtypes=${MEMGUARD_FIRST_DTYPES:-fp32}
compare_frees=${MEMGUARD_COMPARE_FREES-none}
compare_dtypes=${MEMGUARD_COMPARE_DTYPES:-$dtypes}
res=$out/results.jsonl
: >"$res"
merge() { # LOG MODE DTYPE FREE_BYTES|null EXTRA_JSON: every rank's last
          # JSON line -> rank 0's record, completed/exact over all ranks,
          # each rank's own GPU peak
    "$py" - "$1" "$nranks" "$2" "$3" "$4" "$5" <<'PYEOF'
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
for k, v in json.loads(sys.argv[6]).items():
    base.setdefault(k, v)
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

case1() { # [first] MODE DTYPE FREE_MIB|none [ARGS...]
          # first: the ballast before the first collective (collguard: AUTO)
    local tag="" extra='{}' xa=()
    if [ "$1" = first ]; then
        tag=first- extra='{"ballast_first":true}'
        xa=(--ballast-first)
        shift
        [ "$1" = collguard ] && xa+=(--gpu-operations auto)
    fi
    local mode=$1 dtype=$2 free=$3 log tmo=90
    shift 3
    [ "$mode" = compare ] && tmo=300 # six inits, host-staged steps
    log=$out/logs/$tag$mode-$dtype-$free.txt
    local fa=()
    [ "$free" = none ] || fa=(--free $((free << 20)))
    local cmd=("$py" "$here/memguard.py" --mode "$mode" --dtype "$dtype"
               --device "$device" --scale "$scale" "${fa[@]}" "${xa[@]}"
               "$@")
    if [ "$nranks" -gt 1 ]; then
        MASTER_PORT=$((29500 + RANDOM % 2000)) timeout $((tmo + 60)) \
            "$build/transport/collguard-run" -np "$nranks" \
            --timeout $((tmo + 50))s -- "${cmd[@]}" >"$log" 2>&1
    else
        timeout $tmo "${cmd[@]}" >"$log" 2>&1
    fi
    local rc=$?
    if [ "$nranks" -gt 1 ]; then # "[r] {...}" lines: one record
        merge "$log" "$mode" "$dtype" \
            "$([ "$free" = none ] && echo null || echo $((free << 20)))" \
            "$extra" >>"$res"
    elif tail -1 "$log" | grep -q '^{'; then
        tail -1 "$log" >>"$res"
    else # killed or crashed before printing: still a row
        printf '{"mode":"%s","dtype":"%s","free_req":%s,"completed":false,'`
               `'"oom":false,"error":"exit %d: %s"%s}\n' "$mode" "$dtype" \
            "$([ "$free" = none ] && echo null || echo $((free << 20)))" \
            "$rc" "$(tail -1 "$log" | tr -d '"\\' | cut -c1-150)" \
            "$([ -n "$tag" ] && echo ',"ballast_first":true')" >>"$res"
    fi
    printf '%-16s %-5s %-5s %s\n' "$tag$mode" "$dtype" "$free" \
        "$(tail -1 "$res" | "$py" -c 'import json,sys; c=json.load(sys.stdin)
a = (c.get("auto") or {}).get("gpu_backend_name")
a = "nothing (no CUDA collective)" if a == "AUTO" else a
if not c.get("completed"):
    print("FAILED " + ("at %s: " % c["phase"] if c.get("phase") else "")
          + c.get("error", "")[:100])
elif "ratio" in c:
    print("ok host-staged %.2f ms / NCCL %.2f ms = %.2fx (rounds %s)" % (
        c["staged_step_ms_mean"], c["nccl_step_ms_mean"], c["ratio"],
        " ".join("%.2f" % r for r in c["round_ratios"])))
else:
    print("ok %.2f ms" % c["step_ms_median"] +
          (" (AUTO chose %s)" % a if c.get("ballast_first") and a else ""))')"
}
t0=$SECONDS
for dtype in $dtypes; do
    for mode in horovod ddp collguard; do
        [[ $modes == *" $mode "* ]] || continue
        for free in none $frees; do
            case1 $mode $dtype $free
        done
    done
done
echo "(squeezed after the communicator: $((SECONDS - t0)) s)"
t0=$SECONDS
if [ -n "$first_frees" ]; then
    for dtype in $first_dtypes; do
        for mode in horovod ddp collguard; do
            [[ $modes == *" $mode "* ]] || continue
            for free in $first_frees; do
                case1 first $mode $dtype $free
            done
        done
    done
    echo "(ballast before the first collective: $((SECONDS - t0)) s)"
fi
t0=$SECONDS
if [[ $modes == *" compare "* ]] && [ -n "$compare_frees" ]; then
    for dtype in $compare_dtypes; do
        for free in $compare_frees; do
            case1 compare $dtype $free --rounds 3
        done
    done
    echo "(host-staged against NCCL: $((SECONDS - t0)) s)"
fi
[[ $modes == *" grow "* ]] && case1 grow fp32 4096
"$py" "$here/report.py" "$res" "$out"
