/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The handle table of mpi_lib_v2: Horovod's integer handles (1, 2, ...
 * from the last reset) mapped to operations by an open-addressing table
 * (linear probing, backward-shift deletion), and the explicit op names
 * they hold in flight (an explicit name whose earlier operation the
 * engine has not finished raises ValueError, as Horovod; unnamed ops are
 * numbered by pt_names.c). An operation owns references
 * to its tensors, so they stay alive until the handle is cleared; reset
 * keeps operations the engine is still running on a list and frees them
 * once done, so a tensor is never freed under the engine. Only called with
 * the GIL held. Of the module's files it calls pt_names.c alone.
 * Layer: integration (mpi_lib_v2).
 */
#include "integration/python/mpi_lib_v2/pt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct {
    pt_op_t **slots; /* cap entries, NULL: empty */
    size_t cap;      /* power of two */
    size_t count;
    int last_handle;
    pt_op_t *running; /* cleared by reset, engine not done yet */
} pt__h;

/* Explicit op names in flight: (full name, process set) -> handle. */
static PyObject *pt__inflight;

int pt_handles_init(void)
{
    pt__inflight = PyDict_New();
    return pt__inflight == NULL ? -1 : 0;
}

static size_t pt__slot(int handle)
{
    /* Fibonacci hashing spreads consecutive handles. */
    return (size_t)(((uint64_t)(unsigned)handle * 0x9E3779B97F4A7C15ull) >>
                    17) & (pt__h.cap - 1);
}

static int pt__grow(void)
{
    size_t cap = pt__h.cap ? pt__h.cap * 2 : 1024;
    pt_op_t **old = pt__h.slots, **slots = calloc(cap, sizeof(*slots));
    size_t oldcap = pt__h.cap;

    if (slots == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    pt__h.slots = slots;
    pt__h.cap = cap;
    for (size_t i = 0; i < oldcap; i++) {
        if (old[i] == NULL)
            continue;
        size_t s = pt__slot(old[i]->handle);

        while (slots[s] != NULL)
            s = (s + 1) & (cap - 1);
        slots[s] = old[i];
    }
    free(old);
    return 0;
}

/* A new operation under the next handle, already in the table. */
int pt_handles_new(pt_op_kind_t kind, pt_op_t **op_p)
{
    pt_op_t *op;
    size_t s;

    if ((pt__h.count + 1) * 2 > pt__h.cap && pt__grow() != 0)
        return -1;
    op = calloc(1, sizeof(*op));
    if (op == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    op->kind = kind;
    op->handle = ++pt__h.last_handle;
    s = pt__slot(op->handle);
    while (pt__h.slots[s] != NULL)
        s = (s + 1) & (pt__h.cap - 1);
    pt__h.slots[s] = op;
    pt__h.count++;
    *op_p = op;
    return 0;
}

pt_op_t *pt_handles_find(int handle)
{
    if (pt__h.cap == 0)
        return NULL;
    for (size_t s = pt__slot(handle);; s = (s + 1) & (pt__h.cap - 1)) {
        if (pt__h.slots[s] == NULL)
            return NULL;
        if (pt__h.slots[s]->handle == handle)
            return pt__h.slots[s];
    }
}

/* Takes op out of the table (it stays allocated). */
void pt_handles_remove(pt_op_t *op)
{
    size_t mask = pt__h.cap - 1, i = pt__slot(op->handle);

    while (pt__h.slots[i] != op)
        i = (i + 1) & mask;
    pt__h.slots[i] = NULL;
    pt__h.count--;
    /* Backward shift: move later entries of the run into the hole when
     * their home slot is not between the hole and them. */
    for (size_t j = (i + 1) & mask; pt__h.slots[j] != NULL;
         j = (j + 1) & mask) {
        size_t home = pt__slot(pt__h.slots[j]->handle);

        if (((j - home) & mask) >= ((j - i) & mask)) {
            pt__h.slots[i] = pt__h.slots[j];
            pt__h.slots[j] = NULL;
            i = j;
        }
    }
}

/* Names op "<prefix>.<name>", or "<prefix>.noname.<n>" when name is
 * empty (Horovod's form; n counts the unnamed ops of that kind on op's
 * process set, see pt_names_next); an explicit name whose earlier
 * operation the engine has not finished raises ValueError, as Horovod. */
int pt_claim_name(pt_op_t *op, const char *prefix, const char *name,
                  char *full, size_t full_size)
{
    PyObject *key, *prev, *h;
    int n;

    if (name[0] == '\0') {
        long long k = pt_names_next(prefix, op->psid);

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

int pt_handles_members(pt_op_t *op, int n)
{
    op->members = calloc((size_t)n, sizeof(*op->members));
    if (op->members == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    op->nmembers = n;
    return 0;
}

/* An operation's request and references. */
static void pt__free_fields(pt_op_t *op)
{
    if (op->req != NULL)
        cg_hvd_release(op->req);
    for (int i = 0; i < 3; i++)
        Py_XDECREF(op->keep[i]);
    Py_XDECREF(op->dtype);
}

void pt_handles_keep_layout(pt_op_t *op, const pt_tensor_t *d)
{
    op->is_cuda = d->is_cuda;
    op->ndim = d->t.ndim;
    memcpy(op->shape, d->t.shape, sizeof(op->shape));
    Py_INCREF(d->dtype);
    op->dtype = d->dtype;
}

/* Frees an operation out of the table: its request and references (a
 * group's: its members', whose first request is the group's). */
void pt_handles_free(pt_op_t *op)
{
    pt_release_name(op);
    if (op->members != NULL) {
        for (int i = 0; i < op->nmembers; i++)
            pt__free_fields(&op->members[i]);
        free(op->members);
        op->req = NULL;
    }
    pt__free_fields(op);
    free(op);
}

/* Frees the operations reset left running once the engine is done. */
void pt_handles_reap(void)
{
    pt_op_t **pp = &pt__h.running;

    while (*pp != NULL) {
        pt_op_t *op = *pp;

        if (op->req == NULL || cg_hvd_poll(op->req)) {
            *pp = op->next;
            pt_handles_free(op);
        } else {
            pp = &op->next;
        }
    }
}

/* Clears every handle and restarts numbering (horovod_torch_reset). */
void pt_handles_reset(void)
{
    for (size_t i = 0; i < pt__h.cap; i++) {
        pt_op_t *op = pt__h.slots[i];

        if (op == NULL)
            continue;
        pt__h.slots[i] = NULL;
        pt_release_name(op);
        op->next = pt__h.running;
        pt__h.running = op;
    }
    pt__h.count = 0;
    pt__h.last_handle = 0;
    pt_handles_reap();
}
