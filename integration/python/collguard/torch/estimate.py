# SPDX-License-Identifier: Apache-2.0
"""estimate_memory(model, optimizer): what data-parallel training of this
model needs per rank (parameters, gradients, fp32 master weights,
optimizer state, collguard's fusion and staging buffers, NCCL's buffers
and fixed cost) against the free memory of the device the model is on,
and the largest fusion threshold and NCCL_BUFFSIZE that fit. The numbers
come from the same C estimator as `collguard-info --estimate`
(include/collguard/estimate.h), with the caps of the configuration in
the environment. Activations are not estimated."""
import os

import torch

from collguard import basics
from collguard._native import mpi_lib

_DTYPES = {torch.float32: "f32", torch.float16: "f16",
           torch.bfloat16: "bf16", torch.float64: "f64"}
_BACKENDS = {"NCCL": "nccl", "AUTO": "nccl", "COLLGUARD": "collguard",
             "MPI": "mpi"}


def _optimizer_kind(optimizer):
    if optimizer is None:
        return "sgd"
    if isinstance(optimizer, torch.optim.AdamW):
        return "adamw"
    if isinstance(optimizer, torch.optim.Adam):
        return "adam"
    if isinstance(optimizer, torch.optim.SGD):
        momentum = max(g.get("momentum", 0) for g in optimizer.param_groups)
        return "momentum" if momentum else "sgd"
    raise ValueError("collguard: estimate_memory knows SGD (with or without "
                     "momentum), Adam and AdamW, not %s"
                     % type(optimizer).__name__)


def _device_memory(device):
    if device.type == "cuda":
        free, total = torch.cuda.mem_get_info(device)
        return free, total
    page = os.sysconf("SC_PAGE_SIZE")
    return (os.sysconf("SC_AVPHYS_PAGES") * page,
            os.sysconf("SC_PHYS_PAGES") * page)


def estimate_memory(model, optimizer=None, mixed="none", ranks=None,
                    backend=None, free_bytes=None, total_bytes=None):
    """A dict of bytes per rank: param_bytes, grad_bytes, master_bytes,
    optimizer_bytes, model_bytes, fusion_bytes, staging_host_bytes,
    nccl_buffer_bytes, nccl_fixed_bytes, device_bytes, reserve_bytes,
    free_bytes; fits (bool), headroom_bytes, fusion_fit and
    nccl_buffsize_fit. mixed: 'none', 'fp16' or 'bf16' (fp32 master
    weights and optimizer state beside half-precision weights; the model
    is then given in fp32). ranks: hvd.size() once initialized, else 1.
    backend: 'nccl', 'collguard' or 'mpi' (default from
    HOROVOD_GPU_OPERATIONS). free_bytes/total_bytes: the device's memory
    (default: torch.cuda.mem_get_info on the model's GPU, or the host's)."""
    seen, count, dtype, device = set(), 0, None, None
    for p in model.parameters():
        if id(p) in seen:
            continue
        seen.add(id(p))
        count += p.numel()
        if dtype is None:
            dtype, device = p.dtype, p.device
    if count == 0:
        raise ValueError("collguard: estimate_memory: the model has no "
                         "parameters")
    if dtype not in _DTYPES:
        raise ValueError("collguard: estimate_memory: parameters of dtype %s"
                         "; expected float32, float16, bfloat16 or float64"
                         % dtype)
    if ranks is None:
        ranks = basics.size() if basics.is_initialized() else 1
    if backend is None:
        env = os.environ.get("HOROVOD_GPU_OPERATIONS",
                             os.environ.get("CG_GPU_OPERATIONS", "AUTO"))
        backend = _BACKENDS.get(env.upper(), "nccl")
    if free_bytes is None:
        free_bytes, dev_total = _device_memory(device)
        total_bytes = total_bytes or dev_total
    total_bytes = total_bytes or free_bytes
    return mpi_lib.collguard_estimate(int(count), _DTYPES[dtype],
                                      _optimizer_kind(optimizer), mixed,
                                      int(ranks), backend, int(free_bytes),
                                      int(total_bytes))
