#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# AUTO's choice of backend for CUDA tensors on a real GPU (auto_check.py
# runs the tensors and checks each job): 1 rank unconstrained picks NCCL,
# whose measured creation must be within 25% of the estimate (the check
# of nccl_cost.h's figure on this GPU); 1 rank where NCCL cannot fit
# (CG_NCCL_COST above the budget) picks COLLGUARD; 2 ranks sharing the
# GPU (an NCCL_HOSTID each, so NCCL may make a communicator at all) where
# rank 1's creation fails as out of memory (CG_FAULT_NCCL_INIT) both fall
# back to COLLGUARD, counted once on every rank; every result exact.
# Exit 0: all passed; 77: no GPU; else the failures' count.
# usage: integration/gpu/auto_check.sh BUILD_DIR [PYTHON]
set -u
build=${1:?usage: $0 BUILD_DIR [PYTHON]}
py=${2:-$(command -v python3)}
root=$(cd "$(dirname "$0")/../.." && pwd)
nvidia-smi -L >/dev/null 2>&1 || { echo "no GPU: skipped"; exit 77; }
mod=$(ls "$build"/integration/python/mpi_lib_v2/mpi_lib_v2*.so 2>/dev/null | head -1)
[ -n "$mod" ] || { echo "$0: mpi_lib_v2 not built in $build"; exit 1; }
export PYTHONPATH=$root/integration/python COLLGUARD_LIB=$mod CG_LOG_LEVEL=info
unset HOROVOD_GPU_OPERATIONS CG_GPU_OPERATIONS
failed=0
job() { # NAME NP [VAR=VALUE...]; RANK_ENV: rank_env.sh's NAME=v0,v1 lists
    local name=$1 np=$2
    shift 2
    echo "== $name"
    env "$@" "$build/transport/collguard-run" -np "$np" --timeout 300s -- \
        bash "$root/integration/gpu/rank_env.sh" \
        NCCL_HOSTID=cg-auto-0,cg-auto-1 ${RANK_ENV:-} -- \
        "$py" "$root/integration/gpu/auto_check.py" >/tmp/cg_auto_job.log 2>&1
    [ $? = 0 ] || { tail -n 20 /tmp/cg_auto_job.log; echo "!! $name failed"; failed=$((failed + 1)); }
    grep -E "^\{|hvd_gpu_auto|nccl communicator on this rank" /tmp/cg_auto_job.log | head -6
}
job "1 rank, unconstrained: NCCL, creation within 25% of the estimate" 1 \
    CG_EXPECT_BACKEND=NCCL CG_EXPECT_FALLBACKS=0 CG_EXPECT_WITHIN=0.25
job "1 rank, NCCL's cost above the budget: COLLGUARD" 1 CG_NCCL_COST=1TiB \
    CG_EXPECT_BACKEND=COLLGUARD CG_EXPECT_FALLBACKS=0
RANK_ENV=CG_FAULT_NCCL_INIT=,1 \
    job "2 ranks, rank 1's NCCL creation fails for memory: both fall back" 2 \
    CG_EXPECT_BACKEND=COLLGUARD CG_EXPECT_FALLBACKS=1
job "2 ranks, unconstrained: NCCL on both" 2 \
    CG_EXPECT_BACKEND=NCCL CG_EXPECT_FALLBACKS=0
exit $failed
