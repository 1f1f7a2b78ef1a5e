# SPDX-License-Identifier: Apache-2.0
"""memguard.py's cases: the plain one (the communicator, the model, the
ballast, then the timed steps; grow's ballast ramping), collguard at F
interleaved with itself unconstrained, --ballast-first, and --mode
compare; each fills the output record."""
import os
import statistics
import time

import torch

from mg_job import LOCAL_RANK, RANK, SIZE, free_bytes, pick_device, sync
from mg_memory import (Ballast, auto_stats, device_held, regrow, snapshot,
                       squeeze)
from mg_model import check_exact, check_result, gpt2_medium_shapes, make_grads
from mg_steps import CollguardStep, DdpStep, HorovodDefaultsStep


def timed_steps(stepper, grads, n, dev, k0=0):
    ts = []
    for k in range(n):
        t0 = time.perf_counter()
        stepper.step(grads, k0 + k)
        sync(dev)
        ts.append(time.perf_counter() - t0)
    return ts


def final_figures(out, dev, hvd):
    """A finished case's memory figures: torch's peak on a GPU, and
    collguard's snapshot, core stats and AUTO's choice where it ran."""
    if dev.type == "cuda":
        out["torch_peak_allocated"] = torch.cuda.max_memory_allocated(dev)
    if hvd is not None:
        out["collguard"] = snapshot(hvd)
        out["collguard_stats"] = hvd.core_stats()
        out["auto"] = auto_stats(hvd)


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
    final_figures(out, dev, hvd)
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
    final_figures(out, dev, hvd)
    if hvd is not None and args.mode == "grow":
        out["trace"] = trace
    return out
