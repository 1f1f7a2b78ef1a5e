/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internals of the Horovod shim's core (include/collguard/hvd.h): the
 * request, the wire record ranks exchange each cycle, the negotiation
 * table and the core itself. Lock rule: `lock` guards the inbox, the
 * registry of names in flight, the live and kept requests, request
 * completion and the stats; the
 * negotiation table, the owned list and the fusion buffer belong to the
 * background thread alone. Layer: core/engine.
 */
#ifndef CG_CORE_HVD_CORE_H
#define CG_CORE_HVD_CORE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "collguard/hvd.h"
#include "core/base/list.h"
#include "core/coll/coll.h"
#include "core/coll/comm.h"
#include "core/context.h"
#include "core/backend/hvd_backend.h"
#include "core/engine/hvd_spin.h"

/* Walks the links of a list (the loop body must not unlink it). */
#define CG_HVD_FOR(it, head)                                                  \
    for (cg_list_t *it = (head)->next; it != (head); it = it->next)

/* Buckets of the name registry and of the negotiation table. */
#define CG_HVD_BUCKETS 1024
#define CG_HVD_BUCKET(hash) ((size_t)((hash) % CG_HVD_BUCKETS))

/* One request as every rank sees it; fixed size, sent as raw bytes. The
 * parameters come first and the name last, so a wire with a short name
 * is read and copied in two or three cache lines (cg_hvd_wire_copy). */
typedef struct cg_hvd_wire {
    int32_t type, dtype, op, root;
    int32_t ndim, device; /* device: -1 host memory, 0 CUDA memory (the
                           * GPU is the rank's own, cg_hvd_gpu_device) */
    /* A grouped request (hvd_group.c): members in its group (0: none),
     * its place in it, and a digest of the members' names in order. */
    int32_t group_n, group_at;
    uint64_t group_key;
    double prescale, postscale;
    int64_t shape[CG_HVD_NDIM_MAX];
    char name[CG_HVD_NAME_MAX];
} cg_hvd_wire_t;

/* Bytes of the parameters, compared whole between two wires. */
#define CG_HVD_WIRE_PARAMS offsetof(cg_hvd_wire_t, name)

/* dst = src up to the end of the name (the bytes after it are left as
 * they were: nothing reads past a name's end). */
static inline void cg_hvd_wire_copy(cg_hvd_wire_t *dst,
                                    const cg_hvd_wire_t *src)
{
    memcpy(dst, src, CG_HVD_WIRE_PARAMS + strlen(src->name) + 1);
}

typedef struct cg_hvd_core cg_hvd_core_t;

/* What this rank offers in a cycle's full round (cg_hvd_fusion_prepare
 * sizes the buffers; negotiation agrees on the least of each over ranks). */
typedef struct cg_hvd_offer {
    size_t fusion; /* fusion buffer bytes (host, and CUDA once in use) */
    size_t chunk;  /* staging chunk of CUDA tensors: what one staging slot
                    * holds (0: none could be had; SIZE_MAX: this rank
                    * stages nothing, no constraint) */
} cg_hvd_offer_t;

/* int64 per rank in a full round's header: records, stop, fusion offer,
 * cache capacity, staging chunk offer (INT64_MAX: none). */
#define CG_HVD_NHDR 5

/* A run of one tensor in a staged fusion buffer (hvd_stage.c). */
typedef struct cg_hvd_extent {
    size_t foff, len;     /* bytes in the fusion buffer */
    const char *in;       /* the tensor's input at that run */
    char *out;            /* and its output */
} cg_hvd_extent_t;

struct cg_hvd_req {
    /* What completion, wait and release touch comes first, in two cache
     * lines: the background thread writes them, the caller's thread reads
     * them next, and every line costs a transfer between cores. */
    cg_list_t link;       /* inbox, then the thread's owned list */
    cg_list_t reg_link;   /* registry of names in flight (primaries) */
    cg_list_t followers;  /* coalesced duplicates of this primary */
    cg_list_t follow_link;
    cg_hvd_core_t *core;
    atomic_int done;
    cg_status_t status;
    int waiters;          /* threads in cg_hvd_wait on it (under lock) */
    bool released;
    cg_list_t live_link;  /* core->req_live until released (or req_free) */
    uint64_t hash;        /* of w.name */
    cg_governor_t *gov;   /* frees the request, even after the core */
    cg_hvd_wire_t w;
    const void *input;
    void *output;
    size_t count;         /* elements */
    void *gather;         /* allgather result (CG_MEM_CAT_STAGING) */
    size_t gather_bytes;
    int64_t gather_dim0;
    struct cg_hvd_group *grp; /* grouped: completes with its group */
    int64_t *a2a;         /* alltoall: size send splits, then size
                           * received (CG_MEM_CAT_CONTROL) */
    size_t a2a_bytes;
    /* Last: a reused request is zeroed up to here only (the hot path
     * would otherwise clear half a kilobyte per tensor). */
    char err[512];
};

/* A name some rank announced, until every rank did (negotiation). */
typedef struct cg_hvd_entry {
    cg_list_t link;        /* core->table */
    cg_list_t bucket_link; /* core->tab_buckets */
    uint64_t hash;
    cg_hvd_wire_t w;       /* the first announcement (not cleared: copied) */
    int first_rank;
    int count;             /* ranks announced */
    bool failed;
    struct cg_hvd_req *local; /* this rank's request */
    int64_t *dim0;         /* allgather: first dimension per rank */
    bool done;             /* executed (or failed) this cycle */
    int group;             /* fusion group being packed (0: none) */
    size_t foff;           /* offset in the fusion buffer */
    uint64_t first_ns;     /* when this rank saw the first announcement */
    uint64_t *ranks;       /* bitmap of the ranks announced (same block) */
    char err[512];         /* last: not cleared beyond its first byte */
} cg_hvd_entry_t;

/* A response cache slot (hvd_cache.c): a name every rank negotiated and
 * ran; the same slots in the same order on every rank, so a name is
 * negotiated by the slot's bit in one bitwise-AND allreduce. */
typedef struct cg_hvd_slot {
    cg_list_t lru_link;      /* cache.lru (least recent first) or .free */
    cg_list_t bucket_link;   /* cache.buckets while used */
    uint64_t hash;
    cg_hvd_wire_t w;         /* the parameters every rank agreed on */
    uint32_t index;          /* its bit */
    bool used;
    struct cg_hvd_req *pending; /* this rank's request waiting on the bit */
    cg_list_t pend_link;     /* cache.pend while pending is set */
    uint64_t since_ns;       /* when it started waiting */
} cg_hvd_slot_t;

typedef struct cg_hvd_cache {
    uint32_t capacity;       /* agreed: min over ranks; 0 off */
    uint32_t hw;             /* slots ever used: bits in the vector */
    uint32_t npending;       /* slots with a pending request */
    cg_list_t pend;          /* those slots (each cycle sets their bits) */
    cg_hvd_slot_t **chunks;  /* 64 slots each, allocated as hw grows */
    cg_list_t lru;
    cg_list_t free;          /* evicted slots below hw, reused first */
    cg_list_t buckets[CG_HVD_BUCKETS];
    uint64_t *vec;           /* exchanged: flag word, then the bits */
    size_t vec_words;        /* allocated words */
} cg_hvd_cache_t;

/* The members of a grouped enqueue (hvd_group.c), allocated at enqueue
 * and freed once the last member arrived at completion (under the core's
 * lock): until then no member is marked done; then all are, with the
 * first failure's status and text. */
typedef struct cg_hvd_group {
    int n, left;
    cg_status_t st;
    char err[512];
    struct cg_hvd_req *members[]; /* n */
} cg_hvd_group_t;

/* A growable array of requests (negotiation's announce queues). */
typedef struct cg_hvd_reqv {
    struct cg_hvd_req **v;
    size_t len, cap;
} cg_hvd_reqv_t;

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
    uint64_t spin_ns;         /* CG_SPIN_TIME: busy-poll before sleeping */
    char spin_why[48];        /* why not, when CG_SPIN_TIME is set */
    /* Bumped (under lock) by a first waiter and by a stop: the thread
     * busy-polls it after a cycle, without the lock, before it sleeps. A
     * line of its own: the lock's line, taken by every enqueue, must not
     * bounce to the spinning thread and back (padded on both sides: the
     * core's allocation is not known to be line-aligned). */
    char kick_pad0[64];
    atomic_uint kick;
    char kick_pad1[64];
    cg_hvd_spin_t wait_spin;  /* the waiters' budget (hvd_spin.h) */
    cg_hvd_spin_t cycle_spin; /* the thread's, after a cycle */
    bool progressed;          /* the last cycle announced or ran something */
    pthread_cond_t wake_cond; /* stop asked (the thread sleeps on it) */
    cg_list_t inbox;
    size_t inbox_len;         /* requests in the inbox */
    cg_list_t registry[CG_HVD_BUCKETS]; /* names in flight, by hash */
    cg_list_t warned;         /* cg_hvd_name_t: duplicates warned about */
    bool stop;                /* destroy asked */
    bool dead;                /* the thread ended: enqueue fails at once */
    cg_status_t dead_status;
    char dead_msg[256];
    cg_hvd_stats_t stats;
    pthread_t thread;
    /* Requests (hvd_queue.c, under lock): handed out and not released;
     * released ones kept for reuse (still accounted as CONTROL). */
    cg_list_t req_live;
    cg_list_t req_free;
    size_t req_nfree;
    uint64_t req_allocs;      /* requests allocated from the governor */
    bool req_wake;            /* a batch completed a waited-on request */

    /* Background thread only. */
    cg_list_t owned;          /* requests taken from the inbox */
    cg_list_t table;          /* cg_hvd_entry_t */
    cg_list_t tab_buckets[CG_HVD_BUCKETS];
    void *xbuf;               /* records of every rank */
    size_t xbuf_len;
    cg_hvd_entry_t **ready;
    size_t ready_len, ready_cap;
    struct cg_hvd_extent *xv; /* a staged group's extents (hvd_stage.c) */
    size_t xv_cap;
    size_t *segs;             /* its ring segments (more than 2 ranks) */
    void *fbuf;               /* fusion buffer (CG_MEM_CAT_FUSION) */
    size_t fbuf_len;
    size_t fbuf_want;         /* the size asked when fbuf was allocated */
    size_t fusion_cap;        /* agreed this cycle: min over ranks */
    cg_hvd_stats_t tstats;    /* published into stats each cycle */
    /* Negotiation state (hvd_negotiate.c, hvd_cache.c, hvd_stall.c),
     * background thread only; set up at the first cycle. */
    bool nego_ready;
    int64_t *nhdr;            /* CG_HVD_NHDR per rank */
    uint64_t now_ns;          /* this cycle's clock */
    cg_hvd_offer_t last_offer; /* sent in the last full round */
    size_t stage_chunk;       /* agreed in it (SIZE_MAX: no rank stages) */
    bool cache_agreed;        /* capacity agreed (first full round) */
    cg_hvd_cache_t cache;
    cg_hvd_reqv_t ann;        /* this rank's records of this round */
    cg_hvd_reqv_t redo;       /* to announce next cycle (evicted slots) */
    uint64_t stall_next_ns;   /* next stall check */
    uint64_t stall_warn_ns;   /* last stall warning (0: none) */
    bool stall_stop;          /* a stall passed CG_STALL_SHUTDOWN_TIME */
    uint64_t n_hits, n_full, n_warned; /* not yet added to stats */
    uint64_t n_colls;         /* allreduces and broadcasts begun here */
    cg_hvd_entry_t **entry_pool; /* freed entries kept for reuse (a stack) */
    size_t pool_len;
    struct cg_metrics *metrics; /* CG_METRICS_FILE (hvd_metrics.c); NULL */
    struct cg_metrics_http *metrics_http; /* CG_METRICS_PORT; NULL */
    struct cg_hvd_tl *tl;     /* CG_TIMELINE on rank 0 (hvd_timeline.c) */
    cg_backend_t *be_cpu;     /* host tensors (CG_CPU_OPERATIONS) */
    cg_backend_t *be_gpu;     /* CUDA tensors (CG_GPU_OPERATIONS); may be
                                 be_cpu itself when both are the same kind;
                                 NULL while gpu_auto waits */
    bool gpu_auto;            /* AUTO chooses at the first CUDA collective
                                 (hvd_gpu_auto.c) */
    struct cg_hvd_gpu *gpu;   /* CUDA state (hvd_gpu.h); set at create */
    size_t *rs_counts;        /* size elements: a reducescatter's blocks
                                 (allocated at create, so no rank can fail
                                 to allocate it alone mid-collective) */
    /* Process sets (hvd_sets.c): every set other than the global one has
     * a core of its own over its members (own bootstrap, communicator,
     * backends, thread); the global core holds the table. */
    cg_bootstrap_t *bs;       /* the core's: ctx->bs, or the set's own */
    struct cg_hvd_sets *sets; /* the global core's table; NULL in a set's */
    cg_hvd_core_t *parent;    /* a set's core: the global core; else NULL */
    int32_t set_id;           /* 0: the global core */
    int *set_ranks;           /* a set's core: job rank of each set rank */
    uint64_t set_adds;        /* global core: sets added (each set's
                                 bootstrap cookie differs) */
    /* Join (hvd_join.c), background thread only: ranks that joined, in
     * the order every rank shares; this rank's join request. */
    uint64_t *joined;         /* bitmap, (size + 63) / 64 words */
    int n_joined, last_joined;
    struct cg_hvd_req *join_req;
};

/* The wire type of a join (not a cg_hvd_op_type_t: it carries no tensor
 * and never reaches execution) and Horovod's name for it. */
#define CG_HVD_WIRE_JOIN 100
#define CG_HVD_JOIN_NAME "join.noname"

typedef struct cg_hvd_name {
    cg_list_t link;
    char name[CG_HVD_NAME_MAX];
} cg_hvd_name_t;

/* hvd_check.c: the checks every enqueue shares, filling w (type, dtype,
 * shape, name, placement; op, root and scales left for the caller); sets
 * cg_last_error(). */
cg_status_t cg_hvd_check_tensor(const cg_hvd_core_t *core,
                                const cg_hvd_tensor_t *t,
                                cg_hvd_op_type_t type, cg_hvd_wire_t *w);
size_t cg_hvd_wire_count(const cg_hvd_wire_t *w);
/* "allreduce", "broadcast", "allgather", "reducescatter" ("unknown" out
 * of range). */
const char *cg_hvd_type_name(int32_t type);
/* w's shape as "[2, 3]" into buf (cut to len). */
void cg_hvd_shape_str(const cg_hvd_wire_t *w, char *buf, size_t len);
uint64_t cg_hvd_name_hash(const char *name);

/* hvd_queue.c: the request lists, at create; at destroy, after the
 * thread ended and cg_hvd_fail_all, frees the kept requests and detaches
 * those not yet released (cg_hvd_release then frees them alone). */
void cg_hvd_queue_init(cg_hvd_core_t *core);
void cg_hvd_queue_fini(cg_hvd_core_t *core);
/* The enqueue of a request whose wire cg_hvd_check_tensor filled
 * (registry, duplicates, inbox); sets cg_last_error(). */
cg_status_t cg_hvd_enqueue(cg_hvd_core_t *core, const cg_hvd_tensor_t *t,
                           cg_hvd_op_type_t type, const cg_hvd_wire_t *w,
                           cg_hvd_req_h *req_p);
/* The same into `batch` (a list the caller owns, not yet seen by the
 * background thread) instead of the inbox, so the caller can finish the
 * requests (a group, alltoall's splits) before cg_hvd_batch_commit hands
 * the n of them to the cycle in one move; cg_hvd_batch_abort fails and
 * releases them instead. Names in a batch are in the registry: a
 * duplicate of one is refused (never coalesced) when either request is
 * grouped or an alltoall. */
cg_status_t cg_hvd_enqueue_to(cg_hvd_core_t *core, const cg_hvd_tensor_t *t,
                              cg_hvd_op_type_t type, const cg_hvd_wire_t *w,
                              cg_list_t *batch, cg_hvd_req_h *req_p);
/* Under the lock: core->stats.grouped_calls += groups. */
void cg_hvd_batch_commit(cg_hvd_core_t *core, cg_list_t *batch, size_t n,
                         uint64_t groups);
void cg_hvd_batch_abort(cg_hvd_core_t *core, cg_list_t *batch,
                        cg_status_t st, const char *msg);
/* The wire of each op's enqueue (hvd_ops.c; reducescatter's in
 * hvd_rscatter.c): cg_hvd_check_tensor plus that op's own checks
 * (cg_last_error() set on failure), on the core already routed to. */
cg_status_t cg_hvd_allreduce_wire(cg_hvd_core_t *core,
                                  const cg_hvd_tensor_t *t, cg_redop_t op,
                                  double prescale, double postscale,
                                  cg_hvd_wire_t *w);
cg_status_t cg_hvd_allgather_wire(cg_hvd_core_t *core,
                                  const cg_hvd_tensor_t *t, cg_hvd_wire_t *w);
cg_status_t cg_hvd_reducescatter_wire(cg_hvd_core_t *core,
                                      const cg_hvd_tensor_t *t, cg_redop_t op,
                                      double prescale, double postscale,
                                      cg_hvd_wire_t *w);
/* Background thread: a request of the core's own standing in for this
 * rank in a collective it did not enqueue (a joined rank's part of an
 * allreduce): w's parameters, input and output zeros (STAGING memory,
 * freed with the request), on the owned list and already released, so
 * completing or failing it recycles it. */
cg_status_t cg_hvd_req_stand_in(cg_hvd_core_t *core, const cg_hvd_wire_t *w,
                                struct cg_hvd_req **req_p);
/* Completes a request (and its followers) under the lock; msg may be NULL
 * on success. Only a request someone waits on wakes the waiters. */
void cg_hvd_req_complete(cg_hvd_core_t *core, struct cg_hvd_req *req,
                         cg_status_t st, const char *msg);
/* The same for a batch (a fused group): one lock acquisition and at most
 * one wake-up for all of them. The core's lock is held from begin to end:
 * call nothing in between that takes it. */
void cg_hvd_complete_begin(cg_hvd_core_t *core);
void cg_hvd_req_complete_locked(cg_hvd_core_t *core, struct cg_hvd_req *req,
                                cg_status_t st, const char *msg);
void cg_hvd_complete_end(cg_hvd_core_t *core);
/* Under the lock: copies the thread's counters (all but duplicates,
 * counted at enqueue) into the stats readers see. */
void cg_hvd_stats_publish(cg_hvd_core_t *core);
/* Fails every request in the inbox and the owned list. */
void cg_hvd_fail_all(cg_hvd_core_t *core, cg_status_t st, const char *msg);
/* hvd_wire.c: what another rank sent, checked before the table reads it
 * (CG_ERR_MISMATCH naming the rank and the field). hdr: the full round's
 * size x CG_HVD_NHDR header; w: one record from rank `from`. */
#define CG_HVD_RECORDS_MAX (1 << 24) /* records one rank announces a round */
cg_status_t cg_hvd_nhdr_check(const int64_t *hdr, int size);
cg_status_t cg_hvd_wire_check(const cg_hvd_wire_t *w, int size, int from);

/* hvd_negotiate.c: one cycle's negotiation of the n_new requests of the
 * owned list starting at `first` (plus those a cache eviction sent back),
 * this rank offering `offer` (the cycle asks cg_hvd_fusion_prepare; a
 * changed offer runs the full round; the agreed fusion size and staging
 * chunk are the minimum over ranks, in core->fusion_cap and, for the GPU
 * path, cg_hvd_gpu_stage_agree):
 * fills core->ready in the order every rank shares (cache hits in slot
 * order, then the full round's) and sets *stop_rank_p to the first rank
 * that asked to stop (-1: none). A stall shutdown agreed by every rank
 * returns CG_ERR_TIMEOUT naming the stalled tensors; any other failure
 * breaks the comm. */
cg_status_t cg_hvd_negotiate(cg_hvd_core_t *core, cg_list_t *first,
                             size_t n_new, bool stop,
                             const cg_hvd_offer_t *offer, int *stop_rank_p);
/* Frees the negotiation state: the table, the entry pool, the cache, the
 * announce queues (the requests they point to belong to the owned list). */
void cg_hvd_negotiate_free(cg_hvd_core_t *core);

/* hvd_table.c: the table's entries, their pool, and the growable vectors
 * negotiation, the cache and the stall inspector fill. */
cg_status_t cg_hvd_pool_create(cg_hvd_core_t *core);
/* Frees the kept entries and the pool (no-op without one). */
void cg_hvd_pool_destroy(cg_hvd_core_t *core);
/* A table entry for w (first announced by `rank`), in core->table; in
 * the name buckets too when `bucket`. */
cg_status_t cg_hvd_entry_new(cg_hvd_core_t *core, int rank,
                             const cg_hvd_wire_t *w, uint64_t hash,
                             bool bucket, cg_hvd_entry_t **e_p);
/* Back into the pool while there is one, else freed. */
void cg_hvd_entry_free(cg_hvd_core_t *core, cg_hvd_entry_t *e);
/* Frees every entry of core->table. */
void cg_hvd_table_clear(cg_hvd_core_t *core);
cg_status_t cg_hvd_ready_push(cg_hvd_core_t *core, cg_hvd_entry_t *e);
cg_status_t cg_hvd_reqv_push(cg_hvd_core_t *core, cg_hvd_reqv_t *v,
                             struct cg_hvd_req *req);
void cg_hvd_reqv_free(cg_hvd_core_t *core, cg_hvd_reqv_t *v);

/* hvd_cache.c: the response cache (Horovod's HOROVOD_CACHE_CAPACITY).
 * Every change happens in an order all ranks share: eviction of a name
 * some rank announced a record for, insertion of ready names in ready
 * order (least recently used evicted at capacity), hits in slot order. */
void cg_hvd_cache_init(cg_hvd_core_t *core);
cg_status_t cg_hvd_cache_setup(cg_hvd_core_t *core, uint32_t capacity);
void cg_hvd_cache_cleanup(cg_hvd_core_t *core);
/* Slot s (below cache.hw). */
cg_hvd_slot_t *cg_hvd_cache_slot(const cg_hvd_cache_t *c, uint32_t s);
/* Takes slot s's pending request off it (NULL when none). */
struct cg_hvd_req *cg_hvd_cache_unpend(cg_hvd_cache_t *c, cg_hvd_slot_t *s);

/* In a loop over the cycle's ready list at j: prefetches the entry 16
 * ahead and the request of the one 8 ahead. A step of a thousand small
 * tensors walks a thousand of each, mostly out of this core's caches
 * (the caller's thread wrote the requests), several times; one miss after
 * the other cost tens of nanoseconds per tensor per walk. */
static inline void cg_hvd_ready_prefetch(const cg_hvd_core_t *core,
                                         size_t j)
{
    if (j + 16 < core->ready_len)
        __builtin_prefetch(core->ready[j + 16]);
    if (j + 8 < core->ready_len)
        __builtin_prefetch(core->ready[j + 8]->local);
}
/* A new request: true if it now waits on its name's bit. */
bool cg_hvd_cache_lookup(cg_hvd_core_t *core, struct cg_hvd_req *req);
/* A record for w's name arrived: its slot (if any) goes on every rank; a
 * request of this rank waiting on it is announced next cycle. */
cg_status_t cg_hvd_cache_evict_name(cg_hvd_core_t *core,
                                    const cg_hvd_wire_t *w);
cg_status_t cg_hvd_cache_insert(cg_hvd_core_t *core,
                                const cg_hvd_entry_t *e);
/* The one bitwise-AND allreduce of [flags][bits]; pushes the names ready
 * everywhere onto core->ready (slot order). *full_p: some rank needs the
 * records round (need_full: this rank does). */
cg_status_t cg_hvd_cache_exchange(cg_hvd_core_t *core, bool need_full,
                                  bool *full_p);

/* hvd_stall.c: the stall inspector (Horovod's HOROVOD_STALL_CHECK_*),
 * at most once a second: pushes cached requests waiting too long through
 * the records round, has rank 0 warn about names some ranks announced and
 * others have not, and sets core->stall_stop past the shutdown time. */
cg_status_t cg_hvd_stall_tick(cg_hvd_core_t *core);
/* The error every rank fails with once a stall shutdown is agreed. */
cg_status_t cg_hvd_stall_shutdown(cg_hvd_core_t *core);

/* hvd_fusion.c, at cycle start once the inbox is taken: sizes the
 * fusion buffers and the staging slots and fills this rank's offer. */
void cg_hvd_fusion_prepare(cg_hvd_core_t *core, cg_hvd_offer_t *offer);
void cg_hvd_fusion_release(cg_hvd_core_t *core);
/* Runs core->ready in order; a broken comm or backend returns its
 * status (the cycle then fails every pending request). */
cg_status_t cg_hvd_execute(cg_hvd_core_t *core);
/* hvd_gpu_auto.c: AUTO's choice for CUDA tensors, made by every rank at
 * the same ready entry (the first CUDA allreduce or broadcast): NCCL
 * where its cost fits every rank's budget and its creation succeeds on
 * every rank, else COLLGUARD (host-staged). Sets be_gpu; an error only
 * where the core's own communicator failed or NCCL failed other than for
 * memory. */
cg_status_t cg_hvd_gpu_auto_settle(cg_hvd_core_t *core);
/* hvd_gpu_auto.c: the parameters the core's backends are made from. */
void cg_hvd_backend_params(cg_hvd_core_t *core, cg_backend_mem_t mem,
                           const char *var, cg_backend_params_t *p);

/* hvd_stage.c: ready[i]'s fused group (e->group == group, `members`
 * tensors, `bytes` in all) reduced on be->ops->allreduce_staged in fbuf,
 * copied in and out piece by piece; *ran_p false (CG_OK, nothing ran)
 * when the governor refuses memory for its layout: pack it instead.
 * cg_hvd_stage_release frees the layout arrays at destroy. */
cg_status_t cg_hvd_fused_staged(cg_hvd_core_t *core, cg_backend_t *be,
                                size_t i, int group, size_t members,
                                char *fbuf, size_t bytes, bool *ran_p);
void cg_hvd_stage_release(cg_hvd_core_t *core);
/* An allreduce alone (too large for the fusion buffer, or fusion off) on
 * the same ring segments it would have fused, so its bits do not depend
 * on whether it was fused: staged in place in its output. */
cg_status_t cg_hvd_single_staged(cg_hvd_core_t *core, cg_backend_t *be,
                                 const cg_hvd_entry_t *e);
/* hvd_gather.c: the allgather ready[i] and the ready allgathers after it
 * that fuse with it (same device and dtype, results together within the
 * agreed fusion capacity), gathered by one cg_allgatherv; marks them done
 * and completes their requests. A failure breaks the comm. */
cg_status_t cg_hvd_allgather_run(cg_hvd_core_t *core, size_t i);

/* hvd_rscatter.c: the reducescatter ready[i] and the ready ones after it
 * that fuse with it (same device, dtype, op and scales, inputs together
 * within the agreed fusion capacity), packed rank-major in the host
 * fusion buffer and reduce-scattered once; marks them done and completes
 * their requests. */
cg_status_t cg_hvd_reducescatter_run(cg_hvd_core_t *core, size_t i);

/* hvd_group.c: before a cycle's ready list runs: a group with a failed member fails
 * whole, and one not wholly in the list (a broken invariant) too; the
 * same verdict on every rank, from the agreed list. */
void cg_hvd_group_check(cg_hvd_core_t *core);

/* hvd_alltoall.c: the alltoall ready[i] alone (splits exchanged, result
 * allocated and agreed, rows exchanged); marks it done and completes its
 * request. A failed exchange breaks the comm. */
cg_status_t cg_hvd_alltoall_run(cg_hvd_core_t *core, size_t i);

/* hvd_cycle.c: the background thread, and a core's parts (hvd_life.c
 * drives them). A core over bs (ctx->bs for the global core); for a process set's core
 * parent is the global core, id the set's and ranks (bs's size of them)
 * its members' job ranks, copied. A set's core writes no timeline or
 * metrics and leaves the governor's sampling to the global core. */
cg_status_t cg_hvd_core_make(cg_ctx_h ctx, cg_bootstrap_t *bs,
                             cg_hvd_core_t *parent, int32_t id,
                             const int *ranks, cg_hvd_core_t **core_p);
/* A removed set's core: its thread stopped (every member removes it, so
 * all stop together), pending requests failed with msg, communicator,
 * backends, buffers and bootstrap freed. What enqueue and requests still
 * touch stays until cg_hvd_core_free (the global core's destroy). */
void cg_hvd_core_retire(cg_hvd_core_t *core, const char *msg);
void cg_hvd_core_free(cg_hvd_core_t *core);
void *cg_hvd_cycle_main(void *arg);

/* hvd_sets.c: the process-set table of the global core. */
cg_status_t cg_hvd_sets_create(cg_hvd_core_t *core);
/* Frees the table (empty it with cg_hvd_sets_pop first). */
void cg_hvd_sets_destroy(cg_hvd_core_t *core);
/* Takes the cores out, one a call: sets still registered (*stopped_p
 * false), then removed ones (already retired); NULL once empty. */
cg_hvd_core_t *cg_hvd_sets_pop(cg_hvd_core_t *core, bool *stopped_p);
bool cg_hvd_sets_has(cg_hvd_core_t *core, int32_t id);
/* Registers set id (ranks copied; sc NULL where this rank is not in it). */
cg_status_t cg_hvd_sets_insert(cg_hvd_core_t *core, int32_t id,
                               const int *ranks, int n, cg_hvd_core_t *sc);
/* Removal: room for one more stopped core first (may fail), then the set
 * leaves the table (its core returned, NULL if not a member), then its
 * core, once retired, is kept until the global core goes. */
cg_status_t cg_hvd_sets_reserve_gone(cg_hvd_core_t *core);
cg_hvd_core_t *cg_hvd_sets_unlink(cg_hvd_core_t *core, int32_t id);
void cg_hvd_sets_keep_gone(cg_hvd_core_t *core, cg_hvd_core_t *sc);
/* Every enqueue starts here: *core_p (the core the caller passed) becomes
 * the core of the process set t names (CG_HVD_TENSOR_FIELD_PROCESS_SET;
 * none or 0: the global core itself). An unknown or removed id, or a set
 * this rank is not a member of, is CG_ERR_INVALID_PARAM naming `what`
 * ("allreduce"). Grouped operations route once for the group. */
cg_status_t cg_hvd_route(cg_hvd_core_t **core_p, const cg_hvd_tensor_t *t,
                         const char *what);
cg_status_t cg_hvd_route_id(cg_hvd_core_t **core_p, int32_t id,
                            const char *what);
/* A job rank's rank in core's set (root of a broadcast); -1 when it is not
 * a member. And back: the job rank of a set rank. */
int cg_hvd_set_rank_of(const cg_hvd_core_t *core, int job_rank);
int cg_hvd_job_rank_of(const cg_hvd_core_t *core, int set_rank);

/* hvd_join.c. Negotiation calls the first when a join record arrives
 * (rank r's, req this rank's own or NULL), the second after each records
 * round: while ranks are joined, every name announced by all the others
 * is ready (allreduces with zeros from the joined ranks, other ops failed
 * on every rank as Horovod fails them), and once every rank joined the
 * joins complete with the last rank to join. */
void cg_hvd_join_announce(cg_hvd_core_t *core, int rank,
                          struct cg_hvd_req *req);
cg_status_t cg_hvd_join_round(cg_hvd_core_t *core, int joined_before);

#endif
