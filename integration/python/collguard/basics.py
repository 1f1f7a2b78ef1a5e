# SPDX-License-Identifier: Apache-2.0
"""Horovod's basic API over the C ABI (init, shutdown, ranks and sizes,
timeline, *_built/*_enabled, reduce ops), with Horovod's return values and
exceptions: ValueError for a rank or size asked before init."""
import atexit
import ctypes
import os

from collguard._native import CLIB

_NOT_INIT = "Horovod has not been initialized; use hvd.init()."

for _fn in ("horovod_init", "horovod_mpi_enabled", "horovod_mpi_built",
            "horovod_gloo_enabled", "horovod_gloo_built", "horovod_ddl_built",
            "horovod_ccl_built", "horovod_cuda_built", "horovod_rocm_built",
            "horovod_is_homogeneous"):
    getattr(CLIB, _fn).restype = ctypes.c_bool
CLIB.horovod_start_timeline.argtypes = [ctypes.c_char_p, ctypes.c_bool]

Average = CLIB.horovod_reduce_op_average()
Sum = CLIB.horovod_reduce_op_sum()
Adasum = CLIB.horovod_reduce_op_adasum()
Min = CLIB.horovod_reduce_op_min()
Max = CLIB.horovod_reduce_op_max()
Product = CLIB.horovod_reduce_op_product()

_atexit_registered = False


def _int_array(values):
    values = list(values)
    return (ctypes.c_int * len(values))(*values), len(values)


def init_native(comm=None, process_sets=()):
    """horovod_init over a rank list (None: every launched rank) and lists
    of ranks of the process sets to register; raises ValueError when the
    ranks cannot agree, as Horovod."""
    global _atexit_registered
    if comm is not None and not isinstance(comm, (list, tuple, range)):
        raise ValueError("collguard: comm must be a list of ranks; MPI "
                         "communicators are not supported")
    ranks, nranks = _int_array(comm or [])
    flat, _ = _int_array([r for ps in process_sets for r in ps])
    sizes, nsets = _int_array([len(ps) for ps in process_sets])
    if not _atexit_registered:
        atexit.register(shutdown_native)
        _atexit_registered = True
    if not CLIB.horovod_init(ranks, nranks, flat, sizes, nsets):
        raise ValueError("Horovod initialization failed. Please check log "
                         "messages above for a more descriptive error.")


def shutdown_native():
    CLIB.horovod_shutdown()


def is_initialized():
    return bool(CLIB.horovod_is_initialized())


def _checked(fn):
    def getter():
        value = fn()
        if value == -1:
            raise ValueError(_NOT_INIT)
        return value
    getter.__name__ = fn.__name__.replace("horovod_", "")
    return getter


size = _checked(CLIB.horovod_size)
local_size = _checked(CLIB.horovod_local_size)
cross_size = _checked(CLIB.horovod_cross_size)
rank = _checked(CLIB.horovod_rank)
local_rank = _checked(CLIB.horovod_local_rank)
cross_rank = _checked(CLIB.horovod_cross_rank)


def is_homogeneous():
    if not is_initialized():
        raise ValueError(_NOT_INIT)
    return bool(CLIB.horovod_is_homogeneous())


def start_timeline(file_path, mark_cycles=False):
    """Writes a timeline (Chrome trace) to file_path from now on; needs
    HOROVOD_TIMELINE (or CG_TIMELINE, e.g. DYNAMIC) set before init."""
    result = CLIB.horovod_start_timeline(
        os.fsencode(file_path), ctypes.c_bool(mark_cycles))
    if result == -1:
        raise ValueError(_NOT_INIT)
    if result == -2:
        raise ValueError("Set HOROVOD_TIMELINE=DYNAMIC to enable the "
                         "timeline to be started or stopped")


def stop_timeline():
    if CLIB.horovod_stop_timeline() == -1:
        raise ValueError(_NOT_INIT)


def mpi_threads_supported():
    result = CLIB.horovod_mpi_threads_supported()
    if result == -1:
        raise ValueError("Horovod MPI is not enabled; MPI threads are "
                         "only known when it is")
    return bool(result)


def mpi_enabled():
    return bool(CLIB.horovod_mpi_enabled())


def mpi_built():
    return bool(CLIB.horovod_mpi_built())


def gloo_enabled():
    return False


def gloo_built():
    return False


def nccl_built():
    return int(CLIB.horovod_nccl_built())


def ddl_built():
    return False


def ccl_built():
    return False


def cuda_built():
    return bool(CLIB.horovod_cuda_built())


def rocm_built():
    return False
