# SPDX-License-Identifier: Apache-2.0
"""Training through collguard.torch at N ranks: a small MLP trained for
20 steps on 1/N of the batch per rank with DistributedOptimizer (also
with backward_passes_per_step=2, and through DDP with ddp_comm_hook) ends
with the parameters one process gets on the whole batch; optimizer state
(SGD with momentum, Adam) broadcast from root; a second wrap of the same
parameters reduces each gradient once per step; non-leaf tensors are
refused by the state broadcasts before anything is sent.
CG_TEST_DEVICE=cuda runs the same on CUDA tensors (rank i on GPU
local rank % GPUs; integration/gpu/py_equivalence.sh)."""
import copy
import os
import socket
import time

import pytest
import torch
import torch.distributed as dist

import collguard.torch as hvd

BATCH, STEPS = 24, 20


def _device():
    if os.environ.get("CG_TEST_DEVICE", "cpu") != "cuda":
        return torch.device("cpu")
    local = int(os.environ.get("CG_RUN_LOCAL_RANK",
                               os.environ.get("OMPI_COMM_WORLD_LOCAL_RANK",
                                              "0")))
    dev = torch.device("cuda", local % torch.cuda.device_count())
    torch.cuda.set_device(dev)
    return dev


DEV = _device()


def _model():
    torch.manual_seed(7)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(),
                               torch.nn.Linear(16, 4)).to(DEV)


def _data():
    g = torch.Generator().manual_seed(11)
    return (torch.randn(BATCH, 8, generator=g).to(DEV),
            torch.randn(BATCH, 4, generator=g).to(DEV))


def _slice(t):
    n, r = hvd.size(), hvd.rank()
    k = BATCH // n
    return t[r * k:(r + 1) * k]


def _reference(passes=1):
    model = _model()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    x, y = _data()
    for _ in range(STEPS):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y) * passes
        loss.backward()
        opt.step()
    return model


def _assert_same(model, ref):
    for (name, p), q in zip(model.named_parameters(), ref.parameters()):
        assert torch.allclose(p, q, rtol=1e-5, atol=1e-6), name


@pytest.mark.parametrize("passes", [1, 2])
def test_distributed_optimizer_matches_one_process(passes):
    model = _model()
    opt = hvd.DistributedOptimizer(
        torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9),
        named_parameters=model.named_parameters(),
        backward_passes_per_step=passes)
    hvd.broadcast_parameters(model.state_dict(), 0)
    x, y = _slice(_data()[0]), _slice(_data()[1])
    for _ in range(STEPS):
        opt.zero_grad()
        for xm, ym in zip(x.chunk(passes), y.chunk(passes)):
            torch.nn.functional.mse_loss(model(xm), ym).backward()
        opt.step()
    _assert_same(model, _reference(passes))


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_ddp_comm_hook_matches_one_process():
    port = hvd.broadcast_object(_free_port() if hvd.rank() == 0 else None, 0)
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port,
                            rank=hvd.rank(), world_size=hvd.size())
    try:
        model = torch.nn.parallel.DistributedDataParallel(_model())
        model.register_comm_hook(None, hvd.ddp_comm_hook)
        opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        before = hvd.core_stats()["allreduce_tensors"]
        x, y = _slice(_data()[0]), _slice(_data()[1])
        for _ in range(STEPS):
            opt.zero_grad()
            torch.nn.functional.mse_loss(model(x), y).backward()
            opt.step()
        assert hvd.core_stats()["allreduce_tensors"] - before >= STEPS
        _assert_same(model.module, _reference())
    finally:
        dist.destroy_process_group()


def test_ddp_comm_hook_returns_before_the_bucket_is_reduced():
    """The hook's future completes when the collective does, not inside
    the hook: with the last rank late into backward, rank 0's first
    bucket cannot be reduced yet when its hook returns. backward() still
    ends with every rank holding the full batch's gradients."""
    port = hvd.broadcast_object(_free_port() if hvd.rank() == 0 else None, 0)
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port,
                            rank=hvd.rank(), world_size=hvd.size())
    try:
        model = torch.nn.parallel.DistributedDataParallel(_model())
        done_at_return = []

        def hook(state, bucket):
            fut = hvd.ddp_comm_hook(state, bucket)
            done_at_return.append(fut.done())
            return fut

        model.register_comm_hook(None, hook)
        x, y = _slice(_data()[0]), _slice(_data()[1])
        loss = torch.nn.functional.mse_loss(model(x), y)
        if hvd.rank() == hvd.size() - 1:
            time.sleep(0.5)
        loss.backward()
        if hvd.rank() == 0:
            assert done_at_return and done_at_return[0] is False, \
                done_at_return
        ref = _model()
        torch.nn.functional.mse_loss(ref(_data()[0]), _data()[1]).backward()
        for p, q in zip(model.module.parameters(), ref.parameters()):
            assert torch.allclose(p.grad, q.grad, rtol=1e-5, atol=1e-6)
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("make", [
    lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9),
    lambda ps: torch.optim.Adam(ps, lr=0.01)], ids=["sgd_momentum", "adam"])
def test_optimizer_state_broadcast(make):
    r = hvd.rank()
    model = _model()
    opt = make(model.parameters())
    for _ in range(r + 1):  # different state on every rank
        opt.zero_grad()
        (model(torch.randn(4, 8).to(DEV)) ** 2).sum().backward()
        opt.step()
    for g in opt.param_groups:
        g["lr"] = 0.1 * (r + 1)
    hvd.broadcast_optimizer_state(opt, 0)
    state = opt.state_dict()
    gathered = hvd.allgather_object(
        [(k, v.tolist() if isinstance(v, torch.Tensor) else v)
         for pid in sorted(state["state"])
         for k, v in sorted(state["state"][pid].items())])
    assert all(g == gathered[0] for g in gathered)
    assert opt.param_groups[0]["lr"] == pytest.approx(0.1)


def test_second_wrap_reduces_each_gradient_once():
    model = _model()
    nparams = len(list(model.parameters()))
    base = torch.optim.SGD(model.parameters(), lr=0.05)
    hvd.DistributedOptimizer(base, named_parameters=model.named_parameters())
    opt = hvd.DistributedOptimizer(
        torch.optim.SGD(model.parameters(), lr=0.05),
        named_parameters=model.named_parameters())
    x, y = _slice(_data()[0]), _slice(_data()[1])
    for _ in range(3):
        before = hvd.core_stats()
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
        after = hvd.core_stats()
        assert after["allreduce_tensors"] - before["allreduce_tensors"] == \
            nparams
        assert after["duplicates"] == before["duplicates"]


def test_non_leaf_tensors_are_refused_before_anything_is_sent():
    model = _model()
    w = model[0].weight * 2  # not a leaf, requires grad
    b = model[2].bias + 1
    with pytest.raises(ValueError) as e:
        hvd.broadcast_parameters([("w2", w), ("ok", model[0].bias),
                                  ("b1", b)], 0)
    assert "w2" in str(e.value) and "b1" in str(e.value)
    assert "ok" not in str(e.value).split(":")[-2]
    hvd.broadcast_parameters(model.state_dict(), 0)
    hvd.broadcast_parameters(model.named_parameters(), 0)
    assert hvd.allreduce(torch.ones(2).to(DEV), op=hvd.Sum).tolist() == \
        [float(hvd.size())] * 2


def _grouped_calls(monkeypatch):
    """Records the member count of every grouped allreduce the optimizer
    starts."""
    import collguard.torch.optimizer as optmod
    calls = []
    real = optmod.grouped_allreduce_async_

    def spy(tensors, **kw):
        calls.append(len(tensors))
        return real(tensors, **kw)
    monkeypatch.setattr(optmod, "grouped_allreduce_async_", spy)
    return calls


@pytest.mark.parametrize("passes", [1, 2])
@pytest.mark.parametrize("how", ["int", "lists"])
def test_distributed_optimizer_groups_match_one_process(monkeypatch, how,
                                                        passes):
    calls = _grouped_calls(monkeypatch)
    model = _model()
    ps = list(model.parameters())  # w0 b0 w1 b1
    groups = 2 if how == "int" else [[ps[3], ps[0]]]
    opt = hvd.DistributedOptimizer(
        torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9),
        named_parameters=model.named_parameters(),
        backward_passes_per_step=passes, groups=groups)
    hvd.broadcast_parameters(model.state_dict(), 0)
    x, y = _slice(_data()[0]), _slice(_data()[1])
    for _ in range(STEPS):
        opt.zero_grad()
        for xm, ym in zip(x.chunk(passes), y.chunk(passes)):
            torch.nn.functional.mse_loss(model(xm), ym).backward()
        opt.step()
    # int: two groups of two parameters each step; lists: the group given
    # and, as in Horovod, b0 and w1 each a group of its own
    per_step = [2, 2] if how == "int" else [1, 1, 2]
    assert sorted(calls) == sorted(per_step * STEPS)
    _assert_same(model, _reference(passes))


def test_grouped_gradients_equal_ungrouped_bit_for_bit(monkeypatch):
    calls = _grouped_calls(monkeypatch)
    grads = []
    for groups in (None, 1, 3):
        model = _model()
        opt = hvd.DistributedOptimizer(
            torch.optim.SGD(model.parameters(), lr=0.05),
            named_parameters=model.named_parameters(), groups=groups,
            gradient_predivide_factor=2.0)
        x, y = _slice(_data()[0]), _slice(_data()[1])
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.synchronize()
        grads.append([p.grad.clone() for p in model.parameters()])
        with opt.skip_synchronize():
            opt.step()
    # groups=1: one call of all four; groups=3: split 2, 1, 1 (the calls
    # start as backward reaches each group's last gradient: 1, 1, 2)
    assert calls[0] == 4 and sorted(calls[1:]) == [1, 1, 2]
    for g in grads[1:]:
        assert all(torch.equal(a, b) for a, b in zip(grads[0], g))


def test_bad_groups_are_value_errors():
    model = _model()
    ps = list(model.parameters())
    for groups in (-1, [[ps[0], 3]], [[ps[0]], [ps[1], ps[0]]]):
        with pytest.raises(ValueError):
            hvd.DistributedOptimizer(
                torch.optim.SGD(model.parameters(), lr=0.05),
                named_parameters=model.named_parameters(), groups=groups)
