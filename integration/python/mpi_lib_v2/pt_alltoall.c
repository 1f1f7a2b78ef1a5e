/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mpi_lib_v2's alltoall binding over cg_hvd_enqueue_alltoall, with
 * Horovod's argument order (tensor, splits, output,
 * output_received_splits, name, process_set_id), its op name
 * ("alltoall.<name>", "alltoall.noname.<n>", n counted per process set), its checks (splits an
 * int32 tensor of one entry per rank of the process set, or empty for an
 * equal split:
 * ValueError otherwise) and its outputs, filled once done: output
 * resized to the received rows, output_received_splits to one int32 per
 * rank. Layer: integration (mpi_lib_v2).
 */
#include "integration/python/mpi_lib_v2/pt.h"

#include <stdlib.h>
#include <string.h>

/* splits (an int32 tensor, any device) into out[size]; *given_p false
 * for an empty one (equal split). */
static int pt__splits(PyObject *splits, int size, int64_t *out,
                      bool *given_p)
{
    PyObject *list;
    pt_tensor_t d;
    Py_ssize_t n;

    if (pt_tensor_describe(splits, "splits", &d) != 0)
        return -1;
    if (d.t.dtype != CG_DTYPE_I32) {
        PyErr_SetString(PyExc_ValueError, "collguard: alltoall splits must "
                        "be a tensor of int32");
        return -1;
    }
    *given_p = d.numel > 0;
    if (!*given_p)
        return 0;
    if (d.numel != size) {
        PyErr_Format(PyExc_ValueError, "collguard: alltoall splits has %lld "
                     "entries, one per rank (%d) needed",
                     (long long)d.numel, size);
        return -1;
    }
    list = PyObject_CallMethod(splits, "tolist", NULL);
    if (list == NULL)
        return -1;
    n = PyList_Check(list) ? PyList_GET_SIZE(list) : -1;
    for (Py_ssize_t i = 0; i < n && i < size; i++)
        out[i] = PyLong_AsLongLong(PyList_GET_ITEM(list, i));
    Py_DECREF(list);
    if (n != size) {
        PyErr_SetString(PyExc_ValueError, "collguard: alltoall splits must "
                        "be one-dimensional");
        return -1;
    }
    return PyErr_Occurred() ? -1 : 0;
}

PyObject *pt_alltoall(PyObject *self, PyObject *args)
{
    PyObject *tensor, *splits, *output, *rsplits, *name_o, *h;
    char full[CG_HVD_NAME_MAX];
    const char *name;
    cg_hvd_core_h core;
    int64_t *sp = NULL;
    bool given = false;
    pt_tensor_t d;
    pt_op_t *op;
    cg_status_t st;
    int psid, rank, size;

    (void)self;
    if (!PyArg_ParseTuple(args, "OOOOOi", &tensor, &splits, &output,
                          &rsplits, &name_o, &psid))
        return NULL;
    if ((name = pt_name_arg(name_o)) == NULL || (core = pt_core()) == NULL ||
        pt_prepare(tensor, output, &d, false) != 0)
        return NULL;
    /* Splits are one per rank of the set (ValueError for a set that is
     * unknown or that this rank is not in). */
    st = cg_hvd_process_set_rank(core, psid, &rank, &size);
    if (st != CG_OK) {
        pt_raise_enqueue(st, "alltoall");
        return NULL;
    }
    (void)rank;
    if (d.t.ndim == 0) {
        PyErr_SetString(PyExc_ValueError, "collguard: alltoall needs a "
                        "tensor of at least one dimension");
        return NULL;
    }
    sp = calloc((size_t)size, sizeof(*sp));
    if (sp == NULL)
        return PyErr_NoMemory();
    if (pt__splits(splits, size, sp, &given) != 0) {
        free(sp);
        return NULL;
    }
    pt_handles_reap();
    if (pt_handles_new(PT_OP_ALLTOALL, &op) != 0) {
        free(sp);
        return NULL;
    }
    pt_use_process_set(op, &d.t, psid);
    if (pt_claim_name(op, "alltoall", name, full, sizeof(full)) != 0) {
        free(sp);
        return pt_fail(op);
    }
    d.t.name = full;
    d.t.output = NULL;
    pt_handles_keep_layout(op, &d);
    op->scratch = size;
    Py_BEGIN_ALLOW_THREADS
    st = cg_hvd_enqueue_alltoall(core, &d.t, given ? sp : NULL, &op->req);
    Py_END_ALLOW_THREADS
    free(sp);
    if (st != CG_OK) {
        pt_raise_enqueue(st, full);
        return pt_fail(op);
    }
    h = pt_enqueued(op, tensor, output);
    Py_INCREF(rsplits);
    op->keep[2] = rsplits;
    return h;
}

/* output = the received rows; output_received_splits = rows per rank. */
int pt_finish_alltoall(pt_op_t *op)
{
    PyObject *rsplits = op->keep[2], *shape, *r, *list, *nt;
    const int64_t *rsp;
    const void *data;
    int64_t first;
    int size = op->scratch; /* the set's size at enqueue */

    if (cg_hvd_alltoall_result(op->req, &data, &first, &rsp) != CG_OK) {
        PyErr_Format(PyExc_RuntimeError, "collguard: alltoall result: %s",
                     cg_last_error());
        return -1;
    }
    if (pt_fill_output(op, op->keep[1], data, first) != 0)
        return -1;
    shape = Py_BuildValue("(i)", size);
    r = shape == NULL ? NULL
                      : PyObject_CallMethodOneArg(rsplits, pt_str_resize,
                                                  shape);
    Py_XDECREF(shape);
    if (r == NULL)
        return -1;
    Py_DECREF(r);
    list = PyList_New(size);
    if (list == NULL)
        return -1;
    for (int i = 0; i < size; i++)
        PyList_SET_ITEM(list, i, PyLong_FromLongLong(rsp[i]));
    /* new_tensor: the splits' dtype and device, so copy_ works on any. */
    nt = PyObject_CallMethod(rsplits, "new_tensor", "(O)", list);
    Py_DECREF(list);
    r = nt == NULL ? NULL : PyObject_CallMethodOneArg(rsplits, pt_str_copy,
                                                      nt);
    Py_XDECREF(nt);
    Py_XDECREF(r);
    return r == NULL ? -1 : 0;
}
