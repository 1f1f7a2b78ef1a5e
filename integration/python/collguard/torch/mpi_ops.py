# SPDX-License-Identifier: Apache-2.0
"""horovod.torch's collective operations over collguard's mpi_lib_v2:
allreduce, broadcast and allgather in their four forms (async or not, in
place or not, autograd for the out-of-place ones), reducescatter (async or
not, autograd), poll, synchronize, join and barrier (the grouped
operations are in grouped, alltoall in alltoall), each with Horovod's
process_set= where it has one. Handles keep their
tensors in _handle_map until synchronized, as Horovod's Python."""
import torch

from collguard import basics
from collguard._native import mpi_lib
from collguard.exceptions import HorovodInternalError
from collguard.process_sets import global_process_set
from collguard.torch import memory
from collguard.torch.compression import Compression

Average, Sum, Adasum = basics.Average, basics.Sum, basics.Adasum
Min, Max, Product = basics.Min, basics.Max, basics.Product

# handle -> (input, output); output is what synchronize returns.
_handle_map = {}


def _reset_handles():
    _handle_map.clear()
    mpi_lib.horovod_torch_reset()


# (kind, dtype, is_cuda, layout) -> the binding function, so a step's
# thousand tensors do not each build the name from tensor.type() and look
# it up (alternating A/B on this 2-core host: within the noise, 6.5-6.8
# against 6.5-7.5 ms a step).
_functions = {}


def _function(kind, tensor):
    key = (kind, tensor.dtype, tensor.is_cuda, tensor.layout)
    fn = _functions.get(key)
    if fn is None:
        name = "horovod_torch_%s_async_%s" % (kind,
                                              tensor.type().replace(".", "_"))
        fn = getattr(mpi_lib, name, None)
        if fn is None:
            raise ValueError("Tensor type %s is not supported." %
                             tensor.type())
        _functions[key] = fn
    if not tensor.is_contiguous():
        raise ValueError("Tensor is required to be contiguous.")
    return fn


def _name(name):
    return name.encode() if name is not None else b""


def _resolve_op(op, average):
    """Horovod's average/op compatibility rule."""
    if op is not None and average is not None:
        raise ValueError("The op parameter supersedes average. Please "
                         "provide only one of them.")
    if average is not None:
        return Average if average else Sum
    return Average if op is None else op


def _enqueue(fn, args, keep):
    try:
        handle = fn(*args)
    except NotImplementedError:
        raise
    except RuntimeError as e:
        raise HorovodInternalError(e)
    _handle_map[handle] = keep
    return handle


def _allreduce_async(tensor, output, name, op, prescale_factor,
                     postscale_factor, process_set):
    if op == Adasum:
        raise NotImplementedError("collguard: Adasum is not implemented")
    fn = _function("allreduce", tensor)
    return _enqueue(fn, (tensor, output, 1, _name(name), op,
                         float(prescale_factor), float(postscale_factor),
                         process_set.process_set_id), (tensor, output))


def allreduce_async(tensor, average=None, name=None, op=None,
                    prescale_factor=1.0, postscale_factor=1.0,
                    process_set=global_process_set):
    """Starts an allreduce of tensor into a new tensor; returns a handle
    for poll/synchronize."""
    op = _resolve_op(op, average)
    output = torch.empty_like(tensor, memory_format=torch.contiguous_format)
    return _allreduce_async(tensor, output, name, op, prescale_factor,
                            postscale_factor, process_set)


def allreduce_async_(tensor, average=None, name=None, op=None,
                     prescale_factor=1.0, postscale_factor=1.0,
                     process_set=global_process_set):
    """Starts an in-place allreduce of tensor."""
    op = _resolve_op(op, average)
    return _allreduce_async(tensor, tensor, name, op, prescale_factor,
                            postscale_factor, process_set)


class _Allreduce(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name, op, prescale_factor, postscale_factor,
                process_set):
        ctx.op, ctx.process_set = op, process_set
        ctx.scale = (prescale_factor, postscale_factor)
        return synchronize(allreduce_async(
            tensor, name=name, op=op, prescale_factor=prescale_factor,
            postscale_factor=postscale_factor, process_set=process_set))

    @staticmethod
    def backward(ctx, grad_output):
        grad = allreduce(grad_output.contiguous(), op=ctx.op, prescale_factor=ctx.scale[0],
                         postscale_factor=ctx.scale[1],
                         process_set=ctx.process_set)
        return grad, None, None, None, None, None


def allreduce(tensor, average=None, name=None, compression=Compression.none,
              op=None, prescale_factor=1.0, postscale_factor=1.0,
              process_set=global_process_set):
    """The reduction of tensor over every rank, as a new tensor; autograd
    reduces the gradient the same way."""
    op = _resolve_op(op, average)
    compressed, cctx = compression.compress(tensor)
    summed = _Allreduce.apply(compressed, name, op, prescale_factor,
                              postscale_factor, process_set)
    return compression.decompress(summed, cctx)


def allreduce_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
               postscale_factor=1.0, process_set=global_process_set):
    """In-place allreduce; returns tensor."""
    return synchronize(allreduce_async_(tensor, average, name, op,
                                        prescale_factor, postscale_factor,
                                        process_set))


def _broadcast_async(tensor, output, root_rank, name, process_set):
    fn = _function("broadcast", tensor)
    return _enqueue(fn, (tensor, output, int(root_rank), _name(name),
                         process_set.process_set_id), (tensor, output))


def broadcast_async(tensor, root_rank, name=None,
                    process_set=global_process_set):
    """Starts a broadcast of root_rank's tensor into a new tensor."""
    output = torch.empty_like(tensor, memory_format=torch.contiguous_format)
    return _broadcast_async(tensor, output, root_rank, name, process_set)


def broadcast_async_(tensor, root_rank, name=None,
                     process_set=global_process_set):
    """Starts an in-place broadcast (refused for a non-leaf tensor that
    requires grad)."""
    return _broadcast_async(tensor, tensor, root_rank, name, process_set)


class _Broadcast(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, root_rank, name, process_set):
        ctx.root_rank, ctx.process_set = root_rank, process_set
        return synchronize(broadcast_async(tensor, root_rank, name,
                                           process_set))

    @staticmethod
    def backward(ctx, grad_output):
        grad = allreduce(grad_output.contiguous(), op=Average,
                         process_set=ctx.process_set)
        if basics.rank() != ctx.root_rank:
            grad = grad * 0
        return grad, None, None, None


def broadcast(tensor, root_rank, name=None, process_set=global_process_set):
    """root_rank's tensor on every rank, as a new tensor (autograd: the
    averaged gradient flows to the root only)."""
    return _Broadcast.apply(tensor, root_rank, name, process_set)


def broadcast_(tensor, root_rank, name=None, process_set=global_process_set):
    """In-place broadcast; returns tensor."""
    return synchronize(broadcast_async_(tensor, root_rank, name, process_set))


def allgather_async(tensor, name=None, process_set=global_process_set):
    """Starts the concatenation of every rank's tensor along dimension 0
    (which may differ per rank)."""
    fn = _function("allgather", tensor)
    output = tensor.new_empty(0)
    return _enqueue(fn, (tensor, output, _name(name),
                         process_set.process_set_id), (tensor, output))


class _Allgather(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name, process_set):
        ctx.dim, ctx.process_set = tensor.shape[0], process_set
        return synchronize(allgather_async(tensor, name, process_set))

    @staticmethod
    def backward(ctx, grad_output):
        grad = allreduce(grad_output.contiguous(), op=Average,
                         process_set=ctx.process_set)
        dims = allgather(torch.tensor([ctx.dim], dtype=torch.int64),
                         process_set=ctx.process_set)
        offset = int(dims[:ctx.process_set.rank()].sum().item())
        return grad.narrow(0, offset, ctx.dim), None, None


def allgather(tensor, name=None, process_set=global_process_set):
    """Every rank's tensor concatenated along dimension 0."""
    return _Allgather.apply(tensor, name, process_set)


def reducescatter_async(tensor, name=None, op=Average,
                        process_set=global_process_set, prescale_factor=1.0,
                        postscale_factor=1.0):
    """Starts the reduction of tensor over every rank (Sum or Average,
    with prescale and postscale), each rank keeping its slice of the first
    dimension (the first dim0 % size ranks one row more); the input is
    not modified. Returns a handle for poll/synchronize."""
    if op not in (Average, Sum):
        if op == Adasum:
            raise NotImplementedError("collguard: Adasum is not implemented")
        raise ValueError("collguard: reducescatter supports Sum and Average "
                         "only")
    fn = _function("reducescatter", tensor)
    output = tensor.new_empty(0)
    return _enqueue(fn, (tensor, output, _name(name), op,
                         process_set.process_set_id, float(prescale_factor),
                         float(postscale_factor)), (tensor, output))


class _Reducescatter(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name, op, process_set, prescale_factor,
                postscale_factor):
        ctx.op, ctx.process_set = op, process_set
        ctx.scale = float(prescale_factor) * float(postscale_factor)
        return synchronize(reducescatter_async(tensor, name, op, process_set,
                                               prescale_factor,
                                               postscale_factor))

    @staticmethod
    def backward(ctx, grad_output):
        # Horovod's rule: the slices gathered back, Sum scaled by the size.
        grad = grad_output
        if ctx.op == Sum:
            grad = grad * ctx.process_set.size()
        if ctx.scale != 1.0:
            grad = grad * ctx.scale
        return (allgather(grad.contiguous(), process_set=ctx.process_set),
                None, None, None, None, None)


def reducescatter(tensor, name=None, compression=Compression.none, op=Average,
                  process_set=global_process_set, prescale_factor=1.0,
                  postscale_factor=1.0):
    """This rank's slice of the first dimension of tensor reduced over
    every rank (autograd: the gradient slices are gathered back)."""
    compressed, cctx = compression.compress(tensor)
    out = _Reducescatter.apply(compressed, name, op, process_set,
                               prescale_factor, postscale_factor)
    return compression.decompress(out, cctx)


def poll(handle):
    """True once the operation behind handle is done (its output final)."""
    return mpi_lib.horovod_torch_poll(handle) != 0


def synchronize(handle):
    """Waits for handle's operation and returns its output; a failure
    (mismatch across ranks, backend error) raises HorovodInternalError.
    Memory-pressure callbacks run here (collguard.torch.memory)."""
    if handle not in _handle_map:
        return None
    try:
        mpi_lib.horovod_torch_wait_and_clear(handle)
        output = _handle_map.pop(handle)[-1]
    except NotImplementedError:
        raise
    except RuntimeError as e:
        _handle_map.pop(handle, None)
        raise HorovodInternalError(e)
    if memory._callbacks:
        memory._check()
    return output


def join(device=-1):
    """Horovod's join: this rank is out of data. Until every rank joined,
    allreduces the others issue complete here with zeros as this rank's
    part (their broadcasts, allgathers and reducescatters fail while a rank
    is joined, as Horovod's). Blocks until every rank joined and returns
    the last rank to join. device: Horovod's, for the zeros (collguard
    keeps them in host memory)."""
    output = torch.tensor(-1, dtype=torch.int32)
    try:
        handle = mpi_lib.horovod_torch_join(output, device)
    except NotImplementedError:
        raise
    except RuntimeError as e:
        raise HorovodInternalError(e)
    _handle_map[handle] = (None, output)
    return int(synchronize(handle).item())


def barrier(process_set=global_process_set):
    """Returns once every rank has called barrier."""
    try:
        handle = mpi_lib.horovod_torch_barrier(process_set.process_set_id)
    except NotImplementedError:
        raise
    except RuntimeError as e:
        raise HorovodInternalError(e)
    _handle_map[handle] = (None, None)
    synchronize(handle)
