#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# collguard.torch's training equivalence on CUDA tensors (CG_TEST_DEVICE=
# cuda: tests/integration/python/test_training.py): 2 ranks sharing the
# machine's GPU(s) through the COLLGUARD backend (host-staged), and 1 rank
# through NCCL; rank i on GPU local rank % GPUs. Needs a build whose
# mpi_lib_v2 matches the python3 that holds torch (CG_PYTHON).
# Exit 0: both passed; 77: no GPU; else the failures' count.
# usage: integration/gpu/py_equivalence.sh BUILD_DIR [PYTHON]
set -u
build=${1:?usage: $0 BUILD_DIR [PYTHON]}
py=${2:-$(command -v python3)}
root=$(cd "$(dirname "$0")/../.." && pwd)
nvidia-smi -L >/dev/null 2>&1 || { echo "no GPU: skipped"; exit 77; }
mod=$(ls "$build"/integration/python/mpi_lib_v2/mpi_lib_v2*.so 2>/dev/null | head -1)
[ -n "$mod" ] || { echo "$0: mpi_lib_v2 not built in $build"; exit 1; }
export PYTHONPATH=$root/integration/python COLLGUARD_LIB=$mod
export CG_TEST_DEVICE=cuda NCCL_NVLS_ENABLE=0
failed=0
run() { # NAME NP VAR=VALUE...
    local name=$1 np=$2
    shift 2
    echo "== $name"
    env "$@" "$build/transport/collguard-run" -np "$np" --timeout 300s -- \
        "$py" -m pytest -q -x -p no:cacheprovider \
        "$root/tests/integration/python/test_training.py" ||
        { echo "!! $name failed"; failed=$((failed + 1)); }
}
run "CUDA tensors, 2 ranks, COLLGUARD" 2 HOROVOD_GPU_OPERATIONS=COLLGUARD
run "CUDA tensors, 1 rank, NCCL" 1 HOROVOD_GPU_OPERATIONS=NCCL
exit $failed
