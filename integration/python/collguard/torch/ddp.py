# SPDX-License-Identifier: Apache-2.0
"""A communication hook for torch DistributedDataParallel:
model.register_comm_hook(state, collguard.torch.ddp_comm_hook) reduces
every gradient bucket through collguard (governed and fused) instead of
the process group. The hook returns a torch.futures.Future that one
waiter thread completes once the bucket's allreduce is done (the wait
releases the GIL), so DDP overlaps the reduction with the backward pass."""
import queue
import threading

import torch

from collguard.torch.mpi_ops import Average, allreduce_async_, synchronize

_pending = queue.Queue()
_waiter = {"thread": None}


def _wait_loop():
    while True:
        handle, fut, tensor = _pending.get()
        try:
            synchronize(handle)
            fut.set_result(tensor)
        except Exception as e:  # the future carries it to DDP
            fut.set_exception(e)


def _start_waiter():
    if _waiter["thread"] is None:
        t = threading.Thread(target=_wait_loop, name="collguard-ddp",
                             daemon=True)
        t.start()
        _waiter["thread"] = t


def ddp_comm_hook(state, bucket):
    """Averages bucket's flattened gradients over every rank. state is
    unused (pass None). Bucket names follow DDP's bucket index, which is
    the same on every rank."""
    tensor = bucket.buffer()
    fut = torch.futures.Future()
    _start_waiter()
    handle = allreduce_async_(tensor, name="ddp.bucket.%d" % bucket.index(),
                              op=Average)
    _pending.put((handle, fut, tensor))
    return fut
