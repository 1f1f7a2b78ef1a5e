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

This file holds the command line and the record's error fields; the code
is mg_cases.py (the cases) over mg_steps.py (a stepper per mode),
mg_model.py (the shapes, the gradients, the exact check), mg_memory.py
(the ballast, collguard's figures) and mg_job.py (rank, size, device).
"""
import argparse
import json
import os
import sys
import traceback

import torch

from mg_cases import run
from mg_job import MiB
from mg_memory import auto_stats


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
