/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mpi_lib_v2's join binding over cg_hvd_enqueue_join (the global process
 * set, as Horovod's horovod_torch_join): (output, device) -> handle; once
 * every rank joined, output (Horovod's 0-dim int tensor) holds the last
 * rank to join, and the numbering of unnamed ops restarts on this rank,
 * as on every other (each passed the same join), so ranks that ran
 * uneven numbers of unnamed ops before it name the next ones alike.
 * device is Horovod's place for the zeros a joined rank adds; the engine
 * keeps them in host memory (CUDA allreduces fail while a rank is
 * joined). Layer: integration (mpi_lib_v2).
 */
#include "integration/python/mpi_lib_v2/pt.h"

PyObject *pt_join(PyObject *self, PyObject *args)
{
    PyObject *output;
    cg_hvd_core_h core;
    pt_op_t *op;
    cg_status_t st;
    int device;

    (void)self;
    if (!PyArg_ParseTuple(args, "Oi", &output, &device))
        return NULL;
    (void)device; /* zeros live in host memory; see the file comment */
    if ((core = pt_core()) == NULL)
        return NULL;
    pt_handles_reap();
    if (pt_handles_new(PT_OP_JOIN, &op) != 0)
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    st = cg_hvd_enqueue_join(core, 0, &op->req);
    Py_END_ALLOW_THREADS
    if (st != CG_OK) {
        pt_raise_enqueue(st, "join");
        return pt_fail(op);
    }
    return pt_enqueued(op, output, output);
}

int pt_finish_join(pt_op_t *op)
{
    PyObject *r;
    int last;

    if (cg_hvd_join_result(op->req, &last) != CG_OK) {
        PyErr_Format(PyExc_RuntimeError, "collguard: join result: %s",
                     cg_last_error());
        return -1;
    }
    pt_names_restart(0);
    r = PyObject_CallMethod(op->keep[1], "fill_", "i", last);
    Py_XDECREF(r);
    return r == NULL ? -1 : 0;
}
