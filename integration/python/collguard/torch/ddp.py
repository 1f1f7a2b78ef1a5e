# SPDX-License-Identifier: Apache-2.0
"""A communication hook for torch DistributedDataParallel:
model.register_comm_hook(None, collguard.torch.ddp_comm_hook) averages
every gradient bucket through collguard (governed and fused) instead of
the process group.

The hook enqueues the bucket's allreduce and returns at once with a
torch.futures.Future that completes when the collective has finished, so
DDP goes on with backward (and the next buckets) while the bucket moves.
One daemon thread per process, started on first use, waits on the
buckets' handles in the order they were enqueued and completes their
futures (collguard's wait releases the GIL); DDP waits on the futures at
the end of backward. A failed allreduce sets the future's exception,
which DDP raises from backward()."""
import queue
import threading

import torch

from collguard.torch.mpi_ops import Average, allreduce_async_, synchronize


class _Completer:
    """Completes the hook's futures from one waiting thread."""

    def __init__(self):
        self._pending = queue.SimpleQueue()
        self._thread = None
        self._lock = threading.Lock()

    def submit(self, handle, fut):
        with self._lock:  # (re)started lazily: a forked child has none
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._run, name="collguard-ddp-hook",
                    daemon=True)
                self._thread.start()
        self._pending.put((handle, fut))

    def _run(self):
        while True:
            handle, fut = self._pending.get()
            try:
                out = synchronize(handle)
            except BaseException as e:  # noqa: B902 (DDP re-raises it)
                fut.set_exception(e)
                continue
            fut.set_result(out)


_completer = _Completer()


def _future(tensor):
    if tensor.is_cuda:  # DDP's stream bookkeeping for CUDA values
        return torch.futures.Future(devices=[tensor.device])
    return torch.futures.Future()


def ddp_comm_hook(state, bucket):
    """Averages bucket's flattened gradients over every rank. state is
    unused (pass None); buckets are named by DDP's bucket index, which is
    the same on every rank. Returns before the allreduce has finished."""
    tensor = bucket.buffer()
    fut = _future(tensor)
    try:
        handle = allreduce_async_(tensor, op=Average,
                                  name="ddp.bucket.%d" % bucket.index())
    except Exception as e:  # bad input: DDP raises it from backward()
        fut.set_exception(e)
        return fut
    _completer.submit(handle, fut)
    return fut
