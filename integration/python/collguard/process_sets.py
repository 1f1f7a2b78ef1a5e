# SPDX-License-Identifier: Apache-2.0
"""Process sets as Horovod's Python has them: ProcessSet objects (ranks,
id once registered), global_process_set, add_process_set and
remove_process_set over the C ABI with Horovod's error codes mapped to
ValueError. Collectives take process_set= (the ops of collguard.torch)
and run on that set's members only; an unknown set, or one this rank is
not in, raises ValueError at the call, as Horovod."""
import ctypes

from collguard._native import CLIB

_ERR_INIT, _ERR_DYNAMIC, _ERR_UNKNOWN, _ERR_FOREIGN, _ERR_SHUTDOWN, \
    _ERR_EXISTING = -1, -2, -3, -4, -5, -6


class ProcessSet:
    """A set of ranks. Registered at hvd.init(process_sets=[...]) or by
    add_process_set; process_set_id is None until then."""

    def __init__(self, ranks_or_comm):
        if not isinstance(ranks_or_comm, (list, tuple, range)):
            raise ValueError("collguard: a ProcessSet takes a list of ranks "
                             "(MPI communicators are not supported)")
        self.ranks = sorted(int(r) for r in ranks_or_comm)
        self.mpi_comm = None
        self.process_set_id = None

    def _id(self):
        if self.process_set_id is None:
            raise ValueError("Process set %r has not been registered"
                             % self.ranks)
        return self.process_set_id

    def size(self):
        result = CLIB.horovod_process_set_size(self._id())
        _raise_for(result, self)
        return result

    def rank(self):
        result = CLIB.horovod_process_set_rank(self._id())
        if result == _ERR_FOREIGN:
            return None
        _raise_for(result, self)
        return result

    def included(self):
        result = CLIB.horovod_process_set_included(self._id())
        _raise_for(result, self)
        return bool(result)

    def __eq__(self, other):
        return (isinstance(other, ProcessSet) and
                self.process_set_id == other.process_set_id and
                self.ranks == other.ranks)

    def __hash__(self):
        return hash((self.process_set_id, tuple(self.ranks or ())))

    def __repr__(self):
        return "ProcessSet(process_set_id=%r, ranks=%r)" % (
            self.process_set_id, self.ranks)


def _raise_for(result, ps):
    if result == _ERR_INIT:
        raise ValueError("Horovod has not been initialized properly; use "
                         "hvd.init().")
    if result == _ERR_UNKNOWN:
        raise ValueError("Process set %r is not known" % (ps,))
    if result == _ERR_DYNAMIC:
        raise ValueError("Set process_sets='dynamic' in hvd.init() (or "
                         "HOROVOD_DYNAMIC_PROCESS_SETS=1) to add or remove "
                         "process sets after init")
    if result == _ERR_SHUTDOWN:
        raise ValueError("Horovod is shutting down")
    if result == _ERR_EXISTING:
        raise ValueError("A process set with ranks %r exists already"
                         % (ps.ranks,))


class _GlobalProcessSet(ProcessSet):
    def __init__(self):
        self.ranks = None
        self.mpi_comm = None
        self.process_set_id = 0

    def size(self):
        from collguard.basics import size
        return size()

    def rank(self):
        from collguard.basics import rank
        return rank()

    def included(self):
        return True


global_process_set = _GlobalProcessSet()
_registered = {}


def _setup(explicit_sets):
    """After init: ids of the sets given to init, by their ranks, and the
    ranks of the global set."""
    _registered.clear()
    num = CLIB.horovod_number_of_process_sets()
    ids = (ctypes.c_int * num)()
    CLIB.horovod_process_set_ids(ids)
    by_ranks = {}
    for ps_id in ids:
        n = CLIB.horovod_process_set_size(ps_id)
        ranks = (ctypes.c_int * max(n, 0))()
        CLIB.horovod_process_set_ranks(ps_id, ranks)
        by_ranks[tuple(ranks)] = ps_id
    global_process_set.ranks = list(range(CLIB.horovod_size()))
    for ps in explicit_sets:
        ps.process_set_id = by_ranks.get(tuple(ps.ranks))
        if ps.process_set_id is None:
            raise ValueError("Process set %r was not registered" % ps.ranks)
        _registered[ps.process_set_id] = ps


def add_process_set(process_set):
    """Registers a ProcessSet (or a list of ranks) on every rank (all ranks
    call it); needs process_sets='dynamic' at init."""
    ps = process_set if isinstance(process_set, ProcessSet) \
        else ProcessSet(process_set)
    arr = (ctypes.c_int * len(ps.ranks))(*ps.ranks)
    result = CLIB.horovod_add_process_set(arr, len(ps.ranks))
    if result < 0:
        _raise_for(result, ps)
        raise ValueError("add_process_set failed (%d)" % result)
    ps.process_set_id = result
    _registered[result] = ps
    return ps


def remove_process_set(process_set):
    """Unregisters a set on every rank; False when it was not registered
    (or is the global set)."""
    ps_id = process_set.process_set_id
    if ps_id is None or ps_id == 0:
        return False
    result = CLIB.horovod_remove_process_set(ps_id)
    if result < 0:
        if result in (_ERR_UNKNOWN,):
            return False
        _raise_for(result, process_set)
    process_set.process_set_id = None
    _registered.pop(ps_id, None)
    return True
