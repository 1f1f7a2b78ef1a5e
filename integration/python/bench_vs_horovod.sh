#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# bench_step.py on collguard.torch and on Horovod 0.28.1's own stack
# (installed by install_horovod.sh into HOROVOD_PREFIX), 2 ranks on this
# machine, alternating ROUNDS times in one run; prints each round's
# medians, then the median of the rounds and the ratio. Not part of CI.
# usage: bench_vs_horovod.sh BUILD_DIR [ROUNDS] [HOROVOD_PREFIX]
set -euo pipefail
build=${1:?usage: $0 BUILD_DIR [ROUNDS] [HOROVOD_PREFIX]}
rounds=${2:-3}
prefix=${3:-/tmp/cg-horovod}
here=$(cd "$(dirname "$0")" && pwd)
py=/usr/bin/python3
mod=$(ls "$build"/integration/python/mpi_lib_v2/mpi_lib_v2*.so | head -1)
PYTHONPATH=$prefix/lib $py -c 'import horovod.torch' ||
    { echo "$0: no Horovod in $prefix/lib (run install_horovod.sh)"; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cg=() hv=()
for r in $(seq "$rounds"); do
    line=$(PYTHONPATH=$here COLLGUARD_LIB=$mod "$build/transport/collguard-run" \
        -np 2 -- $py "$here/bench_step.py" | grep -m1 'median step')
    echo "round $r: $line"
    cg+=("$(sed 's/.*4 KiB median step \([0-9.]*\) ms.*/\1/' <<<"$line")")
    line=$(PYTHONPATH=$prefix/lib mpirun --oversubscribe -np 2 \
        -x PYTHONPATH $py "$here/bench_step.py" --horovod | grep -m1 'median step')
    echo "round $r: $line"
    hv+=("$(sed 's/.*4 KiB median step \([0-9.]*\) ms.*/\1/' <<<"$line")")
done
$py - "${cg[*]}" "${hv[*]}" <<'EOF'
import statistics, sys
cg = [float(x) for x in sys.argv[1].split()]
hv = [float(x) for x in sys.argv[2].split()]
a, b = statistics.median(cg), statistics.median(hv)
print("1000 x 4 KiB step, median of %d rounds: collguard %.3f ms, "
      "Horovod %.3f ms: %.2fx" % (len(cg), a, b, b / a))
EOF
