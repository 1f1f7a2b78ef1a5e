# SPDX-License-Identifier: Apache-2.0
"""memguard.py's steppers, one per mode: how a training step's
gradients are averaged: collguard.torch (allreduce_async_ on every
gradient), Horovod 0.28's defaults reproduced over torch.distributed, and
torch's DistributedDataParallel; each joins the job (init), makes the
first collective (first) and runs a step."""
import os

import torch

from mg_job import MiB, RANK, SIZE

HOROVOD_FUSION_THRESHOLD = 128 * MiB


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
