/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internals of the CPython module mpi_lib_v2 (Horovod's binding module
 * name): torch tensors read through the Python API into cg_hvd_tensor_t
 * (pt_tensor.c), the numbering of unnamed ops (pt_names.c), the handle
 * table that keeps tensors alive until a handle is cleared, with the
 * explicit names in flight (pt_handles.c), what every enqueue shares
 * (pt_enqueue.c), a gathered result into its output (pt_fill.c), the
 * collective bindings (pt_ops.c, reducescatter in pt_rscatter.c, grouped
 * ones in pt_group.c, alltoall in pt_alltoall.c), what runs once an
 * operation is done, and barrier (pt_finish.c), join (pt_join.c) and
 * collguard's extras (pt_extra.c). The files call only downward:
 * pt_module.c over the bindings (pt_ops.c over pt_finish.c over
 * pt_alltoall.c and pt_join.c; pt_group.c over pt_rscatter.c), which are
 * over pt_fill.c and pt_enqueue.c; pt_enqueue.c over pt_handles.c over
 * pt_names.c; pt_tensor.c at the bottom.
 * Every function here runs with the GIL held. Layer: integration; calls
 * include/collguard/hvd.h and libcollguard_hvd.so's exported functions.
 */
#ifndef CG_INTEGRATION_PT_H
#define CG_INTEGRATION_PT_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdbool.h>
#include <stdint.h>

#include "collguard/hvd.h"

/* Kinds of operation a handle stands for. */
typedef enum {
    PT_OP_ALLREDUCE = 0,
    PT_OP_BROADCAST = 1,
    PT_OP_ALLGATHER = 2,
    PT_OP_BARRIER = 3,
    PT_OP_REDUCESCATTER = 4,
    PT_OP_GROUP = 5,    /* members[]: one op of the kinds above each */
    PT_OP_ALLTOALL = 6, /* keep[2]: the received splits' output */
    PT_OP_JOIN = 7
} pt_op_kind_t;

/* A tensor as the engine takes it, plus what the module needs later. */
typedef struct pt_tensor {
    cg_hvd_tensor_t t;
    bool is_cuda;
    int64_t numel;
    size_t elem_size;
    PyObject *dtype; /* borrowed from the tensor's dtype (kept by it) */
} pt_tensor_t;

/* One enqueued operation, alive from enqueue until its handle is cleared
 * (or, after horovod_torch_reset, until the engine is done with it). */
typedef struct pt_op {
    int handle;
    pt_op_kind_t kind;
    cg_hvd_req_h req;
    PyObject *keep[3];  /* tensor, output, extra: owned references */
    PyObject *name_key; /* explicit name registered in flight, or NULL */
    int divisor;        /* allreduce: output divided after completion */
    bool finished;      /* post-processing done (allgather copy, divide) */
    bool is_cuda;
    int ndim;
    int64_t shape[CG_HVD_NDIM_MAX];
    PyObject *dtype;    /* owned; allgather result dtype */
    int32_t scratch;    /* barrier: the element its allreduce carries;
                         * alltoall: the rank count */
    int psid;           /* process set (pt_use_process_set); 0: global */
    struct pt_op *next; /* reset's list of operations still running */
    /* A group: its members (not in the handle table); req is members[0]'s
     * (done only once every member is, see cg_hvd_enqueue_grouped_*). */
    struct pt_op *members;
    int nmembers;
} pt_op_t;

/* pt_tensor.c */
int pt_tensor_init_types(void);
int pt_tensor_describe(PyObject *tensor, const char *what, pt_tensor_t *d);
int pt_tensor_set_data(PyObject *tensor, pt_tensor_t *d, bool output);
int pt_tensor_sync_cuda(PyObject *tensor);
int pt_tensor_copy_from_host(PyObject *output, void *data, int64_t numel,
                             size_t elem_size, PyObject *dtype);
extern PyObject *pt_str_resize, *pt_str_data_ptr, *pt_str_copy,
    *pt_str_div, *pt_str_floor_div, *pt_str_is_floating_point;

/* pt_names.c: the numbers of unnamed ops, per process set and kind. */
int pt_names_init(void);
/* The next number of an unnamed op of kind prefix on process set psid,
 * or -1 with an exception set. */
long long pt_names_next(const char *prefix, int psid);
/* A join of process set psid completed here: its unnamed ops are
 * numbered from 0 again, on every rank alike (pt_join.c). */
void pt_names_restart(int psid);

/* pt_handles.c */
int pt_handles_init(void);
int pt_handles_new(pt_op_kind_t kind, pt_op_t **op_p);
/* A group's n members (calloc'd; freed with the group). */
int pt_handles_members(pt_op_t *op, int n);
pt_op_t *pt_handles_find(int handle);
void pt_handles_remove(pt_op_t *op);
void pt_handles_free(pt_op_t *op);
/* Keeps what op's result is shaped from (an allgather's or alltoall's,
 * resized once done): d's placement, dimensions and dtype (a reference). */
void pt_handles_keep_layout(pt_op_t *op, const pt_tensor_t *d);
void pt_handles_reset(void);
void pt_handles_reap(void);
int pt_claim_name(pt_op_t *op, const char *prefix, const char *name,
                  char *full, size_t full_size);
void pt_release_name(pt_op_t *op);

/* pt_enqueue.c */
cg_hvd_core_h pt_core(void);
/* The op runs on process set psid: t carries it to the engine (which
 * refuses an unknown id or a set this rank is not in: ValueError), and
 * an unnamed op is numbered among that set's (pt_claim_name). Call it
 * before pt_claim_name. */
void pt_use_process_set(pt_op_t *op, cg_hvd_tensor_t *t, int psid);
int pt_raise_enqueue(cg_status_t st, const char *what);
/* A name argument (bytes or str) as UTF-8, or NULL with TypeError. */
const char *pt_name_arg(PyObject *name);
/* Horovod's ReduceOp as the engine's op (*ok 0: an exception is set). */
cg_redop_t pt_redop(int horovod_op, int *ok);
/* Describes tensor and, when it is another tensor, output (same dtype and
 * element count); synchronises a CUDA tensor's stream. */
int pt_prepare(PyObject *tensor, PyObject *output, pt_tensor_t *d,
               bool need_output);
/* Enqueue's common tail: keeps tensor and output, returns the handle. */
PyObject *pt_enqueued(pt_op_t *op, PyObject *tensor, PyObject *output);
/* A failed enqueue: the handle removed and freed; returns NULL. */
PyObject *pt_fail(pt_op_t *op);

/* pt_fill.c */
/* o.method(arg), its result dropped: 0, or -1 with an exception set. */
int pt_call1(PyObject *o, PyObject *method, PyObject *arg);
/* output.resize_(first, op->shape[1:]) filled from the host data (an
 * allgather's or alltoall's result), for CPU and CUDA outputs. */
int pt_fill_output(pt_op_t *op, PyObject *output, const void *data,
                   int64_t first);

/* pt_ops.c */
PyObject *pt_allreduce(PyObject *self, PyObject *args);
PyObject *pt_broadcast(PyObject *self, PyObject *args);
PyObject *pt_allgather(PyObject *self, PyObject *args);
PyObject *pt_poll(PyObject *self, PyObject *args);
PyObject *pt_wait_and_clear(PyObject *self, PyObject *args);
PyObject *pt_reset(PyObject *self, PyObject *args);

/* pt_finish.c */
int pt_finish(pt_op_t *op);
PyObject *pt_barrier(PyObject *self, PyObject *args);

/* pt_join.c */
PyObject *pt_join(PyObject *self, PyObject *args);
int pt_finish_join(pt_op_t *op);

/* pt_group.c */
PyObject *pt_grouped_allreduce(PyObject *self, PyObject *args);
PyObject *pt_grouped_allgather(PyObject *self, PyObject *args);
PyObject *pt_grouped_reducescatter(PyObject *self, PyObject *args);

/* pt_alltoall.c */
PyObject *pt_alltoall(PyObject *self, PyObject *args);
int pt_finish_alltoall(pt_op_t *op);

/* pt_rscatter.c */
PyObject *pt_reducescatter(PyObject *self, PyObject *args);
/* Horovod's Average (0) and Sum (1) as the engine's op; else raises. */
int pt_rs_op(int horovod_op, cg_redop_t *op_p);
/* output resized to this rank's rows of d's first dimension among the
 * members of process set psid, its data pointer into d->t.output (same
 * dtype and device as d). */
int pt_rs_output(PyObject *output, cg_hvd_core_h core, int psid,
                 pt_tensor_t *d);

/* pt_extra.c */
PyObject *pt_memory_snapshot(PyObject *self, PyObject *args);
PyObject *pt_memory_reset_peaks(PyObject *self, PyObject *args);
PyObject *pt_core_stats(PyObject *self, PyObject *args);
/* pt_estimate.c */
PyObject *pt_estimate(PyObject *self, PyObject *args);

#endif
