# SPDX-License-Identifier: Apache-2.0
"""memguard.py's squeeze and what collguard reports of it: the ballast
that leaves F bytes of device memory free (or grows), waiting for the
governor to see it and to grow back, and collguard's governor and AUTO
figures read through collguard.torch."""
import time

import torch

from mg_job import MiB, free_bytes

# core_stats()["gpu_backend"] (include/collguard/hvd.h)
GPU_BACKENDS = {0: "COLLGUARD", 1: "MPI", 2: "NCCL", 3: "AUTO"}
AUTO_KEYS = ("gpu_backend", "nccl_estimate_bytes", "nccl_budget_bytes",
             "nccl_create_bytes", "nccl_fallbacks")


class Ballast:
    """Device memory held so that leave(F) leaves F bytes free; take()
    holds more. One tensor per call (a cudaMalloc each through torch's
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


def auto_stats(hvd):
    """What AUTO chose for CUDA tensors (None for keys this build lacks)."""
    st = hvd.core_stats()
    a = {k: st.get(k) for k in AUTO_KEYS}
    a["gpu_backend_name"] = GPU_BACKENDS.get(a["gpu_backend"])
    return a


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
