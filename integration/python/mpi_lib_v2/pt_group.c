/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mpi_lib_v2's grouped bindings over cg_hvd_enqueue_grouped_*, with
 * Horovod's argument orders (grouped_allreduce: tensors, outputs,
 * divisor, name, reduce_op, prescale, postscale, process_set_id;
 * grouped_allgather: tensors, outputs, name, process_set_id;
 * grouped_reducescatter: tensors, outputs, name, reduce_op,
 * process_set_id, prescale, postscale), one handle for the whole group,
 * Horovod's member names ("grouped_allreduce.<name>_<i>of<n>",
 * "grouped_allreduce.noname.<k>_<i>of<n>", k counted per process set) and each member prepared
 * as its single-tensor binding prepares it, every member on the call's
 * process set (the engine runs the group on that set). Layer: integration
 * (mpi_lib_v2).
 */
#include "integration/python/mpi_lib_v2/pt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What one grouped call enqueues. */
typedef struct pt__grp {
    cg_hvd_op_type_t type;
    cg_redop_t op;
    double pre, post;
    int divisor;
    PyObject *tensors, *outputs; /* PySequence_Fast, owned */
    Py_ssize_t n;
    cg_hvd_tensor_t *ts;
    char (*names)[CG_HVD_NAME_MAX];
    cg_hvd_req_h *reqs;
} pt__grp_t;

static const char *pt__prefix(cg_hvd_op_type_t type)
{
    return type == CG_HVD_ALLREDUCE   ? "grouped_allreduce"
           : type == CG_HVD_ALLGATHER ? "grouped_allgather"
                                      : "grouped_reducescatter";
}

static int pt__lists(pt__grp_t *g, PyObject *tensors, PyObject *outputs)
{
    g->tensors = PySequence_Fast(tensors, "collguard: tensors must be a "
                                 "list of tensors");
    g->outputs = g->tensors == NULL
                     ? NULL
                     : PySequence_Fast(outputs, "collguard: outputs must be "
                                       "a list of tensors");
    if (g->outputs == NULL)
        return -1;
    g->n = PySequence_Fast_GET_SIZE(g->tensors);
    if (g->n != PySequence_Fast_GET_SIZE(g->outputs)) {
        PyErr_SetString(PyExc_ValueError, "collguard: Number of tensors and "
                        "outputs must be equal");
        return -1;
    }
    if (g->n < 1 || g->n > CG_HVD_GROUP_MAX) {
        PyErr_Format(PyExc_ValueError, "collguard: a group of %zd tensors "
                     "(1 to %d)", g->n, CG_HVD_GROUP_MAX);
        return -1;
    }
    g->ts = calloc((size_t)g->n, sizeof(*g->ts));
    g->names = calloc((size_t)g->n, sizeof(*g->names));
    g->reqs = calloc((size_t)g->n, sizeof(*g->reqs));
    if (g->ts == NULL || g->names == NULL || g->reqs == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

static void pt__grp_free(pt__grp_t *g)
{
    Py_XDECREF(g->tensors);
    Py_XDECREF(g->outputs);
    free(g->ts);
    free(g->names);
    free(g->reqs);
}

/* Member i: described, its output prepared, kept by member m. */
static int pt__member(pt__grp_t *g, cg_hvd_core_h core, int psid,
                      Py_ssize_t i, pt_op_t *m, bool *cuda_p)
{
    PyObject *tensor = PySequence_Fast_GET_ITEM(g->tensors, i);
    PyObject *output = PySequence_Fast_GET_ITEM(g->outputs, i);
    pt_tensor_t d;

    if (g->type == CG_HVD_REDUCESCATTER) {
        if (pt_tensor_describe(tensor, "input", &d) != 0)
            return -1;
        if (d.t.ndim == 0) {
            PyErr_SetString(PyExc_ValueError, "collguard: reducescatter "
                            "needs a tensor of at least one dimension");
            return -1;
        }
        if (output == tensor) {
            PyErr_SetString(PyExc_ValueError, "collguard: reducescatter "
                            "output must be another tensor than its input");
            return -1;
        }
        if (pt_rs_output(output, core, psid, &d) != 0 ||
            (d.is_cuda && pt_tensor_sync_cuda(tensor) != 0))
            return -1;
    } else if (pt_prepare(tensor, output, &d, g->type == CG_HVD_ALLREDUCE) !=
               0) {
        return -1;
    }
    if (g->type == CG_HVD_ALLGATHER && d.t.ndim == 0) {
        PyErr_SetString(PyExc_ValueError, "collguard: allgather needs a "
                        "tensor of at least one dimension");
        return -1;
    }
    if (i > 0 && d.is_cuda != *cuda_p) {
        PyErr_SetString(PyExc_ValueError, "collguard: Tensors in list must "
                        "be on same device.");
        return -1;
    }
    *cuda_p = d.is_cuda;
    m->kind = g->type == CG_HVD_ALLREDUCE   ? PT_OP_ALLREDUCE
              : g->type == CG_HVD_ALLGATHER ? PT_OP_ALLGATHER
                                            : PT_OP_REDUCESCATTER;
    m->divisor = g->divisor;
    pt_handles_keep_layout(m, &d);
    Py_INCREF(tensor);
    m->keep[0] = tensor;
    Py_INCREF(output);
    m->keep[1] = output;
    if (g->type == CG_HVD_ALLGATHER)
        d.t.output = NULL;
    pt_use_process_set(m, &d.t, psid);
    g->ts[i] = d.t;
    return 0;
}

static PyObject *pt__grouped(pt__grp_t *g, PyObject *tensors,
                             PyObject *outputs, PyObject *name_o, int psid)
{
    const char *name, *prefix = pt__prefix(g->type);
    char base[CG_HVD_NAME_MAX];
    cg_hvd_core_h core;
    pt_op_t *op = NULL;
    PyObject *handle = NULL;
    bool cuda = false;
    cg_status_t st;

    if ((name = pt_name_arg(name_o)) == NULL || (core = pt_core()) == NULL ||
        pt__lists(g, tensors, outputs) != 0)
        goto out;
    pt_handles_reap();
    if (pt_handles_new(PT_OP_GROUP, &op) != 0)
        goto out;
    op->psid = psid; /* the group's name is numbered on its set */
    if (pt_handles_members(op, (int)g->n) != 0 ||
        pt_claim_name(op, prefix, name, base, sizeof(base)) != 0)
        goto fail;
    for (Py_ssize_t i = 0; i < g->n; i++) {
        int len = snprintf(g->names[i], CG_HVD_NAME_MAX, "%s_%zdof%zd", base,
                           i + 1, g->n);
        if (len < 0 || len >= CG_HVD_NAME_MAX) {
            PyErr_Format(PyExc_ValueError, "collguard: tensor name '%s' is "
                         "too long for %zd members", base, g->n);
            goto fail;
        }
        if (pt__member(g, core, psid, i, &op->members[i], &cuda) != 0)
            goto fail;
        g->ts[i].name = g->names[i];
    }
    Py_BEGIN_ALLOW_THREADS
    if (g->type == CG_HVD_ALLREDUCE)
        st = cg_hvd_enqueue_grouped_allreduce(core, g->ts, (int)g->n, g->op,
                                              g->pre, g->post, g->reqs);
    else if (g->type == CG_HVD_ALLGATHER)
        st = cg_hvd_enqueue_grouped_allgather(core, g->ts, (int)g->n,
                                              g->reqs);
    else
        st = cg_hvd_enqueue_grouped_reducescatter(core, g->ts, (int)g->n,
                                                  g->op, g->pre, g->post,
                                                  g->reqs);
    Py_END_ALLOW_THREADS
    if (st != CG_OK) {
        pt_raise_enqueue(st, base);
        goto fail;
    }
    for (Py_ssize_t i = 0; i < g->n; i++)
        op->members[i].req = g->reqs[i];
    op->req = g->reqs[0];
    handle = PyLong_FromLong(op->handle);
    goto out;
fail:
    pt_fail(op);
out:
    pt__grp_free(g);
    return handle;
}

PyObject *pt_grouped_allreduce(PyObject *self, PyObject *args)
{
    PyObject *tensors, *outputs, *name_o;
    pt__grp_t g = {.type = CG_HVD_ALLREDUCE};
    int hop, psid, ok;

    (void)self;
    if (!PyArg_ParseTuple(args, "OOiOiddi", &tensors, &outputs, &g.divisor,
                          &name_o, &hop, &g.pre, &g.post, &psid))
        return NULL;
    g.op = pt_redop(hop, &ok);
    if (!ok)
        return NULL;
    return pt__grouped(&g, tensors, outputs, name_o, psid);
}

PyObject *pt_grouped_allgather(PyObject *self, PyObject *args)
{
    PyObject *tensors, *outputs, *name_o;
    pt__grp_t g = {.type = CG_HVD_ALLGATHER, .op = CG_OP_SUM, .pre = 1.0,
                   .post = 1.0};
    int psid;

    (void)self;
    if (!PyArg_ParseTuple(args, "OOOi", &tensors, &outputs, &name_o, &psid))
        return NULL;
    return pt__grouped(&g, tensors, outputs, name_o, psid);
}

PyObject *pt_grouped_reducescatter(PyObject *self, PyObject *args)
{
    PyObject *tensors, *outputs, *name_o;
    pt__grp_t g = {.type = CG_HVD_REDUCESCATTER};
    int hop, psid;

    (void)self;
    if (!PyArg_ParseTuple(args, "OOOiidd", &tensors, &outputs, &name_o, &hop,
                          &psid, &g.pre, &g.post) ||
        pt_rs_op(hop, &g.op) != 0)
        return NULL;
    return pt__grouped(&g, tensors, outputs, name_o, psid);
}
