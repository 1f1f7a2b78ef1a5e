# SPDX-License-Identifier: Apache-2.0
"""collguard.torch's grouped operations and alltoall at N ranks against
values every rank can compute: grouped allreduce (sum, average, in place,
prescale/postscale), grouped allgather and grouped reducescatter over six
dtypes and 1-3-D shapes, one handle per group whose members fuse into one
collective, a member mismatched on one rank raising on every rank with
training going on, alltoall with uneven splits (zero rows included) and
the equal split over 1-3-D shapes, its errors as Horovod raises them,
and autograd through both."""
import itertools

import pytest
import torch

import collguard.torch as hvd
from collguard.exceptions import HorovodInternalError
from conftest import DTYPES, SHAPES


def _value(shape, dtype, r, k=0):
    n = 1
    for d in shape:
        n *= d
    return ((torch.arange(n) % 7) + r + k + 1).reshape(shape).to(dtype)


def _members(dtype, r):
    return [_value(s, dtype, r, k) for k, s in enumerate(SHAPES)]


@pytest.mark.parametrize("dtype", DTYPES)
def test_grouped_allreduce_every_dtype(dtype):
    n, r = hvd.size(), hvd.rank()
    want = [sum(_value(s, torch.float64, q, k) for q in range(n))
            for k, s in enumerate(SHAPES)]
    got = hvd.grouped_allreduce(_members(dtype, r), op=hvd.Sum)
    assert isinstance(got, list) and len(got) == len(SHAPES)
    for g, w in zip(got, want):
        assert g.dtype == dtype and g.shape == w.shape
        assert torch.equal(g.double(), w)
    inplace = _members(dtype, r)
    back = hvd.grouped_allreduce_(inplace, op=hvd.Sum)
    assert all(b is t for b, t in zip(back, inplace))
    assert all(torch.equal(t.double(), w) for t, w in zip(inplace, want))
    if dtype.is_floating_point:
        avg = hvd.grouped_allreduce(_members(dtype, r), average=True)
        tol = 1e-2 if dtype in (torch.float16, torch.bfloat16) else 1e-6
        assert all(torch.allclose(a.double(), w / n, rtol=tol)
                   for a, w in zip(avg, want))


def test_grouped_allreduce_scales_and_fuses_in_one_call():
    n, r = hvd.size(), hvd.rank()
    before = hvd.core_stats()
    ts = [torch.full((4,), float(r + k)) for k in range(10)]
    h = hvd.grouped_allreduce_async(ts, op=hvd.Sum, prescale_factor=2.0,
                                    postscale_factor=0.5)
    out = hvd.synchronize(h)
    after = hvd.core_stats()
    assert isinstance(out, tuple) and len(out) == 10
    for k, o in enumerate(out):
        assert o.tolist() == [float(sum(q + k for q in range(n)))] * 4
    assert after["allreduce_calls"] - before["allreduce_calls"] == 1
    assert after["max_fused_tensors"] >= 10
    assert after["grouped_calls"] - before["grouped_calls"] == 1


@pytest.mark.parametrize("dtype,shape", itertools.product(
    DTYPES + [torch.int16], SHAPES))
def test_grouped_allgather_ragged(dtype, shape):
    n, r = hvd.size(), hvd.rank()
    mine = [_value((r + 1 + k,) + shape[1:], dtype, r, k) for k in range(3)]
    got = hvd.grouped_allgather(mine)
    for k, g in enumerate(got):
        want = torch.cat([_value((q + 1 + k,) + shape[1:], dtype, q, k)
                          for q in range(n)])
        assert torch.equal(g, want)


@pytest.mark.parametrize("dtype", DTYPES)
def test_grouped_reducescatter_every_dtype(dtype):
    n, r = hvd.size(), hvd.rank()
    shapes = [(7,), (5, 3), (n + 1, 2, 2)]
    got = hvd.grouped_reducescatter([_value(s, dtype, r, k)
                                     for k, s in enumerate(shapes)],
                                    op=hvd.Sum)
    for k, (g, s) in enumerate(zip(got, shapes)):
        whole = sum(_value(s, torch.float64, q, k) for q in range(n))
        rows = [s[0] // n + (1 if q < s[0] % n else 0) for q in range(n)]
        start = sum(rows[:r])
        assert torch.equal(g.double(), whole[start:start + rows[r]])


def test_grouped_mismatch_raises_on_every_rank_then_goes_on():
    r = hvd.rank()
    bad = [torch.ones(3), torch.ones(4 if r == 1 else 3), torch.ones(2)]
    with pytest.raises(HorovodInternalError, match="mismatched shape"):
        hvd.grouped_allreduce(bad, name="g.bad")
    with pytest.raises(HorovodInternalError, match="mismatched"):
        hvd.grouped_allgather([torch.ones(2, 3 + (r == 1))], name="g.badag")
    got = hvd.grouped_allreduce([torch.ones(3)], op=hvd.Sum, name="g.bad")
    assert got[0].tolist() == [float(hvd.size())] * 3


def test_grouped_errors_at_enqueue():
    with pytest.raises(ValueError):
        hvd.grouped_allreduce([])
    with pytest.raises(ValueError):
        hvd.grouped_reducescatter([torch.zeros(3, 1), torch.tensor(1.0)])
    with pytest.raises(ValueError):
        hvd.grouped_allreduce([torch.ones(4, 4).t()])


def test_grouped_autograd():
    n, r = hvd.size(), hvd.rank()
    xs = [torch.ones(3, requires_grad=True), torch.ones(2, 2,
                                                        requires_grad=True)]
    ys = hvd.grouped_allreduce(xs, op=hvd.Sum)
    sum(y.sum() for y in ys).backward()
    assert all(torch.equal(x.grad, torch.full_like(x, float(n))) for x in xs)
    g = torch.ones(r + 1, 2, requires_grad=True)
    (out,) = hvd.grouped_allgather([g])
    (out * 2).sum().backward()
    assert torch.equal(g.grad, torch.full_like(g, 2.0))


def _a2a_rows(src, dst):
    return (src + 2 * dst) % 3  # 0, 1 or 2 rows


def _a2a_block(src, dst, shape, dtype):
    rows = _a2a_rows(src, dst)
    return _value((rows,) + shape[1:], dtype, src, dst)


@pytest.mark.parametrize("dtype,shape", itertools.product(
    DTYPES + [torch.uint8, torch.int8, torch.int16], SHAPES))
def test_alltoall_uneven_splits(dtype, shape):
    n, r = hvd.size(), hvd.rank()
    mine = torch.cat([_a2a_block(r, d, shape, dtype) for d in range(n)])
    splits = torch.tensor([_a2a_rows(r, d) for d in range(n)],
                          dtype=torch.int32)
    out, received = hvd.alltoall(mine, splits=splits)
    want = torch.cat([_a2a_block(s, r, shape, dtype) for s in range(n)])
    assert out.dtype == dtype and torch.equal(out, want)
    assert received.dtype == torch.int32
    assert received.tolist() == [_a2a_rows(s, r) for s in range(n)]


def test_alltoall_equal_split_and_async():
    n, r = hvd.size(), hvd.rank()
    t = torch.arange(2 * n, dtype=torch.float64) + 100 * r
    out = hvd.alltoall(t)
    assert out.tolist() == [float(100 * s + 2 * r + i) for s in range(n)
                            for i in range(2)]
    h = hvd.alltoall_async(t.reshape(n, 2), splits=[1] * n)
    out, received = hvd.synchronize(h)
    assert out.shape == (n, 2) and received.tolist() == [1] * n


def test_alltoall_errors_as_horovod():
    n, r = hvd.size(), hvd.rank()
    with pytest.raises(ValueError):  # first dimension not a multiple
        hvd.alltoall(torch.empty(n + 1))
    with pytest.raises(ValueError):  # splits sum past the first dimension
        hvd.alltoall(torch.empty(n - 1), torch.ones(n, dtype=torch.int32))
    with pytest.raises(ValueError):  # splits not int32
        hvd.alltoall(torch.empty(n), torch.empty(n, dtype=torch.float32))
    with pytest.raises(HorovodInternalError, match="mismatched dtype"):
        hvd.alltoall(torch.empty(n, dtype=torch.int32 if r % 2 else
                                 torch.float32))
    with pytest.raises(HorovodInternalError, match="mismatched shape"):
        hvd.alltoall(torch.ones(2 * n, 10 * (r + 1)))
    out = hvd.alltoall(torch.full((n,), float(r)))
    assert out.tolist() == [float(s) for s in range(n)]


def test_alltoall_autograd():
    n, r = hvd.size(), hvd.rank()
    x = torch.arange(float(2 * n), requires_grad=True)
    splits = torch.tensor([2] * n, dtype=torch.int32)
    out, _ = hvd.alltoall(x, splits)
    (out * (r + 1)).sum().backward()
    # Rows sent to rank d come back weighted by d + 1.
    assert x.grad.tolist() == [float(d + 1) for d in range(n) for _ in (0, 1)]
