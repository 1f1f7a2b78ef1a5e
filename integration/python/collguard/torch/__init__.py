# SPDX-License-Identifier: Apache-2.0
"""collguard.torch: horovod.torch's API over collguard (``import
collguard.torch as hvd``), plus memory_pressure/on_memory_pressure and a
DDP communication hook. init/shutdown wrap the C ABI; the operations are
in mpi_ops (grouped ones in grouped, alltoall in alltoall), state
broadcasts in functions, the optimizer in optimizer."""
from collguard import basics as _basics
from collguard._native import mpi_lib as _mpi_lib
from collguard.basics import (ccl_built, cross_rank, cross_size, cuda_built,
                              ddl_built, gloo_built, gloo_enabled,
                              is_homogeneous, is_initialized, local_rank,
                              local_size, mpi_built, mpi_enabled,
                              mpi_threads_supported, nccl_built, rank,
                              rocm_built, size, start_timeline, stop_timeline)
from collguard.exceptions import HorovodInternalError
from collguard.process_sets import (ProcessSet, add_process_set,
                                    global_process_set, remove_process_set)
from collguard import process_sets as _process_sets
from collguard.torch import memory as _memory
from collguard.torch.compression import Compression
from collguard.torch.ddp import ddp_comm_hook
from collguard.torch.functions import (allgather_object, broadcast_object,
                                       broadcast_optimizer_state,
                                       broadcast_parameters)
from collguard.torch.estimate import estimate_memory
from collguard.torch.memory import (memory_pressure, on_memory_pressure,
                                    remove_memory_pressure_callback,
                                    reset_memory_peaks)
from collguard.torch.mpi_ops import (Adasum, Average, Max, Min, Product, Sum,
                                     allgather, allgather_async, allreduce,
                                     allreduce_, allreduce_async,
                                     allreduce_async_, barrier, broadcast,
                                     broadcast_, broadcast_async,
                                     broadcast_async_, join, poll,
                                     reducescatter, reducescatter_async,
                                     synchronize)
from collguard.torch.grouped import (grouped_allgather,
                                     grouped_allgather_async,
                                     grouped_allreduce, grouped_allreduce_,
                                     grouped_allreduce_async,
                                     grouped_allreduce_async_,
                                     grouped_reducescatter,
                                     grouped_reducescatter_async)
from collguard.torch.alltoall import alltoall, alltoall_async
from collguard.torch.mpi_ops import _reset_handles
from collguard.torch.optimizer import DistributedOptimizer


def init(comm=None, process_sets=None):
    """Joins the job (every launched rank, or the ranks in comm) and
    registers process_sets (a list of ProcessSet, or "dynamic")."""
    import os
    sets = []
    if isinstance(process_sets, str):
        if process_sets.lower() != "dynamic":
            raise ValueError("process_sets must be a list or 'dynamic'")
        os.environ["HOROVOD_DYNAMIC_PROCESS_SETS"] = "1"
    elif process_sets is not None:
        sets = list(process_sets)
    _reset_handles()
    _memory._reset()
    _basics.init_native(comm, [ps.ranks for ps in sets])
    _process_sets._setup(sets)


def shutdown():
    """Leaves the job; operations still pending fail."""
    _reset_handles()
    _basics.shutdown_native()
    _mpi_lib.horovod_torch_reset()


def core_stats():
    """The engine's counters (allreduce_tensors, fused_calls, duplicates,
    mismatches, ...), for tests and monitoring."""
    return _mpi_lib.collguard_core_stats()
