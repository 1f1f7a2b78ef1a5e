# SPDX-License-Identifier: Apache-2.0
"""horovod.torch's grouped operations over collguard's mpi_lib_v2:
grouped_allreduce (async or not, in place or not, autograd),
grouped_allgather and grouped_reducescatter (async or not, autograd).
A group is one handle: its members are negotiated together, fused where
they can be and complete together; as Horovod's, synchronize of a
group's handle returns the outputs as a tuple, the blocking forms a
list."""
import torch

from collguard.process_sets import global_process_set
from collguard.torch.compression import Compression
from collguard.torch.mpi_ops import (Adasum, Average, Sum, _enqueue,
                                     _function, _name, _resolve_op,
                                     synchronize)


def _tensors(tensors):
    tensors = list(tensors)
    if not tensors:
        raise ValueError("collguard: a group needs at least one tensor")
    return tensors


def _grouped_allreduce_async(tensors, outputs, name, op, prescale_factor,
                             postscale_factor, process_set):
    if op == Adasum:
        raise NotImplementedError("collguard: Adasum is not implemented")
    fn = _function("grouped_allreduce", tensors[0])
    for t in tensors[1:]:
        if not t.is_contiguous():
            raise ValueError("Tensor is required to be contiguous.")
    return _enqueue(fn, (tensors, outputs, 1, _name(name), op,
                         float(prescale_factor), float(postscale_factor),
                         process_set.process_set_id),
                    (tuple(tensors), tuple(outputs)))


def grouped_allreduce_async(tensors, average=None, name=None, op=None,
                            prescale_factor=1.0, postscale_factor=1.0,
                            process_set=global_process_set):
    """Starts the allreduce of every tensor of the list as one group into
    new tensors; returns one handle (synchronize: the outputs)."""
    tensors = _tensors(tensors)
    op = _resolve_op(op, average)
    outputs = [torch.empty_like(t, memory_format=torch.contiguous_format)
               for t in tensors]
    return _grouped_allreduce_async(tensors, outputs, name, op,
                                    prescale_factor, postscale_factor,
                                    process_set)


def grouped_allreduce_async_(tensors, average=None, name=None, op=None,
                             prescale_factor=1.0, postscale_factor=1.0,
                             process_set=global_process_set):
    """Starts the in-place allreduce of every tensor of the list as one
    group."""
    tensors = _tensors(tensors)
    op = _resolve_op(op, average)
    return _grouped_allreduce_async(tensors, tensors, name, op,
                                    prescale_factor, postscale_factor,
                                    process_set)


class _GroupedAllreduce(torch.autograd.Function):
    @staticmethod
    def forward(ctx, average, name, op, prescale_factor, postscale_factor,
                process_set, *tensors):
        ctx.args = (average, op, prescale_factor, postscale_factor,
                    process_set)
        return synchronize(grouped_allreduce_async(
            list(tensors), average, name, op, prescale_factor,
            postscale_factor, process_set))

    @staticmethod
    def backward(ctx, *grad_output):
        average, op, pre, post, ps = ctx.args
        grads = grouped_allreduce([g.contiguous() for g in grad_output],
                                  average=average, op=op,
                                  prescale_factor=pre, postscale_factor=post,
                                  process_set=ps)
        return (None, None, None, None, None, None, *grads)


def grouped_allreduce(tensors, average=None, name=None,
                      compression=Compression.none, op=None,
                      prescale_factor=1.0, postscale_factor=1.0,
                      process_set=global_process_set):
    """The reductions of every tensor of the list over every rank, as new
    tensors (a list), run as one group; autograd reduces the gradients
    the same way."""
    pairs = [compression.compress(t) for t in _tensors(tensors)]
    reduced = _GroupedAllreduce.apply(average, name, op, prescale_factor,
                                      postscale_factor, process_set,
                                      *[p[0] for p in pairs])
    return [compression.decompress(r, p[1]) for r, p in zip(reduced, pairs)]


def grouped_allreduce_(tensors, average=None, name=None, op=None,
                       prescale_factor=1.0, postscale_factor=1.0,
                       process_set=global_process_set):
    """In-place grouped allreduce; returns the tensors (a list)."""
    return list(synchronize(grouped_allreduce_async_(
        tensors, average, name, op, prescale_factor, postscale_factor,
        process_set)))


def grouped_allgather_async(tensors, name=None,
                            process_set=global_process_set):
    """Starts the allgather of every tensor of the list as one group."""
    tensors = _tensors(tensors)
    fn = _function("grouped_allgather", tensors[0])
    outputs = [t.new_empty(0) for t in tensors]
    return _enqueue(fn, (tensors, outputs, _name(name),
                         process_set.process_set_id),
                    (tuple(tensors), tuple(outputs)))


class _GroupedAllgather(torch.autograd.Function):
    @staticmethod
    def forward(ctx, name, process_set, *tensors):
        ctx.dims, ctx.process_set = [t.shape[0] for t in tensors], process_set
        return synchronize(grouped_allgather_async(list(tensors), name,
                                                   process_set))

    @staticmethod
    def backward(ctx, *grad_output):
        grads = grouped_allreduce([g.contiguous() for g in grad_output],
                                  op=Average, process_set=ctx.process_set)
        dims = grouped_allgather(
            [torch.tensor([d], dtype=torch.int64) for d in ctx.dims],
            process_set=ctx.process_set)
        r = ctx.process_set.rank()
        return (None, None,
                *[g.narrow(0, int(d[:r].sum().item()), dim)
                  for g, d, dim in zip(grads, dims, ctx.dims)])


def grouped_allgather(tensors, name=None, process_set=global_process_set):
    """Every rank's tensors concatenated along dimension 0, member by
    member (a list), run as one group."""
    return list(_GroupedAllgather.apply(name, process_set,
                                        *_tensors(tensors)))


def grouped_reducescatter_async(tensors, name=None, op=Average,
                                process_set=global_process_set,
                                prescale_factor=1.0, postscale_factor=1.0):
    """Starts the reducescatter of every tensor of the list as one group
    (Sum or Average, prescale and postscale as reducescatter)."""
    tensors = _tensors(tensors)
    if op not in (Average, Sum):
        if op == Adasum:
            raise NotImplementedError("collguard: Adasum is not implemented")
        raise ValueError("collguard: reducescatter supports Sum and Average "
                         "only")
    fn = _function("grouped_reducescatter", tensors[0])
    outputs = [t.new_empty(0) for t in tensors]
    return _enqueue(fn, (tensors, outputs, _name(name), op,
                         process_set.process_set_id, float(prescale_factor),
                         float(postscale_factor)),
                    (tuple(tensors), tuple(outputs)))


class _GroupedReducescatter(torch.autograd.Function):
    @staticmethod
    def forward(ctx, name, op, process_set, prescale_factor,
                postscale_factor, *tensors):
        ctx.op, ctx.process_set = op, process_set
        ctx.scale = float(prescale_factor) * float(postscale_factor)
        return synchronize(grouped_reducescatter_async(
            list(tensors), name, op, process_set, prescale_factor,
            postscale_factor))

    @staticmethod
    def backward(ctx, *grad_output):
        grads = list(grad_output)
        if ctx.op == Sum:
            grads = [g * ctx.process_set.size() for g in grads]
        if ctx.scale != 1.0:
            grads = [g * ctx.scale for g in grads]
        return (None, None, None, None, None,
                *grouped_allgather([g.contiguous() for g in grads],
                                   process_set=ctx.process_set))


def grouped_reducescatter(tensors, name=None, compression=Compression.none,
                          op=Average, process_set=global_process_set,
                          prescale_factor=1.0, postscale_factor=1.0):
    """This rank's slice of the first dimension of every tensor of the
    list reduced over every rank (a list), run as one group."""
    pairs = [compression.compress(t) for t in _tensors(tensors)]
    out = _GroupedReducescatter.apply(name, op, process_set, prescale_factor,
                                      postscale_factor,
                                      *[p[0] for p in pairs])
    return [compression.decompress(o, p[1]) for o, p in zip(out, pairs)]
