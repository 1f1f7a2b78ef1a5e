/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internals of the Horovod shim's core (include/collguard/hvd.h): the
 * request, the wire record ranks exchange each cycle, the negotiation
 * table and the core itself. Lock rule: `lock` guards the inbox, the
 * registry of names in flight, request completion and the stats; the
 * negotiation table, the owned list and the fusion buffer belong to the
 * background thread alone. Layer: core.
 */
#ifndef CG_CORE_HVD_CORE_H
#define CG_CORE_HVD_CORE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "collguard/hvd.h"
#include "core/base/list.h"
#include "core/coll.h"
#include "core/comm.h"
#include "core/context.h"

/* Walks the links of a list (the loop body must not unlink it). */
#define CG_HVD_FOR(it, head)                                                  \
    for (cg_list_t *it = (head)->next; it != (head); it = it->next)

/* Buckets of the name registry and of the negotiation table. */
#define CG_HVD_BUCKETS 1024
#define CG_HVD_BUCKET(hash) ((size_t)((hash) % CG_HVD_BUCKETS))

/* One request as every rank sees it; fixed size, sent as raw bytes. */
typedef struct cg_hvd_wire {
    char name[CG_HVD_NAME_MAX];
    int32_t type, dtype, op, root;
    int32_t ndim, device; /* device: -1 host, else the CUDA device */
    double prescale, postscale;
    int64_t shape[CG_HVD_NDIM_MAX];
} cg_hvd_wire_t;

typedef struct cg_hvd_core cg_hvd_core_t;

struct cg_hvd_req {
    cg_list_t link;       /* inbox, then the thread's owned list */
    cg_list_t reg_link;   /* registry of names in flight (primaries) */
    uint64_t hash;        /* of w.name */
    cg_list_t followers;  /* coalesced duplicates of this primary */
    cg_list_t follow_link;
    cg_hvd_core_t *core;
    cg_governor_t *gov;   /* frees the request, even after the core */
    cg_hvd_wire_t w;
    const void *input;
    void *output;
    size_t count;         /* elements */
    atomic_int done;
    bool released;
    cg_status_t status;
    char err[512];
    void *gather;         /* allgather result (CG_MEM_CAT_STAGING) */
    size_t gather_bytes;
    int64_t gather_dim0;
};

/* A name some rank announced, until every rank did (negotiation). */
typedef struct cg_hvd_entry {
    cg_list_t link;        /* core->table */
    cg_list_t bucket_link; /* core->tab_buckets */
    uint64_t hash;
    cg_hvd_wire_t w;       /* the first announcement */
    int first_rank;
    int count;             /* ranks announced */
    bool failed;
    char err[512];
    struct cg_hvd_req *local; /* this rank's request */
    int64_t *dim0;         /* allgather: first dimension per rank */
    bool done;             /* executed (or failed) this cycle */
    int group;             /* fusion group being packed (0: none) */
    size_t foff;           /* offset in the fusion buffer */
} cg_hvd_entry_t;

struct cg_hvd_core {
    cg_ctx_h ctx;
    cg_governor_t *gov;
    const cg_log_t *log;
    cg_transport_t *tp;
    cg_comm_t *comm;
    int rank, size;
    uint64_t cycle_ns;
    cg_dup_policy_t dup_policy;

    pthread_mutex_t lock;
    pthread_cond_t done_cond; /* a request completed */
    int waiters;              /* threads in cg_hvd_wait */
    pthread_cond_t wake_cond; /* stop asked (the thread sleeps on it) */
    cg_list_t inbox;
    cg_list_t registry[CG_HVD_BUCKETS]; /* names in flight, by hash */
    cg_list_t warned;         /* cg_hvd_name_t: duplicates warned about */
    bool stop;                /* destroy asked */
    bool dead;                /* the thread ended: enqueue fails at once */
    cg_status_t dead_status;
    char dead_msg[256];
    cg_hvd_stats_t stats;
    pthread_t thread;

    /* Background thread only. */
    cg_list_t owned;          /* requests taken from the inbox */
    cg_list_t table;          /* cg_hvd_entry_t */
    cg_list_t tab_buckets[CG_HVD_BUCKETS];
    int64_t *hdr;             /* 3 per rank: records, stop, fusion bytes */
    void *xbuf;               /* records of every rank */
    size_t xbuf_len;
    cg_hvd_entry_t **ready;
    size_t ready_len, ready_cap;
    void *fbuf;               /* fusion buffer (CG_MEM_CAT_FUSION) */
    size_t fbuf_len;
    size_t fbuf_want;         /* the size asked when fbuf was allocated */
    size_t fusion_cap;        /* agreed this cycle: min over ranks */
    cg_hvd_stats_t tstats;    /* published into stats each cycle */
};

typedef struct cg_hvd_name {
    cg_list_t link;
    char name[CG_HVD_NAME_MAX];
} cg_hvd_name_t;

/* hvd_queue.c: completes a request (and its followers) under the lock;
 * msg may be NULL on success. */
void cg_hvd_req_complete(cg_hvd_core_t *core, struct cg_hvd_req *req,
                         cg_status_t st, const char *msg);
/* Under the lock: copies the thread's counters (all but duplicates,
 * counted at enqueue) into the stats readers see. */
void cg_hvd_stats_publish(cg_hvd_core_t *core);
/* Fails every request in the inbox and the owned list. */
void cg_hvd_fail_all(cg_hvd_core_t *core, cg_status_t st, const char *msg);
size_t cg_hvd_wire_count(const cg_hvd_wire_t *w);
uint64_t cg_hvd_name_hash(const char *name);

/* hvd_negotiate.c: one exchange round announcing the n_new requests of
 * the owned list starting at `first`; fills core->ready in the order every
 * rank shares and sets *stop_rank_p to the first rank that asked to stop
 * (-1: none). A failure breaks the comm. */
cg_status_t cg_hvd_negotiate(cg_hvd_core_t *core, cg_list_t *first,
                             size_t n_new, bool stop, int *stop_rank_p);
void cg_hvd_table_free(cg_hvd_core_t *core);
void cg_hvd_entry_free(cg_hvd_core_t *core, cg_hvd_entry_t *e);

/* hvd_fusion.c: the fusion buffer this rank can offer this cycle. */
size_t cg_hvd_fusion_prepare(cg_hvd_core_t *core);
void cg_hvd_fusion_release(cg_hvd_core_t *core);
/* Runs core->ready in order; a broken comm returns its status. */
cg_status_t cg_hvd_execute(cg_hvd_core_t *core);

/* hvd_cycle.c: the background thread. */
void *cg_hvd_cycle_main(void *arg);

#endif
