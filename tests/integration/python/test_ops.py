# SPDX-License-Identifier: Apache-2.0
"""collguard.torch's collectives at N ranks against values every rank can
compute: allreduce (sum, average, min, max, product; in place or not;
prescale/postscale) over six dtypes and 1-3-D shapes, async with poll,
broadcast from every root, ragged allgather, barrier, objects, autograd,
and Horovod's errors (mismatches on every rank then training goes on,
duplicate names, non-contiguous and unsupported tensors, the operations
the engine lacks). Grouped operations and alltoall: test_grouped.py.
Join and process sets: test_psets_join.py."""
import itertools
import os
import subprocess
import sys
import time

import pytest
import torch

import collguard.torch as hvd
from conftest import DTYPES, SHAPES


def _rank_tensor(shape, dtype, r):
    n = 1
    for d in shape:
        n *= d
    return ((torch.arange(n) % 7) + r + 1).reshape(shape).to(dtype)


@pytest.mark.parametrize("dtype,shape", itertools.product(DTYPES, SHAPES))
def test_allreduce_sum_and_average(dtype, shape):
    n, r = hvd.size(), hvd.rank()
    t = _rank_tensor(shape, dtype, r)
    want = sum(_rank_tensor(shape, torch.float64, k) for k in range(n))
    got = hvd.allreduce(t, op=hvd.Sum, name="sum.%s.%s" % (dtype, shape))
    assert got.dtype == dtype and got.shape == t.shape
    assert torch.equal(got.double(), want)
    assert torch.equal(t, _rank_tensor(shape, dtype, r)), "input modified"
    avg = hvd.allreduce(t.clone(), name="avg.%s.%s" % (dtype, shape))
    tol = 1e-2 if dtype in (torch.float16, torch.bfloat16) else 1e-6
    if dtype.is_floating_point:
        assert torch.allclose(avg.double(), want / n, rtol=tol)
    in_place = t.clone()
    assert hvd.allreduce_(in_place, op=hvd.Sum) is in_place
    assert torch.equal(in_place.double(), want)


@pytest.mark.parametrize("dtype", DTYPES)
def test_allreduce_min_max_product(dtype):
    n, r = hvd.size(), hvd.rank()
    t = torch.tensor([r + 1, 2 * (n - r), 1], dtype=dtype)
    assert hvd.allreduce(t, op=hvd.Min).tolist() == [1, 2, 1]
    assert hvd.allreduce(t, op=hvd.Max).tolist() == [n, 2 * n, 1]
    prod = 1
    for k in range(n):
        prod *= k + 1
    assert hvd.allreduce(t, op=hvd.Product).tolist()[0] == prod


def test_prescale_and_postscale():
    n, r = hvd.size(), hvd.rank()
    t = torch.full((8,), float(r + 1), dtype=torch.float64)
    got = hvd.allreduce(t, op=hvd.Sum, prescale_factor=0.5,
                        postscale_factor=3.0)
    assert torch.allclose(got, torch.full((8,), 1.5 * n * (n + 1) / 2,
                                          dtype=torch.float64))


def _ints(r):
    return [2 * r + 3, -(2 * r + 3), 7, -7, 1, 0, 5 * r - 9]


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
def test_integer_prescale_postscale_truncate_as_horovod(dtype):
    """Horovod's CPU ScaleBuffer: (T)(factor * x) in double, truncating
    toward zero (Python's int() of the same double product)."""
    n, r = hvd.size(), hvd.rank()
    t = torch.tensor(_ints(r), dtype=dtype)
    pre = hvd.allreduce(t, op=hvd.Sum, prescale_factor=0.5)
    want = [sum(int(0.5 * _ints(q)[i]) for q in range(n))
            for i in range(len(t))]
    assert pre.tolist() == want
    post = hvd.allreduce(t, op=hvd.Sum, postscale_factor=0.3)
    want = [int(0.3 * sum(_ints(q)[i] for q in range(n)))
            for i in range(len(t))]
    assert post.tolist() == want
    rows = torch.tensor([_ints(r)] * n, dtype=dtype)
    rs = hvd.reducescatter(rows, op=hvd.Sum, prescale_factor=0.5,
                           postscale_factor=0.7)
    want = [int(0.7 * sum(int(0.5 * _ints(q)[i]) for q in range(n)))
            for i in range(len(t))]
    assert rs.tolist() == [want]


def test_async_poll_is_false_while_a_rank_is_missing_then_synchronize():
    r = hvd.rank()
    tensors = [torch.full((1024,), float(r), dtype=torch.float32)
               for _ in range(20)]
    if r != 0:
        time.sleep(0.3)
    handles = [hvd.allreduce_async_(t, op=hvd.Sum, name="async.%d" % i)
               for i, t in enumerate(tensors)]
    if r == 0:
        assert not hvd.poll(handles[0]), "done before the other ranks came"
    want = float(sum(range(hvd.size())))
    for h, t in zip(handles, tensors):
        assert hvd.synchronize(h) is t
        assert torch.all(t == want)
    before = hvd.core_stats()["fused_calls"]
    hs = [hvd.allreduce_async(torch.ones(256), name="fuse.%d" % i)
          for i in range(50)]
    for h in hs:
        hvd.synchronize(h)
    assert hvd.core_stats()["fused_calls"] > before, "nothing was fused"


def test_core_stats_staging_chunk_without_cuda_staging():
    """Host tensors only: no rank stages CUDA tensors, so no staging chunk
    is agreed and no slot is held (the dict carries both)."""
    hvd.allreduce(torch.ones(4), name="stage.stats")
    s = hvd.core_stats()
    assert s["stage_chunk_bytes"] == 0, s
    assert s["stage_slot_bytes"] == 0, s


def test_core_stats_auto_has_not_chosen_without_cuda_tensors():
    """Host tensors only: AUTO's choice for CUDA tensors waits for the
    first CUDA collective (3), or is COLLGUARD (0) where NCCL is not built
    in, and nothing of NCCL was estimated, made or fallen back from."""
    hvd.allreduce(torch.ones(4), name="auto.stats")
    s = hvd.core_stats()
    want = 3 if hvd.nccl_built() and not os.environ.get(
        "HOROVOD_GPU_OPERATIONS") else None
    if want is not None:
        assert s["gpu_backend"] == want, s
    for k in ("nccl_estimate_bytes", "nccl_budget_bytes",
              "nccl_create_bytes", "nccl_fallbacks"):
        assert s[k] == 0, (k, s)


@pytest.mark.parametrize("dtype", DTYPES + [torch.uint8, torch.int8,
                                            torch.int16])
def test_broadcast_from_every_root(dtype):
    n, r = hvd.size(), hvd.rank()
    for root in range(n):
        for shape in SHAPES:
            t = _rank_tensor(shape, dtype, r)
            got = hvd.broadcast(t, root)
            assert torch.equal(got, _rank_tensor(shape, dtype, root))
            assert torch.equal(t, _rank_tensor(shape, dtype, r))
            hvd.broadcast_(t, root)
            assert torch.equal(t, _rank_tensor(shape, dtype, root))


@pytest.mark.parametrize("dtype", DTYPES + [torch.uint8, torch.int8,
                                            torch.int16])
def test_allgather_ragged(dtype):
    n, r = hvd.size(), hvd.rank()
    for shape in SHAPES:
        mine = (r + 1,) + shape[1:]
        got = hvd.allgather(_rank_tensor(mine, dtype, r))
        want = torch.cat([_rank_tensor((k + 1,) + shape[1:], dtype, k)
                          for k in range(n)])
        assert torch.equal(got, want)


def test_barrier_waits_for_every_rank():
    if hvd.rank() == 0:
        time.sleep(0.5)
    t0 = time.monotonic()
    hvd.barrier()
    if hvd.rank() != 0:
        assert time.monotonic() - t0 > 0.3


def test_objects():
    r = hvd.rank()
    for root in range(hvd.size()):
        assert hvd.broadcast_object({"from": r, "x": [r] * 3}, root) == \
            {"from": root, "x": [root] * 3}
    assert hvd.allgather_object(("r", r)) == [("r", k)
                                              for k in range(hvd.size())]


def test_autograd_allreduce_broadcast_allgather():
    n, r = hvd.size(), hvd.rank()
    x = torch.ones(4, requires_grad=True)
    hvd.allreduce(x * (r + 1), op=hvd.Sum).sum().backward()
    assert torch.allclose(x.grad, torch.full((4,), float(n * (r + 1))))
    y = torch.ones(3, requires_grad=True)
    hvd.broadcast(y * 2, 0).sum().backward()
    assert torch.allclose(y.grad, torch.full((3,), 2.0 if r == 0 else 0.0))
    z = torch.ones(r + 1, 2, requires_grad=True)
    hvd.allgather(z).sum().backward()
    assert torch.allclose(z.grad, torch.ones(r + 1, 2))


def _slice(dim0, n, r):
    # Horovod's split: dim0 // n rows each, the first dim0 % n one more.
    base, extra = divmod(dim0, n)
    start = r * base + min(r, extra)
    return start, base + (1 if r < extra else 0)


RS_SHAPES = [(7,), (5, 3), (2, 3, 4), (1, 2), (12, 2)]


@pytest.mark.parametrize("dtype,shape", itertools.product(DTYPES, RS_SHAPES))
def test_reducescatter_sum_and_average(dtype, shape):
    n, r = hvd.size(), hvd.rank()
    t = _rank_tensor(shape, dtype, r)
    want = sum(_rank_tensor(shape, torch.float64, k) for k in range(n))
    start, rows = _slice(shape[0], n, r)
    got = hvd.reducescatter(t, op=hvd.Sum, name="rs.%s.%s" % (dtype, shape))
    assert got.dtype == dtype
    assert got.shape == (rows,) + tuple(shape[1:])
    assert torch.equal(got.double(), want[start:start + rows])
    assert torch.equal(t, _rank_tensor(shape, dtype, r)), "input modified"
    if dtype.is_floating_point:
        avg = hvd.reducescatter(t, name="rsavg.%s.%s" % (dtype, shape))
        tol = 1e-2 if dtype in (torch.float16, torch.bfloat16) else 1e-6
        assert torch.allclose(avg.double(), want[start:start + rows] / n,
                              rtol=tol)


def test_reducescatter_prescale_postscale_and_async_fused():
    n, r = hvd.size(), hvd.rank()
    handles = []
    for k in range(40):
        t = torch.full((k % 9, 3), float(r + k), dtype=torch.float64)
        handles.append((k, t, hvd.reducescatter_async(
            t, op=hvd.Sum, prescale_factor=0.5, postscale_factor=4.0,
            name="rs.async.%d" % k)))
    for k, t, h in handles:
        got = hvd.synchronize(h)
        _, rows = _slice(k % 9, n, r)
        want = 2.0 * sum(float(q + k) for q in range(n))
        assert got.shape == (rows, 3)
        assert torch.equal(got, torch.full((rows, 3), want,
                                           dtype=torch.float64))
    with pytest.raises(ValueError):
        hvd.reducescatter(torch.ones(4), op=hvd.Max)
    with pytest.raises(ValueError):
        hvd.reducescatter(torch.tensor(1.0))


def test_reducescatter_mismatch_raises_on_every_rank_then_goes_on():
    r = hvd.rank()
    with pytest.raises(hvd.HorovodInternalError):
        hvd.reducescatter(torch.ones(4 + r, 2), name="rs.mismatch.shape")
    dtype = torch.float32 if r == 0 else torch.float64
    with pytest.raises(hvd.HorovodInternalError):
        hvd.reducescatter(torch.ones(4, dtype=dtype), name="rs.mismatch.dt")
    got = hvd.reducescatter(torch.ones(hvd.size() * 2), op=hvd.Sum)
    assert got.tolist() == [float(hvd.size())] * 2


def test_reducescatter_autograd_gathers_the_gradient():
    n = hvd.size()
    z = torch.ones(2 * n + 1, 3, requires_grad=True)
    hvd.reducescatter(z).sum().backward()  # Average: gradient 1 everywhere
    assert torch.equal(z.grad, torch.ones(2 * n + 1, 3))


def test_mismatched_shapes_and_dtypes_raise_on_every_rank_then_go_on():
    r = hvd.rank()
    with pytest.raises(hvd.HorovodInternalError):
        hvd.allreduce(torch.ones(3 + r), name="mismatch.shape")
    dtype = torch.float32 if r == 0 else torch.float64
    with pytest.raises(hvd.HorovodInternalError):
        hvd.allreduce(torch.ones(3, dtype=dtype), name="mismatch.dtype")
    with pytest.raises(hvd.HorovodInternalError):
        hvd.broadcast(torch.ones(2), r, name="mismatch.root")
    assert hvd.allreduce(torch.ones(3), op=hvd.Sum).tolist() == \
        [float(hvd.size())] * 3


def test_duplicate_name_in_flight_is_a_value_error():
    t = torch.ones(17)
    h = hvd.allreduce_async(t, name="duplicate_name")
    with pytest.raises(ValueError):
        hvd.allreduce_async(t, name="duplicate_name")
    hvd.synchronize(h)
    hvd.synchronize(hvd.allreduce_async(t, name="duplicate_name"))


def test_bad_tensors_are_value_errors():
    with pytest.raises(ValueError):
        hvd.allreduce(torch.ones(4, 4).t())
    with pytest.raises(ValueError):
        hvd.allreduce(torch.ones(3, dtype=torch.bool))
    # int16 moves (broadcast, allgather, alltoall) but, as in Horovod's
    # torch binding, has no reduction functions
    for call in (hvd.allreduce, hvd.reducescatter):
        with pytest.raises(ValueError, match="ShortTensor is not supported"):
            call(torch.ones(4, dtype=torch.int16))
    with pytest.raises(ValueError):
        hvd.poll(12345678)


def test_missing_engine_operations_say_so():
    t = torch.ones(4)
    for call in (lambda: hvd.allreduce(t, op=hvd.Adasum),
                 lambda: hvd.grouped_allreduce([t], op=hvd.Adasum)):
        with pytest.raises(NotImplementedError):
            call()


def test_rank_before_init_is_a_value_error():
    code = ("import collguard.torch as hvd\n"
            "try:\n    hvd.rank()\nexcept ValueError:\n    print('ok')\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("CG_RUN")}
    out = subprocess.run([sys.executable, "-c", code], env=env,
                         capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "ok", out.stderr


def test_module_found_beside_the_package(tmp_path):
    import shutil
    from collguard import _native
    pkg = os.path.dirname(os.path.dirname(hvd.__file__))
    shutil.copytree(pkg, tmp_path / "collguard")
    shutil.copy(_native.PATH, tmp_path / "collguard")
    code = ("import collguard._native as n; print(n.PATH)")
    env = {k: v for k, v in os.environ.items()
           if k != "COLLGUARD_LIB" and not k.startswith("CG_RUN")}
    env["PYTHONPATH"] = str(tmp_path)
    out = subprocess.run([sys.executable, "-c", code], env=env,
                         capture_output=True, text=True, timeout=60)
    assert out.stdout.strip().startswith(str(tmp_path)), out.stderr
