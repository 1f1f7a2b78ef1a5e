/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mpi_lib_v2's reducescatter binding over cg_hvd_enqueue_reducescatter,
 * with Horovod's argument order (tensor, output, name, reduce_op,
 * process_set_id, prescale, postscale), its op name
 * ("reducescatter.<name>", "reducescatter.noname.<n>") and its
 * output: resized before the enqueue to this rank's rows of the first
 * dimension (Horovod's split, cg_hvd_reducescatter_rows), the others
 * kept. Layer: integration (mpi_lib_v2).
 */
#include "integration/python/mpi_lib_v2/pt.h"

#include <string.h>

/* Horovod's ReduceOp: Average 0, Sum 1; reducescatter has no others. */
int pt_rs_op(int horovod_op, cg_redop_t *op_p)
{
    if (horovod_op == 0 || horovod_op == 1) {
        *op_p = horovod_op == 0 ? CG_OP_AVG : CG_OP_SUM;
        return 0;
    }
    PyErr_Format(horovod_op == 2 ? PyExc_NotImplementedError
                                 : PyExc_ValueError,
                 "collguard: reducescatter supports Sum and Average only "
                 "(reduce op %d)", horovod_op);
    return -1;
}

/* output.resize_(rows, shape[1:]) and its data pointer into d->t.output;
 * same dtype and device as the input. */
int pt_rs_output(PyObject *output, cg_hvd_core_h core, int psid,
                 pt_tensor_t *d)
{
    PyObject *shape, *r;
    int64_t start, rows;
    int rank, size;
    pt_tensor_t o;

    /* This rank's rows among the set's members. */
    if (cg_hvd_process_set_rank(core, psid, &rank, &size) != CG_OK)
        return pt_raise_enqueue(CG_ERR_INVALID_PARAM, "reducescatter");
    cg_hvd_reducescatter_rows(d->t.shape[0], size, rank, &start, &rows);
    shape = PyTuple_New(d->t.ndim);
    if (shape == NULL)
        return -1;
    for (int i = 0; i < d->t.ndim; i++)
        PyTuple_SET_ITEM(shape, i, PyLong_FromLongLong(i == 0 ? rows
                                                     : d->t.shape[i]));
    r = PyObject_CallMethodOneArg(output, pt_str_resize, shape);
    Py_DECREF(shape);
    if (r == NULL)
        return -1;
    Py_DECREF(r);
    if (pt_tensor_describe(output, "output", &o) != 0)
        return -1;
    if (o.t.dtype != d->t.dtype || o.is_cuda != d->is_cuda) {
        PyErr_SetString(PyExc_ValueError, "collguard: reducescatter output "
                        "differs from the input in dtype or device");
        return -1;
    }
    if (pt_tensor_set_data(output, &o, true) != 0)
        return -1;
    d->t.output = o.numel > 0 ? o.t.output : NULL;
    return 0;
}

PyObject *pt_reducescatter(PyObject *self, PyObject *args)
{
    PyObject *tensor, *output, *name_o;
    int hop, psid;
    double pre, post;
    char full[CG_HVD_NAME_MAX];
    const char *name;
    cg_hvd_core_h core;
    pt_tensor_t d;
    pt_op_t *op;
    cg_redop_t cop;
    cg_status_t st;

    (void)self;
    if (!PyArg_ParseTuple(args, "OOOiidd", &tensor, &output, &name_o, &hop,
                          &psid, &pre, &post))
        return NULL;
    if ((name = pt_name_arg(name_o)) == NULL || (core = pt_core()) == NULL ||
        pt_rs_op(hop, &cop) != 0 ||
        pt_tensor_describe(tensor, "input", &d) != 0)
        return NULL;
    if (d.t.ndim == 0) {
        PyErr_SetString(PyExc_ValueError, "collguard: reducescatter needs a "
                        "tensor of at least one dimension");
        return NULL;
    }
    if (output == tensor) {
        PyErr_SetString(PyExc_ValueError, "collguard: reducescatter output "
                        "must be another tensor than its input");
        return NULL;
    }
    if (pt_rs_output(output, core, psid, &d) != 0)
        return NULL;
    if (d.is_cuda && pt_tensor_sync_cuda(tensor) != 0)
        return NULL;
    pt_handles_reap();
    if (pt_handles_new(PT_OP_REDUCESCATTER, &op) != 0)
        return NULL;
    pt_use_process_set(op, &d.t, psid);
    if (pt_claim_name(op, "reducescatter", name, full, sizeof(full)) != 0)
        return pt_fail(op);
    d.t.name = full;
    Py_BEGIN_ALLOW_THREADS
    st = cg_hvd_enqueue_reducescatter(core, &d.t, cop, pre, post, &op->req);
    Py_END_ALLOW_THREADS
    if (st != CG_OK) {
        pt_raise_enqueue(st, full);
        return pt_fail(op);
    }
    return pt_enqueued(op, tensor, output);
}
