#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Installs Horovod 0.28.1 from its PyPI sdist into a scratch prefix, built
# against the system's torch (Debian's python3-torch, not the CUDA wheel
# pip would pull in) and Open MPI, CPU only, so bench_step.py --horovod can
# time Horovod's own stack beside collguard's on the same machine. Not part
# of CI (it compiles for several minutes). Needs network access to PyPI.
# usage: install_horovod.sh [PREFIX]   (default /tmp/cg-horovod)
#   then: PYTHONPATH=PREFIX/lib python3 -c 'import horovod.torch'
set -euo pipefail
prefix=${1:-/tmp/cg-horovod}
py=/usr/bin/python3
mkdir -p "$prefix/lib"
if PYTHONPATH=$prefix/lib $py -c 'import horovod.torch' 2>/dev/null; then
    echo "horovod already in $prefix/lib"
    exit 0
fi
# Debian's python3-torch has no C++ headers; Horovod's torch module needs
# them (torch/extension.h) and pybind11's.
if [ ! -f /usr/include/torch/extension.h ] ||
   [ ! -f /usr/include/pybind11/pybind11.h ]; then
    apt-get update -q && apt-get install -y -q libtorch-dev pybind11-dev
fi
export HOROVOD_WITH_PYTORCH=1 HOROVOD_WITH_MPI=1 HOROVOD_WITHOUT_GLOO=1
export HOROVOD_WITHOUT_TENSORFLOW=1 HOROVOD_WITHOUT_MXNET=1
export HOROVOD_CPU_OPERATIONS=MPI HOROVOD_GPU_OPERATIONS=
unset HOROVOD_GPU_OPERATIONS
export MAKEFLAGS=-j$(nproc)
# --no-build-isolation and --no-deps: build and run against the torch and
# cloudpickle/psutil/pyyaml already installed, never a wheel of torch.
$py -m pip install --no-build-isolation --no-deps --no-cache-dir \
    --target "$prefix/lib" horovod==0.28.1
PYTHONPATH=$prefix/lib $py -c 'import horovod.torch as h; print("horovod", h.__version__ if hasattr(h, "__version__") else "", "ok")'
