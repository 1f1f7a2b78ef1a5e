#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
# The GPU programs wait for their fills before they enqueue them: every
# integration/gpu/*.c that copies host memory to the device
# (cudaMemcpyHostToDevice) and enqueues into the Horovod shim
# (cg_hvd_enqueue_) also waits for the device (cudaDeviceSynchronize,
# or cudaStreamSynchronize of the default stream). A cudaMemcpy from pageable
# memory may return before its DMA lands and the shim's stream does not
# order behind the default stream, so without the wait the engine may read
# a tensor's old bytes (seen on one H200 with 4 ranks: hvd_gpu_smoke's
# f16-sum-fused read the end of rank 3's last tensor as zeros or its
# previous step's value, on every rank). The race
# itself needs a GPU; this keeps the programs that test on one honest,
# without one. Exit 0: all wait; 1: the programs that do not, named.
#   fills_waited.py SOURCE_DIR
import os
import re
import sys

root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..", "..")
gpu = os.path.join(root, "integration", "gpu")
strip = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)  # comments say anything
bad, seen = [], 0
for name in sorted(os.listdir(gpu)):
    if not name.endswith(".c"):
        continue
    with open(os.path.join(gpu, name), encoding="utf-8") as f:
        src = strip.sub("", f.read())
    if "cudaMemcpyHostToDevice" not in src or "cg_hvd_enqueue_" not in src:
        continue
    seen += 1
    if not re.search(r"\bcudaDeviceSynchronize\s*\(|\bcudaStreamSynchronize"
                     r"\s*\(\s*(0|NULL|cudaStreamLegacy)\s*\)", src):
        bad.append(name)
if seen == 0:
    print("fills_waited: no GPU program found under %s" % gpu)
    sys.exit(1)
for name in bad:
    print("integration/gpu/%s: fills CUDA tensors by cudaMemcpy and "
          "enqueues them without waiting for the device "
          "(cudaDeviceSynchronize after the fills; include/collguard/"
          "hvd.h: inputs ready at enqueue)" % name)
print("fills_waited: %d program(s) checked, %d without the wait"
      % (seen, len(bad)))
sys.exit(1 if bad else 0)
