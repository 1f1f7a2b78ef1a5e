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
#   MEMGUARD_MODES ("horovod ddp collguard grow") narrow it.
set -u
out=${1:?usage: $0 OUTDIR BUILD_DIR [PYTHON]}
build=${2:?usage: $0 OUTDIR BUILD_DIR [PYTHON]}
py=${3:-$(command -v python3)}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
nvidia-smi -L >/dev/null 2>&1 || { echo "no GPU: skipped"; exit 77; }
mod=$(ls "$build"/integration/python/mpi_lib_v2/mpi_lib_v2*.so 2>/dev/null | head -1)
[ -n "$mod" ] || { echo "$0: mpi_lib_v2 not built in $build"; exit 1; }
mkdir -p "$out/logs"
export PYTHONPATH=$root/integration/python COLLGUARD_LIB=$mod
export NCCL_NVLS_ENABLE=0 HOROVOD_GPU_OPERATIONS=NCCL
frees=${MEMGUARD_FREES:-"2048 1024 512 256 128 64"}
dtypes=${MEMGUARD_DTYPES:-"fp32 bf16"}
modes=" ${MEMGUARD_MODES:-horovod ddp collguard grow} "
res=$out/results.jsonl
: >"$res"
case1() { # MODE DTYPE FREE_MIB|none [ARGS...]
    local mode=$1 dtype=$2 free=$3 log
    shift 3
    log=$out/logs/$mode-$dtype-$free.txt
    local fa=()
    [ "$free" = none ] || fa=(--free $((free << 20)))
    timeout 90 "$py" "$here/memguard.py" --mode "$mode" --dtype "$dtype" \
        "${fa[@]}" "$@" >"$log" 2>&1
    local rc=$?
    if tail -1 "$log" | grep -q '^{'; then
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
