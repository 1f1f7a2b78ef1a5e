#!/usr/bin/env bash
# Runs Horovod 0.28.1's own test/parallel/test_torch.py at 2 ranks on CPU
# against collguard's mpi_lib_v2, as Horovod's Python loads it: Horovod's
# Python sources (from a Horovod git directory, not built) in a scratch
# folder with our module where Horovod's own would be.
# Usage: run_horovod_tests.sh HOROVOD_GIT_DIR MODULE_SO [SCRATCH] [pytest args]
# Needs python3-torch, python3-pytest, python3-mock, python3-cloudpickle,
# python3-psutil and Open MPI's mpirun. Nothing of Horovod is committed.
set -euo pipefail
git_dir=$1 module=$2 scratch=${3:-/tmp/cg-horovod-tests}; shift 2 || true
[ $# -gt 0 ] && shift
rm -rf "$scratch" && mkdir -p "$scratch"
git --git-dir="$git_dir" archive --format=tar v0.28.1 horovod test/parallel/test_torch.py \
    test/utils test/conftest.py | tar x -C "$scratch"
cp "$module" "$scratch/horovod/torch/"
# Horovod's build records the torch it was built against here.
/usr/bin/python3 -c "import json, torch; json.dump({'pytorch': torch.__version__}, open('$scratch/horovod/metadata.json', 'w'))"
cd "$scratch/test/parallel"
export PYTHONPATH="$scratch:$scratch/test"
exec timeout 3000 mpirun --allow-run-as-root --oversubscribe -np 2 -x PYTHONPATH \
    /usr/bin/python3 -m pytest -v -p no:cacheprovider test_torch.py "$@"
