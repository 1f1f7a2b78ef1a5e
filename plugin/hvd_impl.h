/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The Horovod shim's state, private to plugin/hvd_*.c: one struct per
 * initialization (context with bootstrap, Horovod world layout, process
 * set table, the collective core), the agreement collective and the
 * process-set table. Layer: plugin; calls core/context and
 * transport/bootstrap.
 */
#ifndef CG_PLUGIN_HVD_IMPL_H
#define CG_PLUGIN_HVD_IMPL_H

#include <stdbool.h>
#include <stddef.h>

#include "core/context.h"

/* Horovod's process-set error codes (operations.cc). */
enum {
    CG_HVD_PS_ERR_INIT = -1,
    CG_HVD_PS_ERR_DYNAMIC = -2,
    CG_HVD_PS_ERR_UNKNOWN_SET = -3,
    CG_HVD_PS_ERR_FOREIGN_SET = -4,
    CG_HVD_PS_ERR_SHUTDOWN = -5,
    CG_HVD_PS_ERR_EXISTING_SET = -6
};

/* Room for one reason in an error message. */
#define CG_HVD_WHY_MAX 256

typedef struct cg__hvd_pset {
    int id;
    int size;
    int *ranks; /* Horovod ranks, ascending */
    int rank;   /* this process's index in ranks; -1 when not included */
} cg__hvd_pset_t;

typedef struct cg__hvd_psets {
    cg__hvd_pset_t *sets; /* registration order; sets[0] is id 0 */
    int count, cap;
    int *free_ids;       /* removed ids, reused first-in first-out */
    int nfree;
    int next_id;
} cg__hvd_psets_t;

typedef struct cg__hvd {
    cg_ctx_h ctx;
    const cg_log_t *log;
    cg_mem_ops_t mem;     /* the governor's, CONTROL */
    cg_bootstrap_t *bs;   /* the context's, over every launched rank */
    int rank, size;       /* in Horovod's world */
    int local_rank, local_size, cross_rank, cross_size;
    bool homogeneous;
    bool whole_job;       /* Horovod's world is every launched rank */
    bool launch_order;    /* ... and in launch order: the core runs */
    bool dynamic;         /* HOROVOD_DYNAMIC_PROCESS_SETS */
    cg__hvd_psets_t ps;
    struct cg_hvd_core *core; /* collguard/hvd.h; NULL unless launch_order */
} cg__hvd_t;

/* One rank's side of an agreement: what it asks for (a CG_HVD_REQ_*),
 * an argument, and a list of n ints compared element by element. */
enum {
    CG_HVD_REQ_INIT = 1,     /* arg: number of process sets; list: ranks */
    CG_HVD_REQ_INIT_SET = 2, /* arg: index of the set; list: its ranks */
    CG_HVD_REQ_ADD = 3,      /* list: the sorted ranks */
    CG_HVD_REQ_REMOVE = 4    /* arg: the id */
};

typedef struct cg__hvd_agree_req {
    int what;
    int arg;
    int n;
    bool valid;      /* false: this rank's arguments were bad (logged) */
    const int *list; /* n ints; NULL when n == 0 */
} cg__hvd_req_t;

/* hvd_init.c: horovod_init's work; the caller publishes the result. */
cg_status_t cg__hvd_create(const int *ranks, int nranks, const int *ps_ranks,
                           const int *ps_sizes, int nps, cg__hvd_t **h_p);
void cg__hvd_destroy(cg__hvd_t *h);

/* hvd_agree.c: collective over every launched rank. CG_OK with *same_p
 * true when every rank sent the same valid request; false with why
 * naming the first rank that differs. A bootstrap failure returns its
 * status (the bootstrap is then broken). */
cg_status_t cg__hvd_agree(cg__hvd_t *h, const cg__hvd_req_t *req, bool *same_p,
                          char *why, size_t why_len);

/* Checks a rank list against a world of size ranks (no negative count,
 * no rank outside 0..size-1, no rank twice) and writes it sorted to
 * sorted_out (room for size ints). false with why on bad input. */
bool cg__hvd_ranks_sorted(const int *ranks, int n, int size, int *sorted_out,
                          char *why, size_t why_len);

/* hvd_process_sets.c: the table. */
cg_status_t cg__hvd_psets_init(cg__hvd_t *h);
void cg__hvd_psets_cleanup(cg__hvd_t *h);
const cg__hvd_pset_t *cg__hvd_psets_find(const cg__hvd_t *h, int id);
/* Registers sorted ranks (already agreed): the new id, or
 * CG_HVD_PS_ERR_EXISTING_SET when a set has these ranks, or
 * CG_HVD_PS_ERR_SHUTDOWN when the table cannot grow (logged). */
int cg__hvd_psets_register(cg__hvd_t *h, const int *sorted, int n);
/* horovod_add_process_set / horovod_remove_process_set after the
 * initialized and dynamic checks. */
int cg__hvd_psets_add(cg__hvd_t *h, const int *ranks, int nranks);
int cg__hvd_psets_remove(cg__hvd_t *h, int id);
/* Drops id from the table (its id reused later); no-op if absent. */
void cg__hvd_psets_unregister(cg__hvd_t *h, int id);
/* After the core started: the sets registered at horovod_init get their
 * cores too (collective, in registration order). */
cg_status_t cg__hvd_psets_start(cg__hvd_t *h);

#endif
