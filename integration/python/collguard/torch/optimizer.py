# SPDX-License-Identifier: Apache-2.0
"""DistributedOptimizer as horovod.torch has it: a hook per parameter
starts the gradient's allreduce as soon as autograd has accumulated it
(after backward_passes_per_step passes), step() waits for them first.
With groups (an int: the parameters split into that many groups in
order; a list of lists of parameters: those groups, every other
parameter alone) a group's gradients are reduced by one grouped
allreduce once the last of them is ready, as Horovod 0.28 does.
Beyond Horovod: wrapping parameters that another DistributedOptimizer
already hooks (a second optimizer on the same model, one re-created after
a checkpoint load) removes the earlier hook first and says so once, so
every gradient is reduced once per step."""
import contextlib
import logging
import weakref

import torch

from collguard.process_sets import global_process_set
from collguard.torch.compression import Compression
from collguard.torch.functions import broadcast_object
from collguard.torch.grouped import grouped_allreduce_async_
from collguard.torch.mpi_ops import (Adasum, Average, allreduce_async_,
                                     synchronize)

_log = logging.getLogger("collguard.torch")

# id(parameter) -> (weakref to the parameter, the optimizer owning its hook)
_hook_owner = {}
_warned = {"replaced": False}


def _claim(p, opt):
    """Makes opt the only DistributedOptimizer hooking p."""
    entry = _hook_owner.get(id(p))
    if entry is not None and entry[0]() is p:
        old = entry[1]()
        if old is not None and old is not opt:
            old._release(p)
            if not _warned["replaced"]:
                _warned["replaced"] = True
                _log.warning("collguard: parameters already hooked by "
                             "another DistributedOptimizer were wrapped "
                             "again; the earlier hooks were removed so "
                             "each gradient is reduced once per step")
    _hook_owner[id(p)] = (weakref.ref(p), weakref.ref(opt))


class _DistributedOptimizer(torch.optim.Optimizer):
    def __init__(self, params, named_parameters, compression,
                 backward_passes_per_step, op, gradient_predivide_factor,
                 groups, sparse_as_dense, process_set):
        super(self.__class__, self).__init__(params)
        if op == Adasum:
            raise NotImplementedError("collguard: Adasum is not implemented")
        if groups is not None:
            _check_groups(groups)
        self._groups = groups
        self._p_to_group = {}   # parameter -> its group (a tuple)
        self._group_counts = {}  # group -> members whose hook fired
        self._compression = compression
        self._op = op
        self._gpf = float(gradient_predivide_factor)
        self._sparse_as_dense = sparse_as_dense
        self._process_set = process_set
        self.backward_passes_per_step = int(backward_passes_per_step)
        all_params = [p for g in self.param_groups for p in g["params"]]
        if named_parameters is not None:
            named = list(named_parameters)
            if any(not isinstance(n, tuple) for n in named):
                raise ValueError("named_parameters should be a sequence of "
                                 "tuples (name, parameter)")
            names = [n for n, _ in named]
            dups = sorted({n for n in names if names.count(n) > 1})
            if dups:
                raise ValueError("Parameter names in named_parameters must "
                                 "be unique. Found duplicates: %s"
                                 % ", ".join(dups))
            self._names = {id(p): n for n, p in named}
            missing = [p for p in all_params if id(p) not in self._names]
            if missing:
                raise ValueError("named_parameters was specified, but one "
                                 "or more model parameters were not named. "
                                 "Python object ids: %s"
                                 % ", ".join(str(id(p)) for p in missing))
        else:
            self._names = {id(p): "noname.%d" % i
                           for i, p in enumerate(all_params)}
        self._handles = {}
        self._hooks = {}
        self._grad_accs = []
        self._delay = {}
        self._requires_update = set()
        self._synchronized = False
        self._should_synchronize = True
        if process_set.included():
            self._register_hooks()

    def _form_groups(self):
        """Horovod's rule: the parameters that need a gradient, in rank 0's
        order (broadcast, so every rank forms the same groups), split into
        self._groups groups, or the groups given (members without a
        gradient dropped) and every other parameter a group of its own."""
        p_list = [p for g in self.param_groups for p in g["params"]
                  if p.requires_grad]
        names = broadcast_object([self._names[id(p)] for p in p_list],
                                 root_rank=0, process_set=self._process_set)
        order = {n: i for i, n in enumerate(names)}
        p_list.sort(key=lambda p: order.get(self._names[id(p)], len(order)))
        if isinstance(self._groups, list):
            ids = {id(p) for p in p_list}
            p_groups = [[p for p in g if id(p) in ids] for g in self._groups]
            grouped = {id(p) for g in p_groups for p in g}
            p_groups += [[p] for p in p_list if id(p) not in grouped]
        else:
            n = self._groups
            d, r = divmod(len(p_list), n)
            p_groups = [p_list[i * d + min(i, r):(i + 1) * d + min(i + 1, r)]
                        for i in range(n)]
        for g in p_groups:
            if not g:
                continue
            g = tuple(g)
            for p in g:
                self._p_to_group[p] = g
            self._group_counts[g] = 0

    def _register_hooks(self):
        if self._groups is not None:
            self._form_groups()
        for group in self.param_groups:
            for p in group["params"]:
                if not p.requires_grad:
                    continue
                _claim(p, self)
                self._requires_update.add(p)
                self._delay[p] = self.backward_passes_per_step
                acc = p.expand_as(p).grad_fn.next_functions[0][0]
                self._hooks[p] = acc.register_hook(self._make_hook(p))
                self._grad_accs.append(acc)

    def _release(self, p):
        """Another optimizer now reduces p's gradient."""
        hook = self._hooks.pop(p, None)
        if hook is not None:
            hook.remove()
        self._requires_update.discard(p)
        self._delay.pop(p, None)
        self._handles.pop(p, None)
        group = self._p_to_group.pop(p, None)
        if group is not None:
            # the rest of its group is reduced together without it
            self._group_counts.pop(group, None)
            rest = tuple(q for q in group if q is not p)
            if rest:
                for q in rest:
                    self._p_to_group[q] = rest
                self._group_counts[rest] = 0

    def _dense_grad(self, p):
        if p.grad is None:
            p.grad = p.data.new(p.size()).zero_()
        grad = p.grad
        if grad.is_sparse:
            if not self._sparse_as_dense:
                raise NotImplementedError("collguard: sparse gradients need "
                                          "sparse_as_dense=True")
            grad = p.grad = grad.to_dense()
        return grad

    def _scales(self):
        return (1.0 / self._gpf, self._gpf) if self._op == Average \
            else (1.0, 1.0)

    def _allreduce_grad_async(self, p):
        grad = self._dense_grad(p)
        pre, post = self._scales()
        compressed, ctx = self._compression.compress(grad)
        handle = allreduce_async_(compressed, name=self._names[id(p)],
                                  op=self._op, prescale_factor=pre,
                                  postscale_factor=post,
                                  process_set=self._process_set)
        return handle, ctx, compressed

    def _grouped_allreduce_grad_async(self, ps):
        """One grouped allreduce of the gradients of group ps, named after
        its first parameter as Horovod names it. Unlike Horovod's, the
        gradient_predivide_factor split applies here too, so a grouped
        gradient is bit for bit the one reduced alone."""
        pairs = [self._compression.compress(self._dense_grad(p)) for p in ps]
        compressed = [c for c, _ in pairs]
        pre, post = self._scales()
        handle = grouped_allreduce_async_(compressed,
                                          name=self._names[id(ps[0])],
                                          op=self._op, prescale_factor=pre,
                                          postscale_factor=post,
                                          process_set=self._process_set)
        return handle, tuple(ctx for _, ctx in pairs), compressed

    def _make_hook(self, p):
        def hook(*ignore):
            if p in self._handles and self._handles[p][0] is not None:
                if self._delay[p] <= 0:
                    raise AssertionError(
                        "Gradients were computed more than "
                        "backward_passes_per_step times before call to "
                        "step(). Increase backward_passes_per_step to "
                        "accumulate gradients locally.")
            assert not p.grad.requires_grad
            assert self._delay[p] > 0
            entry = (None, None, None)
            self._delay[p] -= 1
            if self._delay[p] == 0 and self._groups is not None:
                group = self._p_to_group[p]
                self._group_counts[group] += 1
                if self._group_counts[group] == len(group):
                    self._handles[group] = \
                        self._grouped_allreduce_grad_async(group)
                    for q in group:  # the no-op entries of earlier hooks
                        self._handles.pop(q, None)
                    self._group_counts[group] = 0
                    return
            elif self._delay[p] == 0:
                entry = self._allreduce_grad_async(p)
            self._handles[p] = entry
        return hook

    def synchronize(self):
        """Waits for every gradient's allreduce (starting those whose hook
        did not fire, so the ranks stay in step) and writes them back."""
        started = set()
        for key in self._handles:
            if isinstance(key, tuple):
                started.update(key)
            else:
                started.add(key)
        # as Horovod: a group whose hooks did not all fire is reduced
        # tensor by tensor
        for p in sorted(self._requires_update - started,
                        key=lambda q: self._names[id(q)]):
            self._handles[p] = self._allreduce_grad_async(p)
        for p, (handle, ctx, compressed) in list(self._handles.items()):
            if isinstance(p, tuple):
                outputs = synchronize(handle)
                for gp, output, gctx in zip(p, outputs, ctx):
                    self._delay[gp] = self.backward_passes_per_step
                    result = self._compression.decompress(output, gctx)
                    if result is not gp.grad:
                        gp.grad.copy_(result)
                continue
            if handle is None:
                handle, ctx, compressed = self._allreduce_grad_async(p)
            output = synchronize(handle)
            self._delay[p] = self.backward_passes_per_step
            result = self._compression.decompress(output, ctx)
            if result is not p.grad:
                p.grad.copy_(result)
        for group in self._group_counts:
            self._group_counts[group] = 0
        self._handles.clear()
        self._synchronized = True

    @contextlib.contextmanager
    def skip_synchronize(self):
        """step() inside this block does not synchronize (call
        synchronize() yourself first, e.g. to clip gradients)."""
        self._should_synchronize = False
        try:
            yield
        finally:
            self._should_synchronize = True

    def step(self, closure=None):
        if self._should_synchronize:
            if self._synchronized:
                _log.warning("optimizer.step() called without "
                             "optimizer.skip_synchronize() after "
                             "optimizer.synchronize(); gradients may be "
                             "reduced twice")
            self.synchronize()
        self._synchronized = False
        return super(self.__class__, self).step(closure)

    def zero_grad(self, *args, **kwargs):
        if self._handles:
            raise AssertionError("optimizer.zero_grad() was called after "
                                 "loss.backward() but before "
                                 "optimizer.step() or "
                                 "optimizer.synchronize(). This is "
                                 "prohibited as it can cause a race "
                                 "condition.")
        return super(self.__class__, self).zero_grad(*args, **kwargs)


def _check_groups(groups):
    """Horovod's checks of DistributedOptimizer(groups=...)."""
    if not (isinstance(groups, list) or groups > 0):
        raise ValueError("groups should be a non-negative integer or a list "
                         "of list of torch.Tensor.")
    if isinstance(groups, list):
        seen = set()
        for group in groups:
            for p in group:
                if not isinstance(p, torch.Tensor):
                    raise ValueError("groups must consist of torch.Tensor.")
                if id(p) in seen:
                    raise ValueError("A parameter can only appear once in "
                                     "groups.")
                seen.add(id(p))


def DistributedOptimizer(optimizer, named_parameters=None,
                         compression=Compression.none,
                         backward_passes_per_step=1, op=Average,
                         gradient_predivide_factor=1.0, num_groups=0,
                         groups=None, sparse_as_dense=False,
                         process_set=global_process_set):
    """Wraps optimizer so that step() applies gradients averaged (op) over
    every rank; Horovod's arguments and defaults. groups (or the older
    num_groups): an int, the parameters split into that many groups, or a
    list of lists of parameters; each group's gradients are reduced by one
    grouped allreduce."""
    if gradient_predivide_factor != 1.0 and op != Average:
        raise ValueError("gradient_predivide_factor not supported with "
                         "op != Average")
    if num_groups:
        groups = num_groups
    cls = type(optimizer.__class__.__name__, (optimizer.__class__,),
               dict(_DistributedOptimizer.__dict__))
    return cls(optimizer.param_groups, named_parameters, compression,
               backward_passes_per_step, op, gradient_predivide_factor,
               groups, sparse_as_dense, process_set)
