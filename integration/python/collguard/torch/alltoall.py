# SPDX-License-Identifier: Apache-2.0
"""horovod.torch's alltoall over collguard's mpi_lib_v2: rows of the first
dimension go to every rank by splits (default: an equal split), and each
rank gets what every rank sent it, in rank order, with the rows received
from each (async or not; autograd sends the gradient back the way it
came)."""
import torch

from collguard.process_sets import global_process_set
from collguard.torch.mpi_ops import _enqueue, _function, _name, synchronize


def alltoall_async(tensor, splits=None, name=None,
                   process_set=global_process_set):
    """Starts the alltoall of tensor; synchronize returns (output,
    received_splits)."""
    fn = _function("alltoall", tensor)
    if splits is None:
        splits = torch.tensor([], dtype=torch.int32)
    elif not isinstance(splits, torch.Tensor):
        splits = torch.tensor(splits, dtype=torch.int32)
    output = tensor.new_empty(0)
    if isinstance(splits, torch.Tensor) and splits.numel() > 0:
        received = splits.new_empty(0)
    else:
        received = torch.empty(process_set.size(), dtype=torch.int32)
    return _enqueue(fn, (tensor, splits, output, received, _name(name),
                         process_set.process_set_id),
                    (tensor, splits, (output, received)))


class _Alltoall(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, splits, name, process_set):
        output, received = synchronize(alltoall_async(tensor, splits, name,
                                                      process_set))
        ctx.process_set, ctx.received = process_set, received
        if splits is None:
            return output
        ctx.mark_non_differentiable(received)
        return output, received

    @staticmethod
    def backward(ctx, grad_output, *dead_gradients):
        grad, _ = alltoall(grad_output.contiguous(), splits=ctx.received,
                           process_set=ctx.process_set)
        return grad, None, None, None


def alltoall(tensor, splits=None, name=None, process_set=global_process_set):
    """The rows every rank sent this rank, in rank order; with splits,
    also the rows received from each rank, as (output, received_splits)."""
    return _Alltoall.apply(tensor, splits, name, process_set)
