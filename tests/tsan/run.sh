#!/usr/bin/env bash
# The ThreadSanitizer stage: builds build-tsan/ (gcc, -fsanitize=thread)
# with only what its tests need and runs the tests that exercise threads
# and processes together: the engine's background thread through the
# shim (init/shutdown cycles on 1 rank, where the two threads hand work
# over by busy-polling, and on 2; the ABI check and the training demo on
# 2-4 ranks), the ring, shared-memory, broadcast, allgather and pipelined
# reduce-scatter collectives, and the NCCL net plugin harness (its second
# thread registering and listening while data moves), over sockets and
# UCX. Criterion's units cannot run under TSan here (BoxFort maps its arena
# MAP_FIXED at a random address TSan's mmap refuses, and forks the
# instrumented runner), so the units stay with the ASan+UBSan and release
# stages. No suppressions: the run is clean (a third-party report would go
# in tests/tsan.supp, each entry with its reason, passed through
# TSAN_OPTIONS=suppressions=...).
#   bash tests/tsan/run.sh            (from the repository root)
set -euo pipefail
cd "$(dirname "$0")/../.."
targets=(collguard-run hvd_cycles hvd_abi_check collguard-train-demo
         cg_allreduce_perf cg_broadcast_perf cg_allgather_perf
         cg_reducescatter_perf
         np_harness nccl-net-collguard)
tests='^(hvd_cycles_[12]ranks?|hvd_abi_collguard_run|train_demo_collguard_run'
tests+='|coll_allreduce_np[23]|coll_allreduce_ring_small|coll_broadcast_np3'
tests+='|coll_allgather_np3|coll_reducescatter_bf16_max|coll_allreduce_ucx_np3'
tests+='|nccl_net_v11_(socket|ucx))$'
cmake -S . -B build-tsan -G Ninja -DCG_SANITIZE=thread -DCG_WITH_CUDA=OFF \
      >build-tsan.configure.log 2>&1 || { cat build-tsan.configure.log; exit 1; }
ninja -C build-tsan "${targets[@]}" >build-tsan.build.log 2>&1 ||
  { tail -40 build-tsan.build.log; exit 1; }
# UCX's memory hooks (libucm) take a lock from madvise inside glibc's
# thread exit, after TSan dropped the thread's state: every run that loads
# UCX crashed there. They only keep a registration cache current, which
# the stage's UCX runs (shared memory and TCP on one host) do not need.
export UCX_MEM_MMAP_HOOK_MODE=none UCX_MEM_MALLOC_HOOKS=no
export TSAN_OPTIONS="halt_on_error=1 exitcode=66 second_deadlock_stack=1 ${TSAN_OPTIONS:-}"
cd build-tsan && ctest -R "$tests" --output-on-failure -j2
