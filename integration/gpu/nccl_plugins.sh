#!/usr/bin/env bash
# On a GPU machine: a 1-rank NCCL communicator and one AllReduce with
# NCCL_NET_PLUGIN=collguard NCCL_TUNER_PLUGIN=collguard NCCL_DEBUG=INFO,
# and NCCL's own log lines showing that both plugins loaded and
# initialised and that the AllReduce ran (NCCL's COLL line besides the
# program's ALLREDUCE_OK), that collguard's net plugin lines are tagged
# NET, and that they carry no collguard prefix inside NCCL's. Exits 77
# (skipped) without a GPU.
#   integration/gpu/nccl_plugins.sh [BUILD_DIR]   (default build/)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
plugdir=$build/plugin/nccl
if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "no GPU: skipped"; exit 77
fi
cuda=${CUDA_HOME:-/usr/local/cuda}
nccl_inc=$(dirname "$(find "$cuda" /usr/include /usr/local/include -name nccl.h 2>/dev/null | head -1)")
nccl_lib=$(dirname "$(find "$cuda" /usr/lib /usr/local/lib -name 'libnccl.so*' 2>/dev/null | head -1)")
for f in libnccl-net-collguard.so libnccl-tuner-collguard.so; do
  [ -f "$plugdir/$f" ] || { echo "missing $plugdir/$f: build first"; exit 1; }
done
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
cat > "$work/allreduce1.c" <<'C'
#include <cuda_runtime.h>
#include <nccl.h>
#include <stdio.h>
#define CK(x) do { if ((x) != 0) { fprintf(stderr, "%s failed\n", #x); return 1; } } while (0)
int main(void) {
  ncclComm_t comm; int dev = 0; float *buf, host[1024];
  CK(cudaSetDevice(0));
  CK(ncclCommInitAll(&comm, 1, &dev));
  CK(cudaMalloc((void **)&buf, sizeof(host)));
  for (int i = 0; i < 1024; i++) host[i] = (float)i;
  CK(cudaMemcpy(buf, host, sizeof(host), cudaMemcpyHostToDevice));
  CK(ncclAllReduce(buf, buf, 1024, ncclFloat, ncclSum, comm, 0));
  CK(cudaStreamSynchronize(0));
  CK(cudaMemcpy(host, buf, sizeof(host), cudaMemcpyDeviceToHost));
  for (int i = 0; i < 1024; i++) if (host[i] != (float)i) { fprintf(stderr, "bad %d\n", i); return 1; }
  CK(ncclCommDestroy(comm));
  printf("ALLREDUCE_OK\n");
  return 0;
}
C
cc -O2 -o "$work/allreduce1" "$work/allreduce1.c" -I"$cuda/include" -I"$nccl_inc" \
   -L"$cuda/lib64" -L"$nccl_lib" -lnccl -lcudart -Wl,-rpath,"$nccl_lib:$cuda/lib64"
log=$work/nccl.log
# NCCL_NET=collguard makes the network its (a 1-rank job moves no bytes
# over it, but NCCL still inits the plugin and lists its devices).
# run LOG SUBSYS: the program with NCCL_DEBUG_SUBSYS=SUBSYS, output to LOG.
run() {
  env LD_LIBRARY_PATH="$plugdir:${LD_LIBRARY_PATH:-}" NCCL_NET_PLUGIN=collguard \
      NCCL_TUNER_PLUGIN=collguard NCCL_NET=collguard NCCL_DEBUG=INFO \
      NCCL_DEBUG_SUBSYS="$2" "$work/allreduce1" >"$1" 2>&1 || {
    cat "$1"; echo "FAIL: the program failed (NCCL_DEBUG_SUBSYS=$2)"; exit 1; }
}
# COLL: NCCL logs each collective it enqueues ("AllReduce: opCount ...").
run "$log" INIT,NET,TUNING,ENV,COLL
cat "$log"
# NET alone: collguard's net plugin lines are tagged NET (they show) and
# the tuner's are not (TUNING).
netlog=$work/nccl_net.log
run "$netlog" NET
fail=0
want() { if grep -Eq "$1" "${3:-$log}"; then echo "ok: $2"; else echo "FAIL: $2"; fail=1; fi; }
wantnot() { if grep -Eq "$1" "${3:-$log}"; then echo "FAIL: $2"; fail=1; else echo "ok: $2"; fi; }
want 'NET/Plugin: Loaded net plugin collguard \(v11\)' "NCCL loaded the net plugin (v11)"
want 'Initialized NET plugin collguard' "NCCL initialised it"
want 'Using network collguard' "NCCL uses the collguard network"
want 'net plugin collguard: [0-9]+ device' "the net plugin initialised (its own line through NCCL's logger)"
want 'TUNER/Plugin: Using collguard \(v5\)' "NCCL loaded the tuner plugin (v5)"
want 'tuner plugin collguard: probe' "the tuner initialised"
want 'ALLREDUCE_OK' "the AllReduce ran and was correct"
want 'NCCL INFO AllReduce: opCount' "NCCL's own log shows the AllReduce (COLL)"
want 'net plugin collguard: [0-9]+ device' "collguard's net plugin lines are under NET" "$netlog"
wantnot 'tuner plugin collguard' "collguard's tuner lines are not under NET" "$netlog"
wantnot '\[collguard [-0-9]+:[0-9]+\]' "NCCL's lines carry no collguard prefix of their own"
exit $fail
