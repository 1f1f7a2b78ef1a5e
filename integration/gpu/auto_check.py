# SPDX-License-Identifier: Apache-2.0
"""AUTO's backend for CUDA tensors (HOROVOD_GPU_OPERATIONS unset), one
job of integration/gpu/auto_check.sh: allreduces (fp32, bf16, f16; sum
and average; fused and alone) and broadcasts of CUDA tensors whose exact
results are known, then what AUTO chose (core_stats) against what the
job expects: CG_EXPECT_BACKEND (NCCL or COLLGUARD), CG_EXPECT_FALLBACKS,
and with NCCL, NCCL's measured creation within CG_EXPECT_WITHIN (a
fraction) of the estimate. Rank 0 prints one line of JSON; the exit
status is the number of failed checks."""
import json
import os
import sys

import torch

import collguard.torch as hvd

KINDS = {0: "COLLGUARD", 1: "MPI", 2: "NCCL", 3: "AUTO"}


def main():
    hvd.init()
    local = int(os.environ.get("CG_RUN_LOCAL_RANK", "0"))
    dev = torch.device("cuda", local % torch.cuda.device_count())
    torch.cuda.set_device(dev)
    r, n = hvd.rank(), hvd.size()
    bad = []
    before = hvd.core_stats()
    if before["gpu_backend"] != 3:
        bad.append("before any CUDA collective AUTO had chosen already (%s)"
                   % KINDS.get(before["gpu_backend"]))
    for dt in (torch.float32, torch.bfloat16, torch.float16):
        for count in (1, 1000, 300000):
            x = torch.full((count,), float(r + 1), dtype=dt, device=dev)
            handles = [hvd.allreduce_async(x, op=hvd.Sum,
                                           name="s.%s.%d" % (dt, count)),
                       hvd.allreduce_async(x * 2, op=hvd.Average,
                                           name="a.%s.%d" % (dt, count))]
            s, a = (hvd.synchronize(h) for h in handles)
            if not torch.equal(s, torch.full_like(x, n * (n + 1) / 2)):
                bad.append("sum %s x%d wrong" % (dt, count))
            if not torch.equal(a, torch.full_like(x, n + 1.0)):
                bad.append("average %s x%d wrong" % (dt, count))
    b = torch.arange(4096, dtype=torch.float32, device=dev) * (r + 1)
    b = hvd.broadcast(b, root_rank=n - 1, name="bcast")
    if not torch.equal(b, torch.arange(4096, dtype=torch.float32,
                                       device=dev) * n):
        bad.append("broadcast wrong")
    st = hvd.core_stats()
    kind = KINDS.get(st["gpu_backend"], "?")
    want = os.environ.get("CG_EXPECT_BACKEND")
    if want and kind != want:
        bad.append("AUTO chose %s, the job expects %s" % (kind, want))
    fb = os.environ.get("CG_EXPECT_FALLBACKS")
    if fb is not None and st["nccl_fallbacks"] != int(fb):
        bad.append("%d fallbacks, the job expects %s"
                   % (st["nccl_fallbacks"], fb))
    within = os.environ.get("CG_EXPECT_WITHIN")
    ratio = (st["nccl_create_bytes"] / st["nccl_estimate_bytes"]
             if st["nccl_estimate_bytes"] else 0.0)
    if within and kind == "NCCL" and abs(ratio - 1.0) > float(within):
        bad.append("NCCL's creation took %.0f MiB, the estimate %.0f MiB "
                   "(ratio %.2f, allowed 1 +- %s)"
                   % (st["nccl_create_bytes"] / 2**20,
                      st["nccl_estimate_bytes"] / 2**20, ratio, within))
    worst = hvd.allreduce(torch.tensor([float(len(bad))]), op=hvd.Max,
                          name="bad").item()
    if r == 0:
        print(json.dumps({
            "ranks": n, "backend": kind,
            "estimate_mib": round(st["nccl_estimate_bytes"] / 2**20, 1),
            "budget_mib": round(st["nccl_budget_bytes"] / 2**20, 1),
            "created_mib": round(st["nccl_create_bytes"] / 2**20, 1),
            "created_over_estimate": round(ratio, 3),
            "fallbacks": st["nccl_fallbacks"], "failed_checks": bad,
            "worst_rank_failures": worst}), flush=True)
    for msg in bad:
        print("rank %d: %s" % (r, msg), file=sys.stderr)
    hvd.shutdown()
    return int(worst)


if __name__ == "__main__":
    sys.exit(main())
