/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What every enqueue binding of mpi_lib_v2 shares: the engine
 * horovod_init started (RuntimeError without one), the op's process set,
 * its name and reduce op arguments, the input and output tensors
 * described (and a CUDA input's stream synchronised), enqueue's common
 * tail (the tensors kept, the handle returned) and its failure (the
 * handle removed and freed; bad arguments are ValueError, failures of the
 * operation itself RuntimeError, as Horovod). Calls pt_handles.c and
 * pt_tensor.c, under every binding file. Layer: integration (mpi_lib_v2).
 */
#include "integration/python/mpi_lib_v2/pt.h"

#include "plugin/hvd_abi.h"

/* The engine horovod_init started, or NULL with RuntimeError raised. */
cg_hvd_core_h pt_core(void)
{
    cg_hvd_core_h core = cg_hvd_global_core();

    if (core != NULL)
        return core;
    if (horovod_is_initialized())
        PyErr_SetString(PyExc_RuntimeError,
                        "collguard: no collective engine: horovod_init was "
                        "given a rank list other than every launched rank "
                        "in launch order");
    else
        PyErr_SetString(PyExc_RuntimeError,
                        "collguard: Horovod has not been initialized; use "
                        "hvd.init().");
    return NULL;
}

void pt_use_process_set(pt_op_t *op, cg_hvd_tensor_t *t, int psid)
{
    op->psid = psid;
    t->field_mask |= CG_HVD_TENSOR_FIELD_PROCESS_SET;
    t->process_set = psid;
}

/* Raises for a failed enqueue: bad arguments are ValueError. */
int pt_raise_enqueue(cg_status_t st, const char *what)
{
    PyObject *type = (st == CG_ERR_INVALID_PARAM || st == CG_ERR_UNSUPPORTED)
                         ? PyExc_ValueError
                         : PyExc_RuntimeError;

    PyErr_Format(type, "collguard: %s: %s", what, cg_last_error());
    return -1;
}

cg_redop_t pt_redop(int horovod_op, int *ok)
{
    *ok = 1;
    switch (horovod_op) { /* Horovod's ReduceOp (horovod_reduce_op_*) */
    case 0: return CG_OP_AVG;
    case 1: return CG_OP_SUM;
    case 3: return CG_OP_MIN;
    case 4: return CG_OP_MAX;
    case 5: return CG_OP_PROD;
    case 2:
        PyErr_SetString(PyExc_NotImplementedError,
                        "collguard: Adasum is not implemented");
        break;
    default:
        PyErr_Format(PyExc_ValueError, "collguard: unknown reduce op %d",
                     horovod_op);
    }
    *ok = 0;
    return CG_OP_SUM;
}

const char *pt_name_arg(PyObject *name)
{
    if (PyBytes_Check(name))
        return PyBytes_AS_STRING(name);
    if (PyUnicode_Check(name))
        return PyUnicode_AsUTF8(name);
    PyErr_SetString(PyExc_TypeError, "collguard: name must be bytes or str");
    return NULL;
}

int pt_prepare(PyObject *tensor, PyObject *output, pt_tensor_t *d,
               bool need_output)
{
    if (pt_tensor_describe(tensor, "input", d) != 0)
        return -1;
    if (need_output && output != tensor) {
        pt_tensor_t o;

        if (pt_tensor_describe(output, "output", &o) != 0)
            return -1;
        if (o.t.dtype != d->t.dtype || o.numel != d->numel ||
            o.is_cuda != d->is_cuda) {
            PyErr_SetString(PyExc_ValueError, "collguard: output tensor "
                            "differs from the input in dtype, size or "
                            "device");
            return -1;
        }
        d->t.output = o.t.output;
    }
    if (need_output && pt_tensor_set_data(output, d, true) != 0)
        return -1;
    if (d->is_cuda && pt_tensor_sync_cuda(tensor) != 0)
        return -1;
    return 0;
}

/* Enqueue's common tail: keeps the tensors, returns the handle. */
PyObject *pt_enqueued(pt_op_t *op, PyObject *tensor, PyObject *output)
{
    Py_INCREF(tensor);
    op->keep[0] = tensor;
    Py_XINCREF(output);
    op->keep[1] = output;
    return PyLong_FromLong(op->handle);
}

PyObject *pt_fail(pt_op_t *op)
{
    pt_handles_remove(op);
    pt_handles_free(op);
    return NULL;
}
