/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The binding functions of mpi_lib_v2 over the engine: allreduce,
 * broadcast and allgather with Horovod's argument orders, poll, wait and
 * clear (with the GIL released while waiting), reset. Their op names
 * ("allreduce.<name>", "allreduce.noname.<n>") are pt_handles.c's and
 * pt_names.c's, what every enqueue shares (exception types included)
 * pt_enqueue.c's; poll and wait finish an operation through pt_finish.c,
 * so this file is at the top of the module's DAG (only pt_module.c is
 * over it). Layer: integration (mpi_lib_v2).
 */
#include "integration/python/mpi_lib_v2/pt.h"

/* (tensor, output, divisor, name, reduce_op, prescale, postscale,
 *  process_set_id) -> handle */
PyObject *pt_allreduce(PyObject *self, PyObject *args)
{
    PyObject *tensor, *output, *name_o;
    int divisor, hop, psid, ok;
    double pre, post;
    char full[CG_HVD_NAME_MAX];
    const char *name;
    cg_hvd_core_h core;
    pt_tensor_t d;
    pt_op_t *op;
    cg_redop_t cop;
    cg_status_t st;

    (void)self;
    if (!PyArg_ParseTuple(args, "OOiOiddi", &tensor, &output, &divisor,
                          &name_o, &hop, &pre, &post, &psid))
        return NULL;
    if ((name = pt_name_arg(name_o)) == NULL || (core = pt_core()) == NULL)
        return NULL;
    cop = pt_redop(hop, &ok);
    if (!ok || pt_prepare(tensor, output, &d, true) != 0)
        return NULL;
    pt_handles_reap();
    if (pt_handles_new(PT_OP_ALLREDUCE, &op) != 0)
        return NULL;
    pt_use_process_set(op, &d.t, psid);
    if (pt_claim_name(op, "allreduce", name, full, sizeof(full)) != 0)
        return pt_fail(op);
    d.t.name = full;
    op->divisor = divisor;
    Py_BEGIN_ALLOW_THREADS
    st = cg_hvd_enqueue_allreduce(core, &d.t, cop, pre, post, &op->req);
    Py_END_ALLOW_THREADS
    if (st != CG_OK) {
        pt_raise_enqueue(st, full);
        return pt_fail(op);
    }
    return pt_enqueued(op, tensor, output);
}

/* (tensor, output, root_rank, name, process_set_id) -> handle */
PyObject *pt_broadcast(PyObject *self, PyObject *args)
{
    PyObject *tensor, *output, *name_o;
    int root, psid;
    char full[CG_HVD_NAME_MAX];
    const char *name;
    cg_hvd_core_h core;
    pt_tensor_t d;
    pt_op_t *op;
    cg_status_t st;

    (void)self;
    if (!PyArg_ParseTuple(args, "OOiOi", &tensor, &output, &root, &name_o,
                          &psid))
        return NULL;
    if ((name = pt_name_arg(name_o)) == NULL || (core = pt_core()) == NULL ||
        pt_prepare(tensor, output, &d, true) != 0)
        return NULL;
    pt_handles_reap();
    if (pt_handles_new(PT_OP_BROADCAST, &op) != 0)
        return NULL;
    pt_use_process_set(op, &d.t, psid);
    if (pt_claim_name(op, "broadcast", name, full, sizeof(full)) != 0)
        return pt_fail(op);
    d.t.name = full;
    Py_BEGIN_ALLOW_THREADS
    st = cg_hvd_enqueue_broadcast(core, &d.t, root, &op->req);
    Py_END_ALLOW_THREADS
    if (st != CG_OK) {
        pt_raise_enqueue(st, full);
        return pt_fail(op);
    }
    return pt_enqueued(op, tensor, output);
}

/* (tensor, output, name, process_set_id) -> handle; output is resized to
 * the gathered shape once done. */
PyObject *pt_allgather(PyObject *self, PyObject *args)
{
    PyObject *tensor, *output, *name_o;
    int psid;
    char full[CG_HVD_NAME_MAX];
    const char *name;
    cg_hvd_core_h core;
    pt_tensor_t d;
    pt_op_t *op;
    cg_status_t st;

    (void)self;
    if (!PyArg_ParseTuple(args, "OOOi", &tensor, &output, &name_o, &psid))
        return NULL;
    if ((name = pt_name_arg(name_o)) == NULL || (core = pt_core()) == NULL ||
        pt_prepare(tensor, output, &d, false) != 0)
        return NULL;
    if (d.t.ndim == 0) {
        PyErr_SetString(PyExc_ValueError, "collguard: allgather needs a "
                        "tensor of at least one dimension");
        return NULL;
    }
    pt_handles_reap();
    if (pt_handles_new(PT_OP_ALLGATHER, &op) != 0)
        return NULL;
    pt_use_process_set(op, &d.t, psid);
    if (pt_claim_name(op, "allgather", name, full, sizeof(full)) != 0)
        return pt_fail(op);
    d.t.name = full;
    d.t.output = NULL;
    pt_handles_keep_layout(op, &d);
    Py_BEGIN_ALLOW_THREADS
    st = cg_hvd_enqueue_allgather(core, &d.t, &op->req);
    Py_END_ALLOW_THREADS
    if (st != CG_OK) {
        pt_raise_enqueue(st, full);
        return pt_fail(op);
    }
    return pt_enqueued(op, tensor, output);
}

static int pt__handle_arg(PyObject *args, pt_op_t **op_p)
{
    int handle;

    if (!PyArg_ParseTuple(args, "i", &handle))
        return -1;
    *op_p = pt_handles_find(handle);
    if (*op_p == NULL) {
        PyErr_Format(PyExc_ValueError, "Handle %d was not created or has "
                     "been cleared.", handle);
        return -1;
    }
    return 0;
}

/* handle -> 1 when done (outputs final), else 0. */
PyObject *pt_poll(PyObject *self, PyObject *args)
{
    pt_op_t *op;

    (void)self;
    if (pt__handle_arg(args, &op) != 0)
        return NULL;
    if (!cg_hvd_poll(op->req))
        return PyLong_FromLong(0);
    if (pt_finish(op) != 0)
        return NULL;
    return PyLong_FromLong(1);
}

/* handle -> None once done; RuntimeError with the engine's text when the
 * operation failed (mismatch across ranks, backend error, shutdown). */
PyObject *pt_wait_and_clear(PyObject *self, PyObject *args)
{
    pt_op_t *op;
    cg_status_t st;
    int rc;

    (void)self;
    if (pt__handle_arg(args, &op) != 0)
        return NULL;
    pt_handles_remove(op);
    Py_BEGIN_ALLOW_THREADS
    st = cg_hvd_wait(op->req);
    Py_END_ALLOW_THREADS
    rc = pt_finish(op);
    if (rc == 0 && st != CG_OK)
        PyErr_Format(PyExc_RuntimeError, "%s", cg_hvd_error(op->req));
    pt_handles_free(op);
    if (rc != 0 || st != CG_OK)
        return NULL;
    Py_RETURN_NONE;
}

PyObject *pt_reset(PyObject *self, PyObject *args)
{
    (void)self;
    (void)args;
    pt_handles_reset();
    Py_RETURN_NONE;
}
