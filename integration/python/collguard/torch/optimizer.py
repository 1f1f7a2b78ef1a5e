# SPDX-License-Identifier: Apache-2.0
"""DistributedOptimizer as horovod.torch has it: a hook per parameter
starts the gradient's allreduce as soon as autograd has accumulated it
(after backward_passes_per_step passes), step() waits for them first.
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
            raise NotImplementedError(
                "collguard: DistributedOptimizer(groups=...) needs grouped "
                "allreduce, which the engine does not have yet")
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

    def _register_hooks(self):
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

    def _allreduce_grad_async(self, p):
        if p.grad is None:
            p.grad = p.data.new(p.size()).zero_()
        grad = p.grad
        if grad.is_sparse:
            if not self._sparse_as_dense:
                raise NotImplementedError("collguard: sparse gradients need "
                                          "sparse_as_dense=True")
            grad = p.grad = grad.to_dense()
        pre, post = (1.0 / self._gpf, self._gpf) if self._op == Average \
            else (1.0, 1.0)
        compressed, ctx = self._compression.compress(grad)
        handle = allreduce_async_(compressed, name=self._names[id(p)],
                                  op=self._op, prescale_factor=pre,
                                  postscale_factor=post,
                                  process_set=self._process_set)
        return handle, ctx, compressed

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
            if self._delay[p] == 0:
                entry = self._allreduce_grad_async(p)
            self._handles[p] = entry
        return hook

    def synchronize(self):
        """Waits for every gradient's allreduce (starting those whose hook
        did not fire, so the ranks stay in step) and writes them back."""
        for p in sorted(self._requires_update - set(self._handles),
                        key=lambda q: self._names[id(q)]):
            self._handles[p] = self._allreduce_grad_async(p)
        for p, (handle, ctx, compressed) in list(self._handles.items()):
            if handle is None:
                handle, ctx, compressed = self._allreduce_grad_async(p)
            output = synchronize(handle)
            self._delay[p] = self.backward_passes_per_step
            result = self._compression.decompress(output, ctx)
            if result is not p.grad:
                p.grad.copy_(result)
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


def DistributedOptimizer(optimizer, named_parameters=None,
                         compression=Compression.none,
                         backward_passes_per_step=1, op=Average,
                         gradient_predivide_factor=1.0, num_groups=0,
                         groups=None, sparse_as_dense=False,
                         process_set=global_process_set):
    """Wraps optimizer so that step() applies gradients averaged (op) over
    every rank; Horovod's arguments and defaults. num_groups and groups
    need grouped allreduce (NotImplementedError when set)."""
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
