# SPDX-License-Identifier: Apache-2.0
"""collguard.torch's process sets and join at N ranks (run with
HOROVOD_DYNAMIC_PROCESS_SETS=1): collectives on a set of all ranks but
the last against references while the last works on a set of its own,
overlapping sets, Average dividing by the set's size, ValueError for
non-members, unknown and removed sets; join after uneven work (rank r
runs r + 1 steps, named and unnamed allreduces) with results where joined
ranks add zeros and the last rank returned on every rank, join with
nothing to do, barrier after join, unnamed ops matching after an uneven
join, and a broadcast failing while a rank is joined. Grouped operations
and alltoall with splits on a set against references, grouped allreduces
with joined ranks adding zeros, and alltoall / grouped allgather failing
while a rank is joined."""
import pytest
import torch

import collguard.torch as hvd
from collguard.exceptions import HorovodInternalError


def _vals(r, step, n=11):
    return torch.arange(n, dtype=torch.float64) + 100 * (r + 1) + 10 * step


@pytest.fixture
def sets():
    """A set of every rank but the last ({0} at 2 ranks) and one of the
    last rank alone, removed afterwards."""
    n = hvd.size()
    first = hvd.add_process_set(list(range(n - 1)))
    last = hvd.add_process_set([n - 1])
    yield first, last
    assert hvd.remove_process_set(first) and hvd.remove_process_set(last)


def test_collectives_on_a_set_while_the_last_rank_works_alone(sets):
    first, last = sets
    n, r = hvd.size(), hvd.rank()
    members = first.ranks
    if r in members:
        assert first.rank() == members.index(r) and first.size() == n - 1
        for step in range(3):
            got = hvd.allreduce(_vals(r, step), op=hvd.Sum, process_set=first)
            assert torch.equal(got, sum(_vals(m, step) for m in members))
            avg = hvd.allreduce(_vals(r, step), process_set=first)
            assert torch.allclose(avg, got / len(members))
        root = members[-1]
        b = hvd.broadcast(_vals(r, 7), root, name="b", process_set=first)
        assert torch.equal(b, _vals(root, 7))
        g = hvd.allgather(_vals(r, 0, r + 1).reshape(r + 1, 1),
                          process_set=first)
        want = torch.cat([_vals(m, 0, m + 1) for m in members]).reshape(-1, 1)
        assert torch.equal(g, want)
        rows = 2 * len(members) + 1
        rs = hvd.reducescatter(_vals(r, 3, rows * 2).reshape(rows, 2),
                               op=hvd.Sum, process_set=first)
        full = sum(_vals(m, 3, rows * 2) for m in members).reshape(rows, 2)
        k = members.index(r)
        start = k * (rows // len(members)) + min(k, rows % len(members))
        assert torch.equal(rs, full[start:start + rs.shape[0]])
        hvd.barrier(process_set=first)
        with pytest.raises(ValueError, match="not a member"):
            hvd.allreduce(torch.ones(2), process_set=last)
    else:
        with pytest.raises(ValueError, match="not a member"):
            hvd.allreduce(torch.ones(2), process_set=first)
        for step in range(3):
            got = hvd.allreduce(_vals(r, step), op=hvd.Sum, process_set=last)
            assert torch.equal(got, _vals(r, step))
    # Everyone meets on the global set afterwards.
    total = hvd.allreduce(torch.ones(1), op=hvd.Sum, name="after_sets")
    assert total.item() == n


def _a2a_splits(k, m):
    """Rows set rank k sends to each of m set ranks: k + j + 1 to j."""
    return [k + j + 1 for j in range(m)]


def test_grouped_and_alltoall_on_a_set_while_the_last_rank_works_alone(sets):
    first, last = sets
    n, r = hvd.size(), hvd.rank()
    members = first.ranks
    if r in members:
        k, m = members.index(r), len(members)
        for step in range(2):
            ins = [_vals(r, step + g) for g in range(3)]
            got = hvd.grouped_allreduce(ins, op=hvd.Sum, process_set=first)
            for g in range(3):
                assert torch.equal(got[g], sum(_vals(q, step + g)
                                               for q in members))
            # Unnamed groups are numbered on the set: every member agrees.
            avg = hvd.grouped_allreduce([_vals(r, 5)], process_set=first)
            assert torch.allclose(avg[0], sum(_vals(q, 5) for q in members) / m)
        ag = hvd.grouped_allgather([_vals(r, 0, r + 1), _vals(r, 1, 2)],
                                   process_set=first)
        assert torch.equal(ag[0], torch.cat([_vals(q, 0, q + 1)
                                             for q in members]))
        assert torch.equal(ag[1], torch.cat([_vals(q, 1, 2) for q in members]))
        rows = 2 * m + 1
        rs = hvd.grouped_reducescatter([_vals(r, 3, rows)], op=hvd.Sum,
                                       process_set=first)
        full = sum(_vals(q, 3, rows) for q in members)
        start = k * (rows // m) + min(k, rows % m)
        assert torch.equal(rs[0], full[start:start + rs[0].shape[0]])
        # Alltoall by the set's ranks: splits are one per member.
        sp = _a2a_splits(k, m)
        x = _vals(r, 4, 2 * sum(sp)).reshape(-1, 2)
        out, received = hvd.alltoall(x, splits=sp, process_set=first)
        want, wsp = [], []
        for i, q in enumerate(members):
            qs = _a2a_splits(i, m)
            qx = _vals(q, 4, 2 * sum(qs)).reshape(-1, 2)
            off = sum(qs[:k])
            want.append(qx[off:off + qs[k]])
            wsp.append(qs[k])
        assert torch.equal(out, torch.cat(want))
        assert received.tolist() == wsp
        eq = hvd.alltoall(_vals(r, 6, 3 * m), process_set=first)
        assert torch.equal(eq, torch.cat([_vals(q, 6, 3 * m)[3 * k:3 * k + 3]
                                          for q in members]))
        with pytest.raises(ValueError, match="not a member"):
            hvd.grouped_allreduce([torch.ones(2)], process_set=last)
        with pytest.raises(ValueError, match="not a member"):
            hvd.alltoall(torch.ones(2), process_set=last)
        with pytest.raises(ValueError, match="one per rank"):
            hvd.alltoall(torch.ones(m + 1), splits=[1] * (m + 1),
                         process_set=first)
    else:
        with pytest.raises(ValueError, match="not a member"):
            hvd.grouped_allreduce([torch.ones(2)], process_set=first)
        with pytest.raises(ValueError, match="not a member"):
            hvd.alltoall(torch.ones(2), process_set=first)
        got = hvd.grouped_allreduce([_vals(r, 0), _vals(r, 1)], op=hvd.Sum,
                                    process_set=last)
        assert torch.equal(got[0], _vals(r, 0))
        out, received = hvd.alltoall(_vals(r, 2, 4), splits=[4],
                                     process_set=last)
        assert torch.equal(out, _vals(r, 2, 4)) and received.tolist() == [4]
    total = hvd.allreduce(torch.ones(1), op=hvd.Sum, name="after_grouped")
    assert total.item() == n


@pytest.mark.skipif("hvd.size() < 3")
def test_overlapping_sets_run_the_same_names():
    r = hvd.rank()
    a, b = hvd.add_process_set([0, 1]), hvd.add_process_set([1, 2])
    try:
        handles = []
        for ps in (a, b):
            if r in ps.ranks:
                handles.append((ps, hvd.allreduce_async(
                    _vals(r, ps.process_set_id), op=hvd.Sum, name="same",
                    process_set=ps)))
        for ps, h in handles:
            got = hvd.synchronize(h)
            want = sum(_vals(m, ps.process_set_id) for m in ps.ranks)
            assert torch.equal(got, want)
    finally:
        assert hvd.remove_process_set(a) and hvd.remove_process_set(b)


def test_unknown_and_removed_sets_are_value_errors():
    ps = hvd.add_process_set([0])
    stale = hvd.ProcessSet([0])
    stale.process_set_id = ps.process_set_id
    assert hvd.remove_process_set(ps)
    with pytest.raises(ValueError, match="does not exist"):
        hvd.allreduce(torch.ones(2), process_set=stale)
    bogus = hvd.ProcessSet([0])
    bogus.process_set_id = 4242
    with pytest.raises(ValueError, match="does not exist"):
        hvd.broadcast(torch.ones(2), 0, process_set=bogus)


def test_join_after_uneven_work():
    n, r = hvd.size(), hvd.rank()
    for step in range(r + 1):
        named = hvd.allreduce(_vals(r, step), op=hvd.Sum, name="jn.named")
        unnamed = hvd.allreduce(_vals(r, step), op=hvd.Sum)
        avg = hvd.allreduce(_vals(r, step), name="jn.avg")
        # Ranks with fewer steps have joined and add zeros.
        want = sum(_vals(k, step) for k in range(n) if step < k + 1)
        assert torch.equal(named, want) and torch.equal(unnamed, want)
        assert torch.allclose(avg, want / n)
    last = hvd.join()
    assert last == n - 1
    assert hvd.allgather_object(last) == [n - 1] * n


def test_join_with_nothing_to_do_and_barrier_after():
    last = hvd.join()
    assert 0 <= last < hvd.size()
    assert hvd.allgather_object(last) == [last] * hvd.size()
    hvd.barrier()
    hvd.barrier()


def test_unnamed_ops_match_after_an_uneven_join():
    n, r = hvd.size(), hvd.rank()
    for step in range(2 * r + 1):  # uneven numbers of unnamed ops
        hvd.allreduce(torch.ones(3), op=hvd.Sum)
        hvd.barrier()
    hvd.join()
    # Every rank's next unnamed ops carry the same names again.
    for step in range(3):
        got = hvd.allreduce(torch.full((3,), float(r)), op=hvd.Sum)
        assert got.tolist() == [float(sum(range(n)))] * 3
    hvd.barrier()


def test_broadcast_fails_while_a_rank_is_joined():
    if hvd.rank() == 0:
        last = hvd.join()
    else:
        with pytest.raises(HorovodInternalError,
                           match="not supported with join"):
            hvd.broadcast(torch.ones(4), 1, name="jn.bcast")
        last = hvd.join()
    assert last != 0 or hvd.size() == 1


def test_grouped_allreduce_with_joined_ranks():
    n, r = hvd.size(), hvd.rank()
    for step in range(r + 1):
        ins = [_vals(r, step), _vals(r, step + 1, 5)]
        got = hvd.grouped_allreduce(ins, op=hvd.Sum, name="jn.grouped")
        unnamed = hvd.grouped_allreduce(ins)
        # Ranks with fewer steps have joined and add zeros to every member.
        live = [k for k in range(n) if step < k + 1]
        for g, t in enumerate((got, unnamed)):
            w0 = sum(_vals(k, step) for k in live)
            w1 = sum(_vals(k, step + 1, 5) for k in live)
            if g == 1:
                w0, w1 = w0 / n, w1 / n
            assert torch.allclose(t[0], w0) and torch.allclose(t[1], w1)
    assert hvd.join() == n - 1


def test_alltoall_and_grouped_allgather_fail_while_a_rank_is_joined():
    n, r = hvd.size(), hvd.rank()
    if r == 0:
        last = hvd.join()
    else:
        with pytest.raises(HorovodInternalError,
                           match="Alltoall is not supported with join"):
            hvd.alltoall(torch.ones(2 * n), name="jn.a2a")
        with pytest.raises(HorovodInternalError,
                           match="Allgather is not supported with join"):
            hvd.grouped_allgather([torch.ones(2), torch.ones(3)],
                                  name="jn.gag")
        with pytest.raises(HorovodInternalError,
                           match="Reducescatter is not supported with join"):
            hvd.grouped_reducescatter([torch.ones(2 * n)], name="jn.grs")
        # A grouped allreduce still runs, rank 0 adding zeros.
        got = hvd.grouped_allreduce([torch.ones(3)], op=hvd.Sum,
                                    name="jn.gar")
        assert got[0].tolist() == [float(n - 1)] * 3
        last = hvd.join()
    assert last != 0 or n == 1
