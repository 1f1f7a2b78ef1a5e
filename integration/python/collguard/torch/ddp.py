# SPDX-License-Identifier: Apache-2.0
"""A communication hook for torch DistributedDataParallel:
model.register_comm_hook(None, collguard.torch.ddp_comm_hook) averages
every gradient bucket through collguard (governed and fused) instead of
the process group. The hook returns a torch.futures.Future holding the
reduced bucket; it is completed inside the hook, once the allreduce is
done (the wait releases the GIL), so buckets do not overlap each other
yet."""
import torch

from collguard.torch.mpi_ops import Average, allreduce_async_, synchronize


def ddp_comm_hook(state, bucket):
    """Averages bucket's flattened gradients over every rank. state is
    unused (pass None); buckets are named by DDP's bucket index, which is
    the same on every rank."""
    tensor = bucket.buffer()
    fut = torch.futures.Future()
    try:
        handle = allreduce_async_(tensor, op=Average,
                                  name="ddp.bucket.%d" % bucket.index())
        fut.set_result(synchronize(handle))
    except Exception as e:  # DDP raises it from backward()
        fut.set_exception(e)
    return fut
