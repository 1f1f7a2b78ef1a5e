/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What mpi_lib_v2 does once the engine is done with an operation, on the
 * thread that polls or waits (with the GIL): an allgather's output
 * resized to the gathered shape and filled from the engine's result
 * (pt_fill.c, which alltoall's finish shares), an allreduce divided by
 * Horovod's divisor, each member of a group, an alltoall's and a join's
 * outputs (pt_alltoall.c, pt_join.c: this file is over both); and
 * barrier, which is a
 * one-element allreduce: no rank gets past it before every rank entered
 * it. Layer: integration (mpi_lib_v2).
 */
#include "integration/python/mpi_lib_v2/pt.h"

#include <stdio.h>
#include <string.h>

static int pt__finish_allgather(pt_op_t *op)
{
    const void *data;
    int64_t first;
    cg_status_t st;

    st = cg_hvd_allgather_result(op->req, &data, &first);
    if (st != CG_OK) {
        PyErr_Format(PyExc_RuntimeError, "collguard: allgather result: %s",
                     cg_last_error());
        return -1;
    }
    return pt_fill_output(op, op->keep[1], data, first);
}

static int pt__finish_divide(pt_op_t *op)
{
    PyObject *output = op->keep[1], *fp, *div;
    int is_fp, rc;

    fp = PyObject_CallMethodNoArgs(output, pt_str_is_floating_point);
    if (fp == NULL)
        return -1;
    is_fp = PyObject_IsTrue(fp);
    Py_DECREF(fp);
    div = PyLong_FromLong(op->divisor);
    if (div == NULL)
        return -1;
    rc = pt_call1(output, is_fp ? pt_str_div : pt_str_floor_div, div);
    Py_DECREF(div);
    return rc;
}

/* Runs once per done operation; a failed one has nothing to finish. */
int pt_finish(pt_op_t *op)
{
    int rc = 0;

    if (op->finished)
        return 0;
    op->finished = true;
    if (cg_hvd_wait(op->req) != CG_OK)
        return 0;
    if (op->kind == PT_OP_GROUP)
        for (int i = 0; i < op->nmembers && rc == 0; i++)
            rc = pt_finish(&op->members[i]);
    else if (op->kind == PT_OP_ALLGATHER)
        rc = pt__finish_allgather(op);
    else if (op->kind == PT_OP_ALLTOALL)
        rc = pt_finish_alltoall(op);
    else if (op->kind == PT_OP_ALLREDUCE && op->divisor > 1)
        rc = pt__finish_divide(op);
    else if (op->kind == PT_OP_JOIN)
        rc = pt_finish_join(op);
    return rc;
}

/* (process_set_id) -> handle. The n-th barrier of a set is the allreduce
 * "barrier.noname.<n>" on it, so barriers match across ranks whatever
 * other operations each rank issued before (and after a join). */
PyObject *pt_barrier(PyObject *self, PyObject *args)
{
    char full[CG_HVD_NAME_MAX];
    cg_hvd_tensor_t t;
    cg_hvd_core_h core;
    pt_op_t *op;
    cg_status_t st;
    int psid = 0;

    (void)self;
    if (!PyArg_ParseTuple(args, "|i", &psid))
        return NULL;
    if ((core = pt_core()) == NULL)
        return NULL;
    pt_handles_reap();
    if (pt_handles_new(PT_OP_BARRIER, &op) != 0)
        return NULL;
    memset(&t, 0, sizeof(t));
    pt_use_process_set(op, &t, psid);
    if (pt_claim_name(op, "barrier", "", full, sizeof(full)) != 0) {
        pt_handles_remove(op);
        pt_handles_free(op);
        return NULL;
    }
    t.name = full;
    t.dtype = CG_DTYPE_I32;
    t.ndim = 0;
    t.input = &op->scratch;
    t.output = &op->scratch;
    t.device = -1;
    Py_BEGIN_ALLOW_THREADS
    st = cg_hvd_enqueue_allreduce(core, &t, CG_OP_SUM, 1.0, 1.0, &op->req);
    Py_END_ALLOW_THREADS
    if (st != CG_OK) {
        pt_raise_enqueue(st, full);
        pt_handles_remove(op);
        pt_handles_free(op);
        return NULL;
    }
    return PyLong_FromLong(op->handle);
}
