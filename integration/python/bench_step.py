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


def step_times(hvd, tensors, steps, warmup, tag):
    times = []
    for s in range(warmup + steps):
        t0 = time.perf_counter()
        handles = [hvd.allreduce_async_(t, name="%s.%d" % (tag, i))
                   for i, t in enumerate(tensors)]
        for h in handles:
            hvd.synchronize(h)
        if s >= warmup:
            times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--horovod", action="store_true")
    args = ap.parse_args()
    if args.horovod:
        import horovod.torch as hvd
    else:
        import collguard.torch as hvd
    hvd.init()
    small = [torch.ones(1024) for _ in range(1000)]
    big = [torch.ones(1024 * 1024)]
    m_small = step_times(hvd, small, args.steps, args.warmup, "g")
    m_big = step_times(hvd, big, args.steps, args.warmup, "b")
    if hvd.rank() == 0:
        print("%s, %d ranks: 1000 x 4 KiB median step %.3f ms; 1 x 4 MiB "
              "median step %.3f ms" % ("horovod" if args.horovod else
                                       "collguard", hvd.size(),
                                       m_small * 1e3, m_big * 1e3))
    hvd.shutdown()


if __name__ == "__main__":
    main()
