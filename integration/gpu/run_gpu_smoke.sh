#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Runs the shim's GPU smoke cases from an existing build (builds nothing):
# 1 rank with HOROVOD_GPU_OPERATIONS=NCCL (NCCL cannot put two ranks on one
# GPU) and COLLGUARD, then 2 and 4 ranks with COLLGUARD (host-staged; rank
# i on GPU i % GPUs), NCCL with one rank per GPU where there are several, both again with a 16 MiB fusion threshold so the 48 MiB
# tensor runs unfused (NCCL direct / staged in 1 MiB chunks), and both on
# one rank with the GPU filled by a ballast, so the CUDA fusion buffer
# falls back to pinned host memory.
# Exit 0: every case right; 77: no CUDA device; else the failures' count.
# usage: run_gpu_smoke.sh BUILD_DIR [steps]
set -u
build=${1:?usage: $0 BUILD_DIR [steps]}
steps=${2:-5}
smoke=$build/integration/gpu/hvd_gpu_smoke
launch=$build/transport/collguard-run
for p in "$smoke" "$launch"; do
    [ -x "$p" ] || { echo "$0: $p not built" >&2; exit 1; }
done
export CG_TRANSPORT=${CG_TRANSPORT:-socket}
export CG_SOCKET_IFNAME=${CG_SOCKET_IFNAME:-lo}
export CG_LOG_LEVEL=${CG_LOG_LEVEL:-warn} CG_TIMEOUT=${CG_TIMEOUT:-60s}
failed=0

# run NAME NP VAR=VALUE... : one case, its exit status checked.
run() {
    local name=$1 np=$2 rc
    shift 2
    echo "== $name"
    if [ "$np" = 1 ]; then
        env "$@" "$smoke" "$steps"
    else
        env "$@" "$launch" -np "$np" --timeout 300s -- "$smoke" "$steps"
    fi
    rc=$?
    [ $rc = 77 ] && { echo "no CUDA device: skipped"; exit 77; }
    [ $rc = 0 ] || { echo "!! $name: exit $rc"; failed=$((failed + 1)); }
}

run "nccl, 1 rank" 1 HOROVOD_GPU_OPERATIONS=NCCL CG_LOG_LEVEL=info
run "collguard, 1 rank" 1 HOROVOD_GPU_OPERATIONS=COLLGUARD
run "collguard, 2 ranks" 2 HOROVOD_GPU_OPERATIONS=COLLGUARD
run "collguard, 4 ranks" 4 HOROVOD_GPU_OPERATIONS=COLLGUARD
run "nccl, 1 rank, fusion 16 MiB" 1 HOROVOD_GPU_OPERATIONS=NCCL \
    HOROVOD_FUSION_THRESHOLD=16M
run "collguard, 2 ranks, fusion 16 MiB, 1 MiB chunks" 2 \
    HOROVOD_GPU_OPERATIONS=COLLGUARD HOROVOD_FUSION_THRESHOLD=16M \
    CG_CHUNK_SIZE=1M
# NCCL across GPUs, one rank each (the smoke picks local rank % GPUs),
# where the machine has several.
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
if [ "${ngpu:-0}" -ge 2 ]; then
    n=$((ngpu < 4 ? ngpu : 4))
    run "nccl, $n ranks, one GPU each" "$n" HOROVOD_GPU_OPERATIONS=NCCL
    run "nccl, $n ranks, one GPU each, fusion 16 MiB" "$n" \
        HOROVOD_GPU_OPERATIONS=NCCL HOROVOD_FUSION_THRESHOLD=16M
fi
# MPI for CUDA tensors (host-staged), when mpirun is there.
if command -v mpirun >/dev/null; then
    echo "== mpi, 2 ranks (mpirun)"
    HOROVOD_GPU_OPERATIONS=MPI mpirun --allow-run-as-root --oversubscribe \
        -np 2 -x HOROVOD_GPU_OPERATIONS -x CG_TRANSPORT -x CG_SOCKET_IFNAME \
        -x CG_LOG_LEVEL -x CG_TIMEOUT "$smoke" "$steps" ||
        { echo "!! mpi: exit $?"; failed=$((failed + 1)); }
fi
# No device memory for the CUDA fusion buffer (a ballast leaves less than
# CG_FUSION_MIN): pinned host memory instead, with a warning.
run "collguard, 1 rank, pinned fusion fallback" 1 \
    HOROVOD_GPU_OPERATIONS=COLLGUARD CG_TEST_BALLAST_LEAVE=160 \
    HOROVOD_FUSION_THRESHOLD=256M CG_FUSION_MIN=256M
run "nccl, 1 rank, pinned fusion fallback" 1 \
    HOROVOD_GPU_OPERATIONS=NCCL CG_TEST_BALLAST_LEAVE=900 \
    HOROVOD_FUSION_THRESHOLD=1G CG_FUSION_MIN=1G
echo "== $failed case(s) failed"
exit $failed
