#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The GPU suite on any CUDA machine, in one call: builds collguard with
# CUDA (and UCX when given its headers), runs the GPU checks registered
# with ctest (label gpu: no CUDA context before the first CUDA tensor,
# then only on its GPU; gpu_check on 1 rank), the same context check on 2
# ranks, NCCL's buffer variables as NCCL reads them (nccl_env_check.sh),
# AUTO's choice of backend and its fallback (auto_check.sh),
# the shim's GPU smoke
# (NCCL, COLLGUARD, MPI, pinned fallback; batched copies on and off; the
# staging pipeline on and off), the correctness suite (gpu_check.sh), the
# staging-overlap benchmark, the step benchmark against NCCL's own calls,
# the memory-guard benchmark (memguard/run.sh: its table and plot in
# OUTDIR/memguard) and collguard-info; writes each step's output to OUTDIR
# and a summary table to OUTDIR/summary.txt.
# Exit 0: every step passed; 77: no CUDA device; else the failures' count.
# usage: integration/gpu/run.sh OUTDIR [BUILD_DIR] [UCX_HEADERS_DIR]
#   UCX_HEADERS_DIR: a folder with include/{ucp,uct,ucs,ucm} for a host
#   that has UCX's runtime libraries but no headers (tests/perf/ucx_runtime_pc.sh)
# Environment: GPU_SUITE_PARTS (default "smoke check bench memguard":
#   all) runs only the parts named, for machines that cap a command's time
#   (one H100, 2026-12-06: smoke 1 min, check 3.5 min, bench 20 s, memguard 7
#   min; the build, ~10 s, and collguard-info run in every call);
#   STEP_REPEAT (1) runs the step benchmark's variants that many times;
#   CG_PYTHON (the python3 on PATH) is the Python with torch the
#   memory-guard benchmark's module is built for and runs in.
set -u
out=${1:?usage: $0 OUTDIR [BUILD_DIR] [UCX_HEADERS_DIR]}
build=${2:-build-gpu}
ucx=${3:-}
cd "$(dirname "$0")/../.."
mkdir -p "$out"
if ! nvidia-smi -L >/dev/null 2>&1; then
    echo "no CUDA device: skipped"
    exit 77
fi
failed=0
: >"$out/summary.txt"
step() { # NAME CMD...: runs CMD, output to OUTDIR/NAME.txt, one summary row
    local name=$1 t0 rc
    shift
    t0=$(date +%s)
    "$@" >"$out/$name.txt" 2>&1
    rc=$?
    printf '%-28s %-8s %4ss\n' "$name" \
        "$([ $rc = 0 ] && echo ok || echo "FAIL($rc)")" \
        "$(($(date +%s) - t0))" | tee -a "$out/summary.txt"
    [ $rc = 0 ] || failed=$((failed + 1))
    return $rc
}

py=${CG_PYTHON:-$(command -v python3)}
cfg=(-DCG_WITH_UCX=OFF)
if [ -n "$ucx" ]; then
    export PKG_CONFIG_PATH=$(tests/perf/ucx_runtime_pc.sh "$ucx")
    cfg=()
fi
step build bash -c "cmake -S . -B '$build' -G Ninja -DCG_PYTHON='$py' ${cfg[*]:-} &&
                    ninja -C '$build'" || { cat "$out/build.txt" | tail -40; exit 1; }
step collguard-info "$build/plugin/collguard-info"
parts=" ${GPU_SUITE_PARTS:-smoke check bench memguard} "
for p in $parts; do
    case $p in smoke|check|bench|memguard) ;;
    *) echo "$0: GPU_SUITE_PARTS: unknown part '$p' (smoke, check, bench," \
            "memguard)" >&2
       exit 2 ;;
    esac
done
part() { [[ $parts == *" $1 "* ]]; }
if part smoke; then
step ctest-gpu bash -c "cd '$build' && ctest -L gpu --output-on-failure"
# Two ranks: NCCL needs a GPU each; on one GPU they share it through
# COLLGUARD (host-staged).
ngpu=$(nvidia-smi -L | grep -c '^GPU')
be=$([ "$ngpu" -ge 2 ] && echo NCCL || echo COLLGUARD)
step context-2-ranks env HOROVOD_GPU_OPERATIONS=$be \
    "$build/transport/collguard-run" -np 2 --timeout 120s \
    -- "$build/integration/gpu/cuda_context_check"
# NCCL's own log shows it reads the NCCL_BUFFSIZE (and, under pressure,
# NCCL_MAX_NCHANNELS) the backend exported, and a user's values kept.
step nccl-env bash integration/gpu/nccl_env_check.sh "$build"
# AUTO: NCCL where it fits (its measured creation against the estimate),
# COLLGUARD where it cannot, every rank falling back together.
step nccl-auto bash integration/gpu/auto_check.sh "$build" "$py"
step gpu-smoke bash integration/gpu/run_gpu_smoke.sh "$build" 5
# The same smoke with one cudaMemcpyAsync per tensor (batched copies off).
step gpu-smoke-unbatched env CG_GPU_BATCH_COPIES=0 \
    bash integration/gpu/run_gpu_smoke.sh "$build" 3
# The staged path one chunk at a time (the two-slot pipeline off).
step gpu-smoke-serial env CG_GPU_STAGE_PIPELINE=0 \
    bash integration/gpu/run_gpu_smoke.sh "$build" 3
fi
# The correctness suite: every dtype x op, roots, ragged allgather,
# reducescatter, fused steps, a ballast mid-run; NCCL, COLLGUARD (2 and 4
# ranks), MPI, each plain, with allocation faults, staging pipeline off.
part check && step gpu-check bash integration/gpu/gpu_check.sh "$build"
if part bench; then
# What the staging pipeline hides: 2 ranks staged through COLLGUARD,
# pipeline on and off alternating in one run.
if [ -x "$build/integration/gpu/stage_bench" ]; then
    step stage-bench env HOROVOD_GPU_OPERATIONS=COLLGUARD \
        "$build/transport/collguard-run" -np 2 --timeout 300s -- \
        "$build/integration/gpu/stage_bench"
fi
# 1000 x 4 KiB CUDA tensors: the shim (NCCL) against NCCL's own calls, in
# place and out of place, batched copies on and off, alternating.
if [ -x "$build/integration/gpu/gpu_step_bench" ]; then
    for r in $(seq "${STEP_REPEAT:-1}"); do
        for o in "" -o; do
            step "step-bench-batched${o}-$r" \
                "$build/integration/gpu/gpu_step_bench" $o
            step "step-bench-unbatched${o}-$r" env CG_GPU_BATCH_COPIES=0 \
                "$build/integration/gpu/gpu_step_bench" $o
        done
    done
    # The hand-offs between caller and background thread without the
    # busy-poll: what CG_SPIN_TIME saves per fused op.
    step step-bench-spin-off-o env CG_SPIN_TIME=0 \
        "$build/integration/gpu/gpu_step_bench" -o
fi
fi
# The memory-guard benchmark: Horovod's and DDP's defaults against the
# governor as free memory steps down (needs torch with CUDA in $py).
if part memguard; then
    if ls "$build"/integration/python/mpi_lib_v2/mpi_lib_v2*.so >/dev/null 2>&1; then
        step memguard bash integration/gpu/memguard/run.sh "$out/memguard" \
            "$build" "$py"
    else
        printf '%-28s %-8s\n' memguard "skipped: no torch module (CG_PYTHON=$py)" |
            tee -a "$out/summary.txt"
    fi
fi
cat "$out/summary.txt"
exit $failed
