/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The binding functions of mpi_lib_v2 over the engine: allreduce,
 * broadcast and allgather with Horovod's argument orders, poll, wait and
 * clear (with the GIL released while waiting), reset; Horovod's op names
 * ("allreduce.<name>", "allreduce.noname.<n>", n counted per process
 * set and kind) and its exception
 * types (ValueError for bad arguments and an explicit name already in
 * flight, RuntimeError for failures of the operation itself).
 * Layer: integration (mpi_lib_v2).
 */
#include "integration/python/mpi_lib_v2/pt.h"

#include <stdio.h>
#include <string.h>

#include "plugin/hvd_abi.h"

/* Explicit op names in flight: (full name, process set) -> handle. */
static PyObject *pt__inflight;
/* Unnamed ops so far: (prefix, process set) -> count. */
static PyObject *pt__noname;

int pt_ops_init(void)
{
    pt__inflight = PyDict_New();
    pt__noname = PyDict_New();
    return (pt__inflight == NULL || pt__noname == NULL) ? -1 : 0;
}

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

/* The next number of an unnamed op of kind prefix on process set psid,
 * or -1 with an exception set. Counted per set and kind, not by handle:
 * ranks that issued other operations in between, or ops on sets other
 * ranks are not in, still give the n-th unnamed allreduce of a set the
 * same name; a completed join restarts the count (pt_names_restart). */
static long long pt__noname_next(const char *prefix, int psid)
{
    PyObject *key = Py_BuildValue("(si)", prefix, psid), *cur, *next;
    long long n = 0;

    if (key == NULL)
        return -1;
    cur = PyDict_GetItemWithError(pt__noname, key);
    if (cur != NULL)
        n = PyLong_AsLongLong(cur);
    else if (PyErr_Occurred())
        n = -1;
    next = n >= 0 ? PyLong_FromLongLong(n + 1) : NULL;
    if (next == NULL || PyDict_SetItem(pt__noname, key, next) != 0)
        n = -1;
    Py_XDECREF(next);
    Py_DECREF(key);
    return n;
}

void pt_names_restart(int psid)
{
    PyObject *key, *value, *drop = PyList_New(0);
    Py_ssize_t pos = 0;

    if (drop == NULL) {
        PyErr_Clear();
        return;
    }
    while (PyDict_Next(pt__noname, &pos, &key, &value))
        if (PyLong_AsLong(PyTuple_GET_ITEM(key, 1)) == psid)
            (void)PyList_Append(drop, key);
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(drop); i++)
        (void)PyDict_DelItem(pt__noname, PyList_GET_ITEM(drop, i));
    Py_DECREF(drop);
    PyErr_Clear();
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

/* Names op "<prefix>.<name>", or "<prefix>.noname.<n>" when name is
 * empty (Horovod's form; n counts the unnamed ops of that kind on op's
 * process set, see pt__noname_next); an explicit name whose earlier
 * operation the engine has not finished raises ValueError, as Horovod. */
int pt_claim_name(pt_op_t *op, const char *prefix, const char *name,
                  char *full, size_t full_size)
{
    PyObject *key, *prev, *h;
    int n;

    if (name[0] == '\0') {
        long long k = pt__noname_next(prefix, op->psid);

        if (k < 0)
            return -1;
        n = snprintf(full, full_size, "%s.noname.%lld", prefix, k);
        return (n < 0 || (size_t)n >= full_size) ? -1 : 0;
    }
    n = snprintf(full, full_size, "%s.%s", prefix, name);
    if (n < 0 || (size_t)n >= full_size) {
        PyErr_Format(PyExc_ValueError, "collguard: tensor name '%s' is "
                     "longer than %d bytes", name, CG_HVD_NAME_MAX - 1);
        return -1;
    }
    /* Names are per process set: each set negotiates its own. */
    key = Py_BuildValue("(si)", full, op->psid);
    if (key == NULL)
        return -1;
    prev = PyDict_GetItemWithError(pt__inflight, key);
    if (prev != NULL) {
        pt_op_t *other = pt_handles_find((int)PyLong_AsLong(prev));

        if (other != NULL && other->req != NULL && !cg_hvd_poll(other->req)) {
            PyErr_Format(PyExc_ValueError,
                         "collguard: a tensor named '%s' is already in "
                         "flight (handle %d); names of concurrent "
                         "operations must be unique", full, other->handle);
            Py_DECREF(key);
            return -1;
        }
        if (other != NULL)
            Py_CLEAR(other->name_key);
    } else if (PyErr_Occurred()) {
        Py_DECREF(key);
        return -1;
    }
    h = PyLong_FromLong(op->handle);
    if (h == NULL || PyDict_SetItem(pt__inflight, key, h) != 0) {
        Py_XDECREF(h);
        Py_DECREF(key);
        return -1;
    }
    Py_DECREF(h);
    op->name_key = key;
    return 0;
}

void pt_release_name(pt_op_t *op)
{
    PyObject *cur, *exc_type, *exc_val, *exc_tb;

    if (op->name_key == NULL)
        return;
    PyErr_Fetch(&exc_type, &exc_val, &exc_tb);
    cur = PyDict_GetItemWithError(pt__inflight, op->name_key);
    if (cur != NULL && PyLong_AsLong(cur) == op->handle)
        (void)PyDict_DelItem(pt__inflight, op->name_key);
    PyErr_Clear();
    PyErr_Restore(exc_type, exc_val, exc_tb);
    Py_CLEAR(op->name_key);
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
