#!/bin/bash
# session 9 device run 1 (untracked)
export NCCL_NVLS_ENABLE=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 CG_SOCKET_IFNAME=lo NCCL_SOCKET_IFNAME=lo
R=$OUT/r; mkdir -p $R
nproc > $R/nproc.txt
GPU_SUITE_PARTS="check bench" STEP_REPEAT=2 timeout 480 bash integration/gpu/run.sh $R/suite build-gpu $PWD/_build_dev/ucx > $R/suite.log 2>&1
echo "suite rc $?" >> $R/suite.log
B=build-gpu/tests/perf/fusion_bench
if [ -x $B ]; then
  for np in 1 2; do
    timeout 60 mpirun --allow-run-as-root --oversubscribe -np $np --bind-to none $B -n 1 -s 4K -i 300 -w 30 -r 5 -x fsp > $R/fusion_n1_np$np.txt 2>&1
  done
else echo "no fusion_bench" > $R/fusion_missing.txt; fi
cd $OUT && tar czf r.tgz r && rm -rf r
