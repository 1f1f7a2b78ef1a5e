#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# tests/perf/fusion: steps of N allreduces of small f32 tensors through the
# Horovod shim's C enqueue API (enqueue all, then wait all) with fusion on
# and off, next to N plain MPI_Allreduce calls and one cg_allreduce of the
# fused payload, in the same run under mpirun (variants alternate in
# rounds). Prints median ms/step, steps/s, the speed-up over MPI, CPU and
# enqueue cost per tensor, and the shim's per-tensor overhead; exits
# non-zero when a checked element is wrong.
# usage: fusion.sh [-B builddir] [-N ranks] [fusion_bench options:
#                  -n tensors (1000) -s tensor bytes (4K) -i steps per round
#                  (20) -w warm-up (3) -r rounds (5) -c checked per step (4)
#                  -x fusmp (variants; s: fused with CG_SPIN_TIME=0)]
# Environment: CG_* as for any job (CG_TRANSPORT, CG_CYCLE_TIME, ...).
set -u
build=${CG_BUILD:-$(dirname "$0")/../../build} np=2
while [ $# -gt 0 ]; do
    case $1 in
    -B) build=$2; shift 2 ;;
    -N) np=$2; shift 2 ;;
    *) break ;;
    esac
done
bench=$build/tests/perf/fusion_bench
[ -x "$bench" ] || { echo "$0: $bench not built (needs MPI)" >&2; exit 1; }
exec mpirun --allow-run-as-root --oversubscribe -np "$np" --bind-to none \
    "$bench" "$@"
