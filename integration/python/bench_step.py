# SPDX-License-Identifier: Apache-2.0
"""One training step's communication through collguard.torch, as
issue 12 measures it: per step, allreduce_async_ on 1000 float32 tensors
of 4 KiB, then synchronize on each; and one 4 MiB tensor. Prints the
median step time of each over --steps steps (after --warmup), on rank 0.
Run: collguard-run -np 2 /usr/bin/python3 integration/python/bench_step.py
(with PYTHONPATH=integration/python and COLLGUARD_LIB set). Pass
--horovod to time `import horovod.torch` instead, for the same steps on
Horovod's own stack."""
import argparse
import statistics
import time

import torch


def step_times(hvd, tensors, steps, warmup, tag, parts=None):
    times, enq, sync = [], [], []
    for s in range(warmup + steps):
        t0 = time.perf_counter()
        handles = [hvd.allreduce_async_(t, name="%s.%d" % (tag, i))
                   for i, t in enumerate(tensors)]
        t1 = time.perf_counter()
        for h in handles:
            hvd.synchronize(h)
        if s >= warmup:
            t2 = time.perf_counter()
            times.append(t2 - t0)
            enq.append(t1 - t0)
            sync.append(t2 - t1)
    if parts is not None:
        parts.update(enqueue=statistics.median(enq),
                     synchronize=statistics.median(sync))
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--horovod", action="store_true")
    ap.add_argument("--profile", action="store_true",
                    help="also where a step's time goes: the caller's "
                    "enqueue and synchronize loops and, for collguard, the "
                    "engine's counters per step")
    args = ap.parse_args()
    if args.horovod:
        import horovod.torch as hvd
    else:
        import collguard.torch as hvd
    hvd.init()
    small = [torch.ones(1024) for _ in range(1000)]
    big = [torch.ones(1024 * 1024)]
    parts = {}
    before = hvd.core_stats() if args.profile and not args.horovod else None
    m_small = step_times(hvd, small, args.steps, args.warmup, "g", parts)
    after = hvd.core_stats() if before is not None else None
    m_big = step_times(hvd, big, args.steps, args.warmup, "b")
    if hvd.rank() == 0:
        print("%s, %d ranks: 1000 x 4 KiB median step %.3f ms; 1 x 4 MiB "
              "median step %.3f ms" % ("horovod" if args.horovod else
                                       "collguard", hvd.size(),
                                       m_small * 1e3, m_big * 1e3))
    if args.profile and hvd.rank() == 0:
        print("  1000 x 4 KiB: enqueue loop %.3f ms (%.2f us a tensor), "
              "synchronize loop %.3f ms" % (
                  parts["enqueue"] * 1e3, parts["enqueue"] * 1e3,
                  parts["synchronize"] * 1e3))
        if after is not None:
            n = args.steps + args.warmup
            d = {k: (after[k] - before[k]) / n for k in after
                 if isinstance(after[k], int) and k in before}
            print("  engine per step: %.1f cycles, %.1f fused calls, "
                  "execute %.3f ms (background thread)" % (
                      d.get("cycles", 0), d.get("fused_calls", 0),
                      d.get("execute_ns", 0) / 1e6))
    hvd.shutdown()


if __name__ == "__main__":
    main()
