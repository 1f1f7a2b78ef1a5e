# SPDX-License-Identifier: Apache-2.0
"""DDP's step time with collguard's comm hook against DDP's own allreduce
on the same process group, in the same run: two DDP copies of one model
(same initial parameters, same data) step in turns, ABAB..., so the
machine's noise falls on both. Prints each mode's median step time, the
ratio hook / DDP's own, how many buckets DDP made, the backward's compute
alone (no communication: DDP's no_sync), and whether the parameters of
the two copies are bit-identical after the steps.

  collguard-run -np 2 python integration/python/bench_ddp.py
  (CUDA: --device cuda, rank i on GPU local rank % GPUs; DDP's own then
  runs on NCCL)

--sync also times the hook's earlier form (completed inside the hook, so
buckets do not overlap backward). Exit status 1 when the parameters
differ."""
import argparse
import os
import socket
import statistics
import time

import torch
import torch.distributed as dist

import collguard.torch as hvd
from collguard.torch.mpi_ops import Average, allreduce_async_, synchronize


def sync_hook(state, bucket):
    """The hook before overlap: the future completed inside the hook."""
    fut = torch.futures.Future()
    t = bucket.buffer()
    fut.set_result(synchronize(allreduce_async_(
        t, op=Average, name="ddp.sync.%d" % bucket.index())))
    return fut


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def model(layers, width, dev):
    torch.manual_seed(3)
    mods = []
    for _ in range(layers):
        mods += [torch.nn.Linear(width, width), torch.nn.Tanh()]
    return torch.nn.Sequential(*mods).to(dev)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=24)
    ap.add_argument("--width", type=int, default=512)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--bucket-mb", type=float, default=1.0,
                    help="DDP's bucket_cap_mb (small: many buckets)")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=1,
                    help="torch CPU threads per rank")
    ap.add_argument("--sync", action="store_true",
                    help="also time the non-overlapping hook")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    hvd.init()
    if a.device == "cuda":
        local = int(os.environ.get("CG_RUN_LOCAL_RANK", os.environ.get(
            "OMPI_COMM_WORLD_LOCAL_RANK", "0")))
        dev = torch.device("cuda", local % torch.cuda.device_count())
        torch.cuda.set_device(dev)
        backend = "nccl"
    else:
        dev, backend = torch.device("cpu"), "gloo"
    port = hvd.broadcast_object(free_port() if hvd.rank() == 0 else None, 0)
    dist.init_process_group(backend, init_method="tcp://127.0.0.1:%d" % port,
                            rank=hvd.rank(), world_size=hvd.size())

    seen = set()

    def hook(state, bucket):  # collguard's, counting DDP's buckets
        seen.add(bucket.index())
        return hvd.ddp_comm_hook(state, bucket)

    modes = {"ddp": None, "hook": hook}
    if a.sync:
        modes["hook_sync"] = sync_hook
    nets, opts = {}, {}
    for name, hook in modes.items():
        net = torch.nn.parallel.DistributedDataParallel(
            model(a.layers, a.width, dev), bucket_cap_mb=a.bucket_mb,
            device_ids=[dev.index] if dev.type == "cuda" else None)
        if hook:
            net.register_comm_hook(None, hook)
        nets[name] = net
        opts[name] = torch.optim.SGD(net.parameters(), lr=0.01,
                                     momentum=0.9)
    g = torch.Generator().manual_seed(17 + hvd.rank())
    batches = [(torch.randn(a.batch, a.width, generator=g).to(dev),
                torch.randn(a.batch, a.width, generator=g).to(dev))
               for _ in range(4)]

    def step(name, i, no_sync=False):
        net, opt = nets[name], opts[name]
        x, y = batches[i % len(batches)]
        if dev.type == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        opt.zero_grad()
        if no_sync:
            with net.no_sync():
                torch.nn.functional.mse_loss(net(x), y).backward()
        else:
            torch.nn.functional.mse_loss(net(x), y).backward()
            opt.step()
        if dev.type == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter() - t0

    times = {name: [] for name in modes}
    for i in range(a.warmup + a.steps):
        for name in (modes if i % 2 == 0 else list(modes)[::-1]):
            t = step(name, i)
            if i >= a.warmup:
                times[name].append(t)
    compute = [step("ddp", 0, no_sync=True) for _ in range(10)]
    # (no_sync steps leave gradients unused: the copies' parameters move
    # only through the synchronised steps above)
    buckets = max(seen) + 1
    same = all(torch.equal(p, q) for p, q in zip(
        nets["ddp"].module.parameters(), nets["hook"].module.parameters()))
    same_all = hvd.allreduce(torch.tensor([0.0 if same else 1.0]),
                             op=hvd.Sum, name="bench.same").item() == 0
    if hvd.rank() == 0:
        med = {n: statistics.median(t) * 1e3 for n, t in times.items()}
        nparam = sum(p.numel() for p in nets["ddp"].parameters())
        print("# bench_ddp: %d ranks, %s, %d layers of %dx%d (%.1f MiB of "
              "fp32 gradients), batch %d, bucket_cap_mb %g%s, %d steps "
              "(ABAB), torch %s"
              % (hvd.size(), dev, a.layers, a.width, a.width,
                 nparam * 4 / 2**20, a.batch, a.bucket_mb,
                 ", %d buckets" % buckets, a.steps,
                 torch.__version__))
        print("# backward + forward alone (no_sync): %.2f ms (median of 10)"
              % (statistics.median(compute) * 1e3))
        for n in modes:
            print("%-10s median %8.2f ms  p10 %8.2f  p90 %8.2f" % (
                n, med[n], sorted(times[n])[len(times[n]) // 10] * 1e3,
                sorted(times[n])[(9 * len(times[n])) // 10] * 1e3))
        print("ratio hook / ddp's own %s: %.3f" % (backend,
                                                   med["hook"] / med["ddp"]))
        if a.sync:
            print("ratio hook_sync / ddp's own: %.3f"
                  % (med["hook_sync"] / med["ddp"]))
        print("parameters after %d steps: %s" % (
            a.warmup + a.steps,
            "bit-identical (hook vs ddp's own, every rank)" if same_all
            else "DIFFER"))
    dist.destroy_process_group()
    hvd.shutdown()
    return 0 if same_all else 1


if __name__ == "__main__":
    raise SystemExit(main())
