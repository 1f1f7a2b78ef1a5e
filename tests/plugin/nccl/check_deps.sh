#!/usr/bin/env bash
# The NCCL plugin libraries must not depend on libnccl or a CUDA runtime
# (NCCL loads them, often from a PyTorch with its own NCCL), must not carry
# a static CUDA runtime, and export only NCCL's plugin tables.
set -euo pipefail
fail=0
for lib in "$@"; do
  needed=$(readelf -d "$lib" | awk '/NEEDED/ {print $NF}')
  echo "$lib NEEDED: $(echo $needed | tr '\n' ' ')"
  if echo "$needed" | grep -Eq 'libnccl|libcudart|libcuda\.'; then
    echo "FAIL: $lib depends on NCCL or CUDA"; fail=1
  fi
  if ldd "$lib" | grep -Eq 'libnccl|libcudart'; then
    echo "FAIL: ldd $lib pulls in NCCL or the CUDA runtime"; fail=1
  fi
  if nm "$lib" 2>/dev/null | grep -Eq ' (cuda[A-Z]|__cudart)'; then
    echo "FAIL: $lib carries CUDA runtime code"; fail=1
  fi
  bad=$(nm -D --defined-only "$lib" | awk '{print $NF}' |
        grep -Ev '^(ncclNetPlugin_v(8|9|10|11)|ncclTunerPlugin_v[2-5])$' || true)
  if [ -n "$bad" ]; then
    echo "FAIL: $lib exports more than the plugin tables: $bad"; fail=1
  fi
done
exit $fail
