/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The module mpi_lib_v2: Horovod's binding function names (one per
 * operation and torch tensor type, CPU and torch_cuda_, as
 * horovod/torch/mpi_ops.py looks them up, plus BFloat16Tensor) mapped onto
 * one C function per operation, which reads the dtype from the tensor.
 * The same file is loaded by ctypes as Horovod's native library: it
 * links libcollguard_hvd.so, whose horovod_* functions dlsym finds
 * through it, so both faces share one ABI state.
 * Layer: integration (mpi_lib_v2).
 */
#include "integration/python/mpi_lib_v2/pt.h"

/* Tensor types whose names Horovod defines: reductions, and the larger
 * set of data-movement operations. */
#define PT__REDUCE_TYPES(X, op, fn)                                          \
    X(op, fn, IntTensor) X(op, fn, LongTensor) X(op, fn, HalfTensor)         \
    X(op, fn, FloatTensor) X(op, fn, DoubleTensor) X(op, fn, BFloat16Tensor)
#define PT__MOVE_TYPES(X, op, fn)                                            \
    X(op, fn, ByteTensor) X(op, fn, CharTensor) X(op, fn, ShortTensor)       \
    PT__REDUCE_TYPES(X, op, fn)

#define PT__ENTRY(op, fn, type)                                              \
    {"horovod_torch_" #op "_async_torch_" #type, fn, METH_VARARGS, NULL},    \
    {"horovod_torch_" #op "_async_torch_cuda_" #type, fn, METH_VARARGS, NULL},

static PyMethodDef pt__methods[] = {
    PT__REDUCE_TYPES(PT__ENTRY, allreduce, pt_allreduce)
    PT__REDUCE_TYPES(PT__ENTRY, grouped_allreduce, pt_grouped_allreduce)
    PT__MOVE_TYPES(PT__ENTRY, allgather, pt_allgather)
    PT__MOVE_TYPES(PT__ENTRY, grouped_allgather, pt_grouped_allgather)
    PT__MOVE_TYPES(PT__ENTRY, broadcast, pt_broadcast)
    PT__MOVE_TYPES(PT__ENTRY, alltoall, pt_alltoall)
    PT__REDUCE_TYPES(PT__ENTRY, reducescatter, pt_reducescatter)
    PT__REDUCE_TYPES(PT__ENTRY, grouped_reducescatter,
                     pt_grouped_reducescatter)
    {"horovod_torch_join", pt_join, METH_VARARGS,
     "join(output, device) -> handle"},
    {"horovod_torch_barrier", pt_barrier, METH_VARARGS,
     "barrier(process_set_id=0) -> handle"},
    {"horovod_torch_poll", pt_poll, METH_VARARGS,
     "poll(handle) -> 1 when the operation is done, else 0"},
    {"horovod_torch_wait_and_clear", pt_wait_and_clear, METH_VARARGS,
     "wait_and_clear(handle): waits (GIL released), clears the handle, "
     "raises RuntimeError when the operation failed"},
    {"horovod_torch_reset", pt_reset, METH_NOARGS,
     "reset(): clears every handle"},
    {"collguard_memory_snapshot", pt_memory_snapshot, METH_NOARGS,
     "the memory governor's state: level, budget, free bytes, OOM ETA"},
    {"collguard_memory_reset_peaks", pt_memory_reset_peaks, METH_NOARGS,
     "collguard_memory_reset_peaks() -> None"},
    {"collguard_core_stats", pt_core_stats, METH_NOARGS,
     "the engine's counters (cg_hvd_stats_t)"},
    {"collguard_estimate", pt_estimate, METH_VARARGS,
     "estimate(params, dtype, optimizer, mixed, ranks, backend, free, "
     "total) -> dict: collguard-info --estimate's numbers"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef pt__module = {
    PyModuleDef_HEAD_INIT, "mpi_lib_v2",
    "collguard's drop-in for Horovod's torch binding module", -1,
    pt__methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit_mpi_lib_v2(void)
{
    if (pt_tensor_init_types() != 0 || pt_names_init() != 0 ||
        pt_handles_init() != 0)
        return NULL;
    return PyModule_Create(&pt__module);
}
