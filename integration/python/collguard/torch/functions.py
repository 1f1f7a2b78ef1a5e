# SPDX-License-Identifier: Apache-2.0
"""State broadcasts of horovod.torch: broadcast_parameters,
broadcast_optimizer_state, broadcast_object, allgather_object. Unlike
Horovod, tensors that are not leaves but require grad are refused with a
ValueError naming every one of them before anything is sent, so no rank
waits for a broadcast another rank never starts."""
import io
import pickle

import torch

from collguard import basics
from collguard.process_sets import global_process_set
from collguard.torch.mpi_ops import (allgather, broadcast_, broadcast_async_,
                                     synchronize)


def _items(params):
    if isinstance(params, dict):
        return sorted(params.items())
    params = list(params)
    if params and isinstance(params[0], tuple):
        return params
    raise ValueError("invalid params of type: %s" % type(params))


def _reject_non_leaves(named, what):
    bad = [name for name, t in named
           if isinstance(t, torch.Tensor) and t.requires_grad and
           not t.is_leaf]
    if bad:
        raise ValueError(
            "collguard: %s: %d tensor(s) are not leaves but require grad, "
            "so an in-place broadcast would corrupt autograd: %s. Pass "
            "model.state_dict() or leaf parameters (nothing was sent)"
            % (what, len(bad), ", ".join(bad)))


def broadcast_parameters(params, root_rank, process_set=global_process_set):
    """Broadcasts root_rank's parameters in place, from model.state_dict()
    or model.named_parameters() (a dict or a list of (name, tensor))."""
    named = _items(params)
    _reject_non_leaves(named, "broadcast_parameters")
    handles = []
    with torch.no_grad():
        for name, p in named:
            if p is None:
                continue
            handles.append(broadcast_async_(p, root_rank, name, process_set))
    for h in handles:
        synchronize(h)


def _optimizer_tensors(optimizer):
    """(name, tensor) of the state tensors and (name, value) of the
    scalars, in an order that is the same on every rank."""
    tensors, scalars = [], []
    state = optimizer.state_dict()
    for gi, group in enumerate(state["param_groups"]):
        for key in sorted(group):
            if key != "params":
                scalars.append(("group.%d.%s" % (gi, key), group, key))
    for pid in sorted(state["state"]):
        for key in sorted(state["state"][pid]):
            v = state["state"][pid][key]
            name = "state.%s.%s" % (pid, key)
            if isinstance(v, torch.Tensor):
                tensors.append((name, v))
            else:
                scalars.append((name, state["state"][pid], key))
    return state, tensors, scalars


def broadcast_optimizer_state(optimizer, root_rank,
                              process_set=global_process_set):
    """Makes every rank's optimizer state root_rank's: hyperparameters and
    per-parameter state (momentum buffers, Adam moments and steps). A rank
    without state yet (no step taken) creates it with a zero-gradient
    step first, as Horovod."""
    if isinstance(optimizer, torch.optim.LBFGS):
        raise ValueError("cannot broadcast torch.optim.LBFGS state")
    params = [p for g in optimizer.param_groups for p in g["params"]]
    _reject_non_leaves([("param.%d" % i, p) for i, p in enumerate(params)],
                       "broadcast_optimizer_state")
    has_state = torch.tensor([1 if optimizer.state_dict()["state"] else 0])
    if int(allgather(has_state).min().item()) == 0 and \
            not optimizer.state_dict()["state"]:
        for p in params:
            if p.requires_grad and p.grad is None:
                p.grad = torch.zeros_like(p)
        saved = [dict(g) for g in optimizer.param_groups]
        for g in optimizer.param_groups:
            if "lr" in g:
                g["lr"] = 0.0
        optimizer.step()
        for g, s in zip(optimizer.param_groups, saved):
            g.update({k: v for k, v in s.items() if k != "params"})
    state, tensors, scalars = _optimizer_tensors(optimizer)
    handles = [broadcast_async_(t, root_rank, name, process_set)
               for name, t in tensors]
    values = broadcast_object([(name, holder[key])
                               for name, holder, key in scalars],
                              root_rank, process_set=process_set)
    for h in handles:
        synchronize(h)
    for (name, holder, key), (rname, value) in zip(scalars, values):
        if name != rname:
            raise ValueError("collguard: optimizer state differs across "
                             "ranks (%s against root's %s)" % (name, rname))
        holder[key] = value
    optimizer.load_state_dict(state)


def broadcast_object(obj, root_rank=0, name=None,
                     process_set=global_process_set):
    """root_rank's picklable obj on every rank (obj is ignored on the
    others, so the default name does not depend on it)."""
    name = name or "broadcast_object"
    if basics.rank() == root_rank:
        buf = io.BytesIO()
        pickle.dump(obj, buf)
        data = torch.frombuffer(bytearray(buf.getvalue()), dtype=torch.uint8)
        size = torch.tensor([data.numel()], dtype=torch.int64)
    else:
        size = torch.tensor([0], dtype=torch.int64)
    broadcast_(size, root_rank, name + ".sz", process_set)
    if basics.rank() != root_rank:
        data = torch.zeros(int(size.item()), dtype=torch.uint8)
    broadcast_(data, root_rank, name + ".t", process_set)
    return pickle.loads(data.numpy().tobytes())


def allgather_object(obj, name=None, process_set=global_process_set):
    """The list of every rank's picklable obj, in rank order."""
    name = name or "allgather_object"
    data = torch.frombuffer(bytearray(pickle.dumps(obj)), dtype=torch.uint8)
    sizes = allgather(torch.tensor([data.numel()], dtype=torch.int64),
                      name=name + ".sz", process_set=process_set)
    gathered = allgather(data, name=name + ".t", process_set=process_set)
    out, at = [], 0
    for n in sizes.tolist():
        out.append(pickle.loads(gathered[at:at + n].numpy().tobytes()))
        at += n
    return out
