# SPDX-License-Identifier: Apache-2.0
"""One case of the memory-guard benchmark: a synthetic training step over
the parameter shapes of a 350M-parameter transformer (GPT-2 medium: 24
layers, width 1024, vocabulary 50257), gradients averaged every step, with
only F bytes of device memory left free. The communicator and the model
come first; then a ballast leaves F free, the way activations grow during
a run; then the steps (the first is the communication's first use).

Modes (one per process, so nothing allocated by one case helps another):
  collguard  collguard.torch (HOROVOD_GPU_OPERATIONS picks the backend),
             allreduce_async_ on every gradient, then synchronize
  horovod    Horovod 0.28's defaults, reproduced over torch.distributed
             with NCCL: a HOROVOD_FUSION_THRESHOLD (128 MiB) fusion buffer
             allocated through the framework's allocator at the first
             response of more than one tensor and kept; a tensor alone is
             reduced in place; no degrade (operations.cc PerformOperation,
             fusion_buffer_manager.cc)
  ddp        torch DistributedDataParallel with its defaults (25 MiB
             buckets, NCCL)
  grow       collguard with a ballast that grows each step until little is
             left: when the early warning fires, how the buffers shrink,
             whether any allocation failed
Several ranks (issue 17: a rank per GPU) under collguard-run, torchrun or
mpirun: rank, size and local rank from the launcher's variables; each rank
on GPU local rank (--device auto); torch.distributed meets at MASTER_ADDR
and MASTER_PORT, which the launching script sets; every rank holds the
same gradients, so the average is exact where the rank count is a power
of two (elsewhere "exact" is null and max_rel_err says how close). A
ballast (--free) needs a GPU per rank. On a CPU (--device cpu --scale 16)
the modes run as a dry run of the same code, gloo for torch.distributed.

--ballast-first (issue 27): the ballast comes BEFORE the first collective,
so nobody's NCCL communicator exists yet when the job starts to
communicate, the way a job's activations can fill the GPU before its
first allreduce: joining (hvd.init, init_process_group: no communicator
yet), the model, the ballast, then the first collective (horovod: an
all_reduce, which makes NCCL's communicator; ddp: DistributedDataParallel's
construction, which verifies the shapes and broadcasts the parameters
through it and allocates its buckets; collguard: the warm-up allreduce,
where AUTO, HOROVOD_GPU_OPERATIONS unset, chooses NCCL or host staging),
then the steps, plainly timed. "phase" says where a case stopped; for
collguard "auto" is what AUTO chose (core_stats).

--mode compare: collguard host-staged (HOROVOD_GPU_OPERATIONS=COLLGUARD)
against collguard over NCCL, the same gradients in the same process, in
alternating blocks (init, --steps + 1 steps, shutdown; the block order
swapped every round), the first step of each block dropped; "ratio" is
the trimmed mean host-staged / NCCL, "round_ratios" each round's.
With --free (a GPU) the ballast leaves F free before the first block.

Prints one JSON object per rank (the last line of its stdout).
  memguard.py --mode M --dtype fp32|bf16 [--free BYTES] [--steps N]
              [--device auto|cpu|cuda:N] [--ballast-first]
              [--gpu-operations env|auto|NCCL|COLLGUARD]
"""
import argparse
import json
import os
import statistics
import sys
import time
import traceback

import torch

MiB = 1 << 20
HOROVOD_FUSION_THRESHOLD = 128 * MiB
# core_stats()["gpu_backend"] (include/collguard/hvd.h)
GPU_BACKENDS = {0: "COLLGUARD", 1: "MPI", 2: "NCCL", 3: "AUTO"}
AUTO_KEYS = ("gpu_backend", "nccl_estimate_bytes", "nccl_budget_bytes",
             "nccl_create_bytes", "nccl_fallbacks")


def launcher_ranks():
    """(rank, size, local rank) from collguard-run, torchrun or mpirun."""
    for r, n, l in (("CG_RUN_RANK", "CG_RUN_SIZE", "CG_RUN_LOCAL_RANK"),
                    ("RANK", "WORLD_SIZE", "LOCAL_RANK"),
                    ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                     "OMPI_COMM_WORLD_LOCAL_RANK")):
        if r in os.environ and n in os.environ:
            return (int(os.environ[r]), int(os.environ[n]),
                    int(os.environ.get(l, os.environ[r])))
    return 0, 1, 0


RANK, SIZE, LOCAL_RANK = launcher_ranks()


def gpt2_medium_shapes(scale=1):
    """Parameter shapes in registration order (scale > 1 shrinks every
    dimension, for a dry run on a CPU)."""
    d, v, ctx, layers = 1024 // scale, 50257 // scale, 1024 // scale, 24
    shapes = [(v, d), (ctx, d)]
    for _ in range(layers):
        shapes += [(d,), (d,), (d, 3 * d), (3 * d,), (d, d), (d,), (d,),
                   (d,), (d, 4 * d), (4 * d,), (4 * d, d), (d,)]
    return shapes + [(d,), (d,)]


def free_bytes(dev):
    if dev.type != "cuda":
        return None
    torch.cuda.synchronize(dev)
    return torch.cuda.mem_get_info(dev)[0]


class Ballast:
    """Device memory held so that only `leave` bytes stay free; grow()
    takes more. One tensor per call (a cudaMalloc each through torch's
    allocator, with its cache emptied first, so the free figure is the
    driver's)."""

    def __init__(self, dev):
        self.dev, self.parts = dev, []

    def leave(self, leave):
        torch.cuda.empty_cache()
        take = free_bytes(self.dev) - leave
        if take > 0:
            self.take(take)
        return free_bytes(self.dev)

    def release(self):
        self.parts = []
        torch.cuda.empty_cache()

    def take(self, nbytes):
        nbytes = max(2 * MiB, nbytes // (2 * MiB) * (2 * MiB))
        self.parts.append(torch.empty(nbytes, dtype=torch.uint8,
                                      device=self.dev))


def oom_text(exc):
    """The first line of an error, and the allocation it names; where the
    first line does not say "out of memory" and a later one does (NCCL's
    errors: "unhandled cuda error" first, "Cuda failure 2 'out of memory'"
    lines below), that line is added."""
    lines = [x.strip() for x in str(exc).strip().splitlines() if x.strip()]
    if not lines:
        return repr(exc)[:300]
    text = lines[0]
    if "out of memory" not in text.lower():
        more = next((x for x in lines[1:] if "out of memory" in x.lower()),
                    None)
        if more is not None:
            text = text[:200] + " ... " + more
    return text[:300]


def nccl_warnings():
    """NCCL's WARN lines of this process (NCCL_DEBUG_FILE set by main)."""
    path = "/tmp/memguard-nccl.%d.log" % os.getpid()
    try:
        with open(path) as f:
            lines = [x.strip() for x in f if "WARN" in x]
        os.remove(path)
    except OSError:
        return []
    return lines


def auto_stats(hvd):
    """What AUTO chose for CUDA tensors (None for keys this build lacks)."""
    st = hvd.core_stats()
    a = {k: st.get(k) for k in AUTO_KEYS}
    a["gpu_backend_name"] = GPU_BACKENDS.get(a["gpu_backend"])
    return a


class CollguardStep:
    def __init__(self, dev, hvd):
        self.hvd, self.dev = hvd, dev

    def comm(self):
        self.init()
        self.first()

    def init(self):
        """Joins the job: no collective, no communicator yet."""
        self.hvd.init()

    def first(self):
        """The first collective (AUTO chooses the backend here)."""
        probe = torch.ones(1, device=self.dev)
        self.hvd.synchronize(self.hvd.allreduce_async_(probe, name="warmup"))

    def step(self, grads, k):
        hvd = self.hvd
        hs = [hvd.allreduce_async_(g, name="grad.%d" % i, op=hvd.Average)
              for i, g in enumerate(grads)]
        for h in hs:
            hvd.synchronize(h)

    def verify(self, grads):
        """One step more, a sum with a prescale of 2, undone by scaling:
        every rank holds the same gradients, so each comes back as
        2 * ranks times itself and, divided by that, equals its reference
        bit for bit where the rank count is a power of two. Unlike the
        average (on one rank its own input), a step that moved nothing,
        or left an output unwritten, cannot pass. Nothing is allocated:
        it runs under the same squeeze as the steps."""
        hvd = self.hvd
        hs = [hvd.allreduce_async_(g, name="verify.%d" % i, op=hvd.Sum,
                                   prescale_factor=2.0)
              for i, g in enumerate(grads)]
        for h in hs:
            hvd.synchronize(h)
        for g in grads:
            g.div_(2 * SIZE)


class HorovodDefaultsStep:
    """Horovod 0.28's GPU allreduce path, its memory behaviour kept:
    responses fused up to the threshold, the fusion buffer allocated (by
    the framework) at the first multi-tensor response and kept forever,
    a single tensor reduced in place, Average as a sum then a scale."""

    def __init__(self, dev):
        self.dev, self.fusion = dev, None
        self.threshold = int(os.environ.get("HOROVOD_FUSION_THRESHOLD",
                                            HOROVOD_FUSION_THRESHOLD))

    def comm(self):
        self.init()
        self.first()

    def init(self):
        """The process group: NCCL's communicator is made lazily, at the
        first collective."""
        init_process_group(self.dev)

    def first(self):
        import torch.distributed as dist
        dist.all_reduce(torch.ones(1, device=self.dev))

    def _flush(self, group):
        import torch.distributed as dist
        if len(group) == 1:
            dist.all_reduce(group[0])
            group[0].div_(dist.get_world_size())
            return
        if self.fusion is None:
            self.fusion = torch.empty(self.threshold, dtype=torch.uint8,
                                      device=self.dev)
        buf = self.fusion.view(group[0].dtype)
        off = 0
        for g in group:
            buf[off:off + g.numel()].copy_(g.view(-1))
            off += g.numel()
        dist.all_reduce(buf[:off])
        buf[:off].div_(dist.get_world_size())
        off = 0
        for g in group:
            g.view(-1).copy_(buf[off:off + g.numel()])
            off += g.numel()

    def step(self, grads, k):
        group, size = [], 0
        for g in grads:
            nbytes = g.numel() * g.element_size()
            if group and size + nbytes > self.threshold:
                self._flush(group)
                group, size = [], 0
            group.append(g)
            size += nbytes
        if group:
            self._flush(group)


def init_process_group(dev):
    import torch.distributed as dist
    if dist.is_initialized():
        return
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    if SIZE > 1 and "MASTER_PORT" not in os.environ:
        raise RuntimeError("memguard.py: %d ranks need MASTER_PORT (the same "
                           "on every rank) for torch.distributed" % SIZE)
    os.environ.setdefault("MASTER_PORT", str(29500 + os.getpid() % 1000))
    dist.init_process_group("nccl" if dev.type == "cuda" else "gloo",
                            rank=RANK, world_size=SIZE)


class ScaledSum(torch.nn.Module):
    """Parameters of the given shapes; the loss is sum(p.sum() * c), so the
    backward writes c into every gradient through an expanded view (no
    temporaries the size of a parameter)."""

    def __init__(self, params, c):
        super().__init__()
        self.ps = torch.nn.ParameterList(params)
        self.c = c

    def forward(self, x):
        return sum(p.sum() * self.c for p in self.ps) + x.sum()


class DdpStep:
    def __init__(self, dev):
        self.dev, self.ddp = dev, None

    def comm(self):
        self.init()
        import torch.distributed as dist
        dist.all_reduce(torch.ones(1, device=self.dev))

    def init(self):
        init_process_group(self.dev)

    def wrap(self, params, c):
        self.construct(params, c)
        for p in params:
            p.grad = torch.zeros_like(p)

    def construct(self, params, c):
        """DDP's construction: with --ballast-first its first collective
        (it verifies the parameters' shapes across ranks and broadcasts
        them, which makes NCCL's communicator) and its buckets."""
        from torch.nn.parallel import DistributedDataParallel as DDP
        module = ScaledSum(params, c)
        ids = [self.dev.index] if self.dev.type == "cuda" else None
        self.ddp = DDP(module, device_ids=ids)

    def step(self, grads, k):
        for p in self.ddp.module.ps:
            p.grad.zero_()
        self.ddp(torch.zeros(1, device=self.dev)).backward()


def sync(dev):
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def snapshot(hvd):
    s = hvd.memory_pressure()
    return {k: s[k] for k in ("level", "free_bytes", "budget_bytes",
                              "fusion_bytes", "fusion_current_bytes",
                              "chunk_bytes", "nccl_buffsize",
                              "early_warnings", "alloc_failures", "degrades",
                              "peak_bytes", "current_bytes",
                              "device_peak_bytes", "device_current_bytes",
                              "oom_eta_s")}


def device_held(hvd):
    """collguard's own GPU memory now (all categories)."""
    return sum(hvd.memory_pressure()["device_current_bytes"].values())


def squeeze(ballast, leave, hvd, dev):
    """Leaves `leave` bytes free. Like activations, the ballast takes what
    collguard gives back when its governor sees the squeeze (it samples
    every 100 ms and resizes its buffers at the next cycle)."""
    for _ in range(5):
        ballast.leave(leave)
        if hvd is None:
            break
        time.sleep(0.3)
        if free_bytes(dev) <= leave + 4 * MiB:
            break


def regrow(hvd, fusion, timeout=5.0):
    """After the ballast went: waits until the governor allows the
    unconstrained fusion size again (it grows back one sample at a time,
    after its hysteresis)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if hvd.memory_pressure()["fusion_bytes"] >= fusion:
            return True
        time.sleep(0.05)
    return False


def timed_steps(stepper, grads, n, dev, k0=0):
    ts = []
    for k in range(n):
        t0 = time.perf_counter()
        stepper.step(grads, k0 + k)
        sync(dev)
        ts.append(time.perf_counter() - t0)
    return ts


def trimmed_mean(xs, cut=0.1):
    """The mean of the middle 80%: the step time is bimodal (a step's last
    tensors make the cycle they land in or wait one more, 1 ms apart), so
    its median flips between the modes from block to block; a mean over
    many steps does not, and the trim drops the odd stall."""
    xs = sorted(xs)
    k = int(len(xs) * cut)
    xs = xs[k:len(xs) - k] if len(xs) > 2 * k else xs
    return sum(xs) / len(xs)


def interleaved(args, out, dev, hvd, stepper, grads, refs, ballast):
    """collguard at F against itself unconstrained, in the same process,
    in alternating blocks (free, squeezed, free, squeezed ...), so drift
    in the machine or the process hits both sides alike. Each block drops
    its first step (the one that resizes the buffers) from the timing."""
    before = free_bytes(dev)
    first = timed_steps(stepper, grads, 1, dev)
    out["first_use_bytes"] = before - free_bytes(dev)
    out["first_step_ms"] = first[0] * 1e3
    fusion0 = hvd.memory_pressure()["fusion_bytes"]
    base, squeezed, rounds, regrown = [], [], [], True
    peak_total, peak_snap, trace, k0 = -1, None, [], 1
    for r in range(args.rounds):
        ballast.release()
        regrown = regrow(hvd, fusion0) and regrown
        b = timed_steps(stepper, grads, args.steps + 1, dev, k0)[1:]
        k0 += args.steps + 1
        squeeze(ballast, args.free, hvd, dev)
        out["free_after_ballast"] = free_bytes(dev)
        hvd.reset_memory_peaks()
        if r == 0:
            out["collguard_held_at_start"] = device_held(hvd)
        q = timed_steps(stepper, grads, args.steps + 1, dev, k0)
        k0 += args.steps + 1
        snap = snapshot(hvd)
        snap["round"], snap["driver_free"] = r, free_bytes(dev)
        trace.append(snap)
        total = sum(snap["device_peak_bytes"].values())
        if total > peak_total:  # the round with the highest peak reports
            peak_total, peak_snap = total, snap
        q = q[1:]
        base += b
        squeezed += q
        rounds.append(trimmed_mean(q) / trimmed_mean(b))
    out["regrown"] = regrown
    out["steps_done"] = 1 + args.rounds * 2 * (args.steps + 1)
    out["completed"] = True
    out["base_step_ms_median"] = statistics.median(base) * 1e3
    out["step_ms_median"] = statistics.median(squeezed) * 1e3
    out["base_step_ms_mean"] = trimmed_mean(base) * 1e3
    out["step_ms_mean"] = trimmed_mean(squeezed) * 1e3
    out["slowdown"] = out["step_ms_mean"] / out["base_step_ms_mean"]
    out["round_slowdowns"] = rounds
    stepper.verify(grads)
    out["exact"], out["max_rel_err"] = check_exact(grads, refs)
    out["torch_peak_allocated"] = torch.cuda.max_memory_allocated(dev)
    out["collguard"] = peak_snap
    out["collguard_stats"] = hvd.core_stats()
    out["rounds_trace"] = trace
    return out


def pick_device(name):
    """--device auto: this rank's GPU (local rank), else the CPU."""
    if name != "auto":
        return torch.device(name)
    if not torch.cuda.is_available():
        return torch.device("cpu")
    return torch.device("cuda", LOCAL_RANK % torch.cuda.device_count())


def check_exact(grads, refs):
    """Every rank averaged identical gradients: bit-exact where the rank
    count is a power of two (x * n / n); else (None, the largest relative
    error). refs[i] is a tensor of grads[i]'s shape or a one-element
    tensor every element must equal. Compared a slice at a time: a
    difference of the largest gradient whole (198 MiB in fp32) does not
    fit beside a ballast that leaves 256 MiB free."""
    err, same, ch = 0.0, True, 1 << 20
    for g, r in zip(grads, refs):
        gf = g.reshape(-1)
        rf = r.reshape(-1) if r.numel() == g.numel() else None
        d = m = 0.0
        for i in range(0, gf.numel(), ch):
            a = gf[i:i + ch]
            b = rf[i:i + ch] if rf is not None else r.reshape(1).expand_as(a)
            same = same and torch.equal(a, b)
            d = max(d, (a.float() - b.float()).abs().max().item())
            m = max(m, b.float().abs().max().item())
        err = max(err, d / m if m > 0 else d)
    if SIZE & (SIZE - 1) == 0:
        return same, err
    return None, err


def make_grads(args, dev, dtype):
    """The gradients in backward order (the last layer's first) and a copy
    of each to check the results against."""
    gen = torch.Generator(device="cpu").manual_seed(1234)
    shapes = gpt2_medium_shapes(args.scale)
    grads = [torch.randn(s, generator=gen).to(dev, dtype)
             for s in reversed(shapes)]
    return grads, [g.clone() for g in grads]


def check_result(args, out, dev, dtype, stepper, grads, refs, c):
    """The verifying step (where the stepper has one) and the check."""
    if refs is not None:
        if hasattr(stepper, "verify"):
            stepper.verify(grads)
        out["exact"], out["max_rel_err"] = check_exact(grads, refs)
    else:
        want = torch.full((1,), c, dtype=dtype, device=dev)
        out["exact"], out["max_rel_err"] = check_exact(
            grads, [want for g in grads])


def run_ballast_first(args, out, dev, dtype, hvd, stepper):
    """--ballast-first: join, model, ballast, then the first collective
    (nobody's NCCL communicator made before it), then the steps."""
    out["ballast_first"] = True
    out["phase"] = "init"
    stepper.init()
    if hvd is not None:
        out["auto_before"] = auto_stats(hvd)
    shapes = gpt2_medium_shapes(args.scale)
    out["params"] = sum(int(torch.Size(s).numel()) for s in shapes)
    c = 0.3125  # exact in bf16 and fp32
    free1 = free_bytes(dev)
    out["phase"] = "model"
    if args.mode == "ddp":
        gen = torch.Generator(device="cpu").manual_seed(1234)
        params = [torch.nn.Parameter(torch.randn(s, generator=gen).to(
            dev, dtype)) for s in shapes]
        for p in params:  # allocated with the model, as on the other path
            p.grad = torch.zeros_like(p)
        grads, refs = [p.grad for p in params], None

        def first():
            stepper.construct(params, c)
    else:
        grads, refs = make_grads(args, dev, dtype)
        first = stepper.first
    free2 = free_bytes(dev)
    out["model_bytes"] = None if free2 is None else free1 - free2
    ballast = Ballast(dev)
    if args.free is not None and dev.type == "cuda":
        out["phase"] = "ballast"
        squeeze(ballast, args.free, None, dev)
    out["free_after_ballast"] = free_bytes(dev)
    if hvd is not None:
        hvd.reset_memory_peaks()
        out["collguard_held_at_start"] = device_held(hvd)
    out["phase"] = "first collective"
    before = free_bytes(dev)
    t0 = time.perf_counter()
    first()
    sync(dev)
    out["first_collective_ms"] = (time.perf_counter() - t0) * 1e3
    if before is not None:
        # NCCL's communicator (made here) and, for DDP, its buckets;
        # collguard's own buffers are in its peaks.
        out["first_collective_bytes"] = before - free_bytes(dev)
    if hvd is not None:
        out["auto"] = auto_stats(hvd)
    out["phase"] = "steps"
    times = timed_steps(stepper, grads, args.steps, dev)
    out["steps_done"] = len(times)
    out["step_ms_median"] = statistics.median(
        times[1:] if len(times) > 1 else times) * 1e3
    out["step_ms_mean"] = trimmed_mean(
        times[1:] if len(times) > 1 else times) * 1e3
    out["first_step_ms"] = times[0] * 1e3
    out["phase"] = "verify"
    check_result(args, out, dev, dtype, stepper, grads, refs, c)
    out["completed"] = True
    out["phase"] = "done"
    if dev.type == "cuda":
        out["torch_peak_allocated"] = torch.cuda.max_memory_allocated(dev)
    if hvd is not None:
        out["collguard"] = snapshot(hvd)
        out["collguard_stats"] = hvd.core_stats()
        out["auto"] = auto_stats(hvd)
    return out


COMPARE_SIDES = ("COLLGUARD", "NCCL")


def run_compare(args, out, dev, dtype):
    """--mode compare: host-staged against NCCL (see the module's text)."""
    import collguard.torch as hvd
    shapes = gpt2_medium_shapes(args.scale)
    out["params"] = sum(int(torch.Size(s).numel()) for s in shapes)
    grads, refs = make_grads(args, dev, dtype)
    ballast = Ballast(dev)
    if args.free is not None and dev.type == "cuda":
        squeeze(ballast, args.free, None, dev)
    out["free_after_ballast"] = free_bytes(dev)
    times = {s: [] for s in COMPARE_SIDES}
    rounds, blocks = [], []
    exact, errs, sides = {}, {}, {}
    for r in range(args.rounds):
        order = COMPARE_SIDES if r % 2 == 0 else COMPARE_SIDES[::-1]
        mean = {}
        for side in order:
            os.environ["HOROVOD_GPU_OPERATIONS"] = side
            out["phase"] = "round %d %s" % (r, side)
            blk = {"round": r, "side": side, "free_before": free_bytes(dev)}
            stepper = CollguardStep(dev, hvd)
            t0 = time.perf_counter()
            stepper.comm()
            sync(dev)
            blk["init_ms"] = (time.perf_counter() - t0) * 1e3
            blk["free_after_init"] = free_bytes(dev)
            ts = timed_steps(stepper, grads, args.steps + 1, dev)
            blk["first_step_ms"] = ts[0] * 1e3
            ts = ts[1:]
            times[side] += ts
            mean[side] = trimmed_mean(ts)
            blk["step_ms_mean"] = mean[side] * 1e3
            a = auto_stats(hvd)
            blk["gpu_backend"] = a["gpu_backend"]
            blk["nccl_create_bytes"] = a["nccl_create_bytes"]
            if r == args.rounds - 1:
                stepper.verify(grads)
                exact[side], errs[side] = check_exact(grads, refs)
                sides[side] = {"collguard": snapshot(hvd),
                               "collguard_stats": hvd.core_stats()}
            hvd.shutdown()
            blk["free_after_shutdown"] = free_bytes(dev)
            blocks.append(blk)
        rounds.append(mean["COLLGUARD"] / mean["NCCL"])
    out["phase"] = "done"
    out["blocks"] = blocks
    out["round_ratios"] = rounds
    out["staged_step_ms_mean"] = trimmed_mean(times["COLLGUARD"]) * 1e3
    out["nccl_step_ms_mean"] = trimmed_mean(times["NCCL"]) * 1e3
    out["staged_step_ms_median"] = statistics.median(times["COLLGUARD"]) * 1e3
    out["nccl_step_ms_median"] = statistics.median(times["NCCL"]) * 1e3
    out["ratio"] = out["staged_step_ms_mean"] / out["nccl_step_ms_mean"]
    out["step_ms_median"] = out["staged_step_ms_median"]
    out["steps_done"] = sum(len(t) for t in times.values())
    out["backends_seen"] = {s: sorted({b["gpu_backend"] for b in blocks
                                       if b["side"] == s},
                                      key=lambda v: (v is None, v))
                            for s in COMPARE_SIDES}
    out["sides"] = sides
    out["side_exact"] = exact
    ex = list(exact.values())
    out["exact"] = False if False in ex else (None if None in ex else True)
    out["max_rel_err"] = max(errs.values()) if errs else None
    out["completed"] = True
    if dev.type == "cuda":
        out["torch_peak_allocated"] = torch.cuda.max_memory_allocated(dev)
    return out


def run(args, out):
    dev = pick_device(args.device)
    out["rank"], out["ranks"], out["device"] = RANK, SIZE, str(dev)
    if args.free is not None and dev.type == "cuda" and \
            LOCAL_RANK >= torch.cuda.device_count():
        raise RuntimeError("memguard.py: a ballast (--free) needs a GPU per "
                           "rank: local rank %d, %d GPU(s)" %
                           (LOCAL_RANK, torch.cuda.device_count()))
    if dev.type == "cuda":
        torch.cuda.set_device(dev)
        torch.cuda.init()
        torch.ones(1, device=dev)  # the framework's context first
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[args.dtype]
    if args.mode == "compare":
        return run_compare(args, out, dev, dtype)
    hvd = None
    if args.mode in ("collguard", "grow"):
        import collguard.torch as hvd
        stepper = CollguardStep(dev, hvd)
    elif args.mode == "horovod":
        stepper = HorovodDefaultsStep(dev)
    else:
        stepper = DdpStep(dev)
    if args.ballast_first:
        return run_ballast_first(args, out, dev, dtype, hvd, stepper)

    free0 = free_bytes(dev)
    stepper.comm()
    free1 = free_bytes(dev)
    if free0 is not None:
        # NCCL's (and the CUDA runtime's) cost: collguard's own buffers
        # from the warm-up op are not NCCL's.
        own = device_held(hvd) if hvd is not None else 0
        out["comm_create_bytes"] = free0 - free1 - own

    gen = torch.Generator(device="cpu").manual_seed(1234)
    shapes = gpt2_medium_shapes(args.scale)
    out["params"] = sum(int(torch.Size(s).numel()) for s in shapes)
    c = 0.3125  # exact in bf16 and fp32
    if args.mode == "ddp":
        params = [torch.nn.Parameter(torch.randn(s, generator=gen).to(
            dev, dtype)) for s in shapes]
        stepper.wrap(params, c)
        grads = [p.grad for p in params]
        refs = None
    else:
        # Gradients in backward order (the last layer's first).
        grads = [torch.randn(s, generator=gen).to(dev, dtype)
                 for s in reversed(shapes)]
        refs = [g.clone() for g in grads]
    free2 = free_bytes(dev)
    out["model_bytes"] = None if free2 is None else free1 - free2

    ballast = Ballast(dev)
    if args.mode == "collguard" and args.free is not None and \
            dev.type == "cuda":
        return interleaved(args, out, dev, hvd, stepper, grads, refs,
                           ballast)
    if args.free is not None and dev.type == "cuda":
        squeeze(ballast, args.free, hvd, dev)
    out["free_after_ballast"] = free_bytes(dev)
    if args.mode == "grow":
        # Let the initial ballast's jump leave the early warning's window,
        # so a warning during the ramp is the ramp's.
        time.sleep(args.grow_settle)
        hvd.memory_pressure()
    if hvd is not None:
        hvd.reset_memory_peaks()
        out["collguard_held_at_start"] = device_held(hvd)

    times, trace = [], []
    for k in range(args.steps):
        if args.mode == "grow" and k > 0:
            now = free_bytes(dev)
            if now - args.grow_step < args.grow_floor:
                break
            ballast.take(args.grow_step)
            time.sleep(args.grow_pause)
        before = free_bytes(dev) if k == 0 else None
        t0 = time.perf_counter()
        stepper.step(grads, k)
        sync(dev)
        times.append(time.perf_counter() - t0)
        if k == 0 and before is not None:
            out["first_use_bytes"] = before - free_bytes(dev)
        if hvd is not None and (args.mode == "grow" or k == 0):
            s = snapshot(hvd)
            s["step"], s["ms"] = k, times[-1] * 1e3
            s["driver_free"] = free_bytes(dev)
            trace.append(s)
    out["steps_done"] = len(times)
    out["completed"] = True
    out["step_ms_median"] = statistics.median(
        times[1:] if len(times) > 1 else times) * 1e3
    out["first_step_ms"] = times[0] * 1e3
    check_result(args, out, dev, dtype, stepper, grads, refs, c)
    if dev.type == "cuda":
        out["torch_peak_allocated"] = torch.cuda.max_memory_allocated(dev)
    if hvd is not None:
        out["collguard"] = snapshot(hvd)
        out["collguard_stats"] = hvd.core_stats()
        out["auto"] = auto_stats(hvd)
        if args.mode == "grow":
            out["trace"] = trace
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", required=True,
                    choices=("collguard", "horovod", "ddp", "grow",
                             "compare"))
    ap.add_argument("--dtype", default="fp32", choices=("fp32", "bf16"))
    ap.add_argument("--free", type=int, default=None,
                    help="bytes left free by the ballast (default: none)")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=5,
                    help="collguard with --free: alternating blocks of "
                    "--steps steps, unconstrained and squeezed, per round")
    ap.add_argument("--device", default="auto",
                    help="auto: the GPU of this rank's local rank, else cpu")
    ap.add_argument("--scale", type=int, default=1)
    ap.add_argument("--ballast-first", action="store_true",
                    help="the ballast before the first collective (no NCCL "
                    "communicator made yet); the steps plainly timed")
    ap.add_argument("--gpu-operations", default="env",
                    choices=("env", "auto", "NCCL", "COLLGUARD", "MPI"),
                    help="HOROVOD_GPU_OPERATIONS for collguard: env leaves "
                    "the environment's, auto unsets it (AUTO)")
    ap.add_argument("--grow-step", type=int, default=128 * MiB)
    ap.add_argument("--grow-floor", type=int, default=64 * MiB)
    ap.add_argument("--grow-pause", type=float, default=0.15)
    ap.add_argument("--grow-settle", type=float, default=6.0,
                    help="seconds between the initial ballast and the ramp")
    args = ap.parse_args()
    if args.mode == "grow":
        args.steps = max(args.steps, 1000)
    if args.ballast_first and args.mode not in ("horovod", "ddp",
                                                "collguard"):
        ap.error("--ballast-first: horovod, ddp or collguard")
    if args.gpu_operations == "auto":
        os.environ.pop("HOROVOD_GPU_OPERATIONS", None)
    elif args.gpu_operations != "env":
        os.environ["HOROVOD_GPU_OPERATIONS"] = args.gpu_operations
    out = {"mode": args.mode, "dtype": args.dtype, "free_req": args.free,
           "backend": ("host-staged vs NCCL" if args.mode == "compare" else
                       os.environ.get("HOROVOD_GPU_OPERATIONS", "AUTO")
                       if args.mode in ("collguard", "grow") else
                       os.environ.get("HOROVOD_GPU_OPERATIONS", "")),
           "ballast_first": args.ballast_first, "completed": False}
    # NCCL's own warnings, for an error whose text is only "unhandled cuda
    # error": the failed CUDA call is in them (nccl_warnings()).
    if args.mode in ("horovod", "ddp") and "NCCL_DEBUG" not in os.environ:
        os.environ["NCCL_DEBUG"] = "WARN"
        os.environ["NCCL_DEBUG_FILE"] = "/tmp/memguard-nccl.%p.log"
    rc = 0
    try:
        run(args, out)
    except Exception as exc:  # noqa: BLE001 - the case's outcome
        warn = nccl_warnings()
        if warn and "out of memory" not in str(exc).lower():
            oom_line = next((x for x in warn if "out of memory" in x.lower()
                             or "CUDA_ERROR_OUT_OF_MEMORY" in x), None)
            out["nccl_warnings"] = warn[-6:]
            if oom_line is not None:
                exc = RuntimeError("%s\nNCCL: %s" % (exc, oom_line))
        # Raised after the steps (the verifying step, the check) is a
        # failure too: nothing that raised completed.
        out["completed"] = False
        out["error"] = oom_text(exc)
        out["error_type"] = type(exc).__name__
        out["oom"] = ("out of memory" in str(exc).lower() or
                      isinstance(exc, getattr(torch.cuda, "OutOfMemoryError",
                                              ())))
        out["traceback_tail"] = traceback.format_exc().splitlines()[-4:]
        rc = 0 if out["oom"] else 1
        h = sys.modules.get("collguard.torch")
        if args.mode == "collguard" and h is not None and "auto" not in out:
            try:  # what AUTO had chosen when it failed
                if h.is_initialized():
                    out["auto"] = auto_stats(h)
            except Exception:  # noqa: BLE001 - best effort
                pass
    sys.stdout.flush()
    print(json.dumps(out))
    sys.stdout.flush()
    os._exit(rc)  # no teardown: a case that ran out of memory may hang there


if __name__ == "__main__":
    main()
