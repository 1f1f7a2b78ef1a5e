/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internal objects of the NCCL net plugin (np_*.c): the one
 * state struct of the library, lanes (a transport instance with its lock),
 * listen/send/recv comms, memory registrations, requests, and the handle
 * table that turns every pointer NCCL holds into a checked id.
 * Layer: plugin/nccl; calls transport/, the governor and core/base.
 *
 * Threads: NCCL drives a comm's data path (isend/irecv/test) from its
 * proxy progress thread while its service thread listens, connects,
 * accepts, registers and queries. Each send comm owns a lane, each
 * listener owns one that its accepted recv comms share; a lane's lock
 * covers every transport call on it, so comms never wait on each other
 * and the data path never waits on setup elsewhere. The state lock covers
 * the handle table's free list, init/finalize and registration accounting;
 * lookups in the table are lock-free (a generation per slot), inline here.
 * A request whose transport parts all finished when it was posted is
 * DONE: its test takes no lock (np_data.c). A comm remembers the last
 * registration its posts accepted and rechecks it by its slot's
 * generation alone.
 */
#ifndef CG_PLUGIN_NCCL_NP_IMPL_H
#define CG_PLUGIN_NCCL_NP_IMPL_H

#include <net/if.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/base/log.h"
#include "core/config/config.h"
#include "core/governor/governor.h"
#include "plugin/nccl/net_v11.h"
#include "transport/transport.h"

#define CG_NP_NAME "collguard"
#define CG_NP_DEV_MAX 32
#define CG_NP_MAX_RECVS 8           /* grouped receives per irecv */
#define CG_NP_MAX_COMMS 16384       /* advertised maxComms */
#define CG_NP_SLOT_BITS 16
#define CG_NP_SLOTS (1u << CG_NP_SLOT_BITS) /* comms + registrations */
#define CG_NP_MAX_BYTES (1ull << 30) /* maxP2pBytes: sizes fit test's int */

/* Listen handle (128 bytes, little-endian):
 *   0 magic "CGNP"   4 version u8   5 transport kind u8   6..7 zero
 *   8 cookie u64 (the listener's; the connector presents it)
 *  16 connect slot u64 (0 from listen; the connector's pending comm id,
 *     so NCCL's repeated connect on the same buffer resumes it)
 *  24 the transport's own handle, CG_NP_TPH_MAX bytes */
#define CG_NP_HANDLE_MAGIC 0x504e4743u
#define CG_NP_HANDLE_VERSION 1
#define CG_NP_HANDLE_HDR 24
#define CG_NP_TPH_MAX (NCCL_NET_HANDLE_MAXSIZE - CG_NP_HANDLE_HDR)

typedef enum {
    CG_NP_FREE = 0,
    CG_NP_LISTEN = 1,
    CG_NP_SEND = 2,
    CG_NP_RECV = 3,
    CG_NP_MR = 4,
    CG_NP_REQ = 5 /* only in encoded request ids, never in a slot */
} cg__np_kind_t;

/* The lane lock: taken with one atomic exchange, given back with a
 * release store, which (unlike a mutex's unlock, an atomic exchange) is
 * no full barrier on x86: the unlock after an isend does not wait for the
 * stores of its copy into shared memory to drain. A thread that finds it
 * held spins, then yields, then naps (np_lane.c). A hold is one transport
 * call, all of them non-blocking but a comm's close, which may flush its
 * endpoint for up to 200 ms (CG_UCX_CLOSE_WAIT_NS). */
typedef struct cg__np_lock {
    atomic_int held;
} cg__np_lock_t;

void cg__np_lock_wait(cg__np_lock_t *l);

static inline void cg__np_lock(cg__np_lock_t *l)
{
    if (atomic_exchange_explicit(&l->held, 1, memory_order_acquire) != 0)
        cg__np_lock_wait(l);
}

static inline void cg__np_unlock(cg__np_lock_t *l)
{
    atomic_store_explicit(&l->held, 0, memory_order_release);
}

typedef struct cg__np_lane {
    cg__np_lock_t lock;    /* every transport call on tp */
    cg_transport_t *tp;
    atomic_int refs;       /* comms and the listener using it */
} cg__np_lane_t;

/* A request's state. FREE -> BUSY or DONE only under the lane lock (by
 * isend/irecv, which fill the request first and publish the state last,
 * release); BUSY -> FREE by test under the lock, DONE -> FREE by test
 * without it (release: the next taker's acquire sees the fields read). */
enum {
    CG_NP_RQ_FREE = 0,
    CG_NP_RQ_BUSY = 1,     /* transport parts pending */
    CG_NP_RQ_DONE = 2      /* every part finished when posted */
};

typedef struct cg__np_req {
    _Atomic uint8_t state; /* CG_NP_RQ_* */
    _Atomic uint8_t gen;   /* 7 bits, in the request's id */
    bool failed;
    int n;
    cg_status_t status;    /* of the first sub-request that failed */
    cg_tp_req_t *tp[CG_NP_MAX_RECVS];   /* NULL once finished */
    size_t size[CG_NP_MAX_RECVS];
} cg__np_req_t;

/* A send or recv comm; a send comm exists while connecting too. */
typedef struct cg__np_comm {
    cg__np_kind_t kind;
    int dev;
    bool ready;
    cg__np_lane_t *lane;
    cg_tp_conn_t *conn;
    int next_req;          /* where the next take looks first (lane lock) */
    cg__np_req_t reqs[NCCL_NET_MAX_REQUESTS];
    /* The registration isend/irecv last accepted (lane lock): its id, its
     * slot's generation word and its id's generation. While the word
     * holds that generation the registration is live (a deregMr, and so
     * any reuse of the slot, changes it): one load rechecks it. */
    const void *mr_id;
    const _Atomic uint32_t *mr_gen_p;
    uint32_t mr_gen;
} cg__np_comm_t;

typedef struct cg__np_listen {
    uint32_t slot;
    int dev;
    cg__np_lane_t *lane;
    cg_tp_listener_t *listener;
} cg__np_listen_t;

typedef struct cg__np_mr {
    void *data;
    size_t size;
    int type;
} cg__np_mr_t;

typedef struct cg__np_slot {
    _Atomic uint32_t gen;  /* odd while in use */
    _Atomic int kind;
    void *_Atomic obj;
    uint32_t next_free;
} cg__np_slot_t;

typedef struct cg__np_dev {
    char ifname[IF_NAMESIZE];
    char name[IF_NAMESIZE + 16];
    int speed_mbps;
    uint64_t guid;
} cg__np_dev_t;

typedef struct cg__np_state {
    pthread_mutex_t lock;
    int users;               /* v11 contexts, +1 for a legacy init */
    bool legacy;             /* inited through v10 or older */
    ncclDebugLogger_t logger;
    cg_log_t log;
    cg_config_t cfg;
    cg_host_probe_t host_probe;
    cg_mem_probe_t probe;
    cg_governor_t *gov;
    cg_mem_ops_t mem;
    int ndevs;
    cg__np_dev_t devs[CG_NP_DEV_MAX];
    cg__np_slot_t *slots;
    uint32_t free_head;      /* CG_NP_SLOTS: none */
    uint32_t nlive;          /* slots in use */
    int ctx_token;           /* what a v11 ctx points to */
} cg__np_state_t;

/* np_global.c: the library's one state struct, status to ncclResult_t. */
extern cg__np_state_t cg__np;
ncclResult_t cg__np_result(cg_status_t st);

/* np_state.c: its life. */
ncclResult_t cg__np_init(ncclDebugLogger_t logger, bool legacy);
ncclResult_t cg__np_finalize(void *ctx);

/* np_table.c: ids for the pointers NCCL holds. An id is, from bit 63:
 * tag CG_NP_ID_TAG (8 bits), kind (4), the slot's generation (24), slot
 * (16), extra (12: 0, or for a request its index << 7 | its generation). */
#define CG_NP_ID_TAG 0xc6ull
#define CG_NP_GEN_MASK 0xffffffu
void *cg__np_slot_alloc(cg__np_kind_t kind, void *obj);
void cg__np_slot_release(void *id);
/* Fields of an id (as a 64-bit value): its slot and its generation. */
static inline uint32_t cg__np_id_slot(uint64_t v)
{
    return (uint32_t)(v >> 12) & (CG_NP_SLOTS - 1);
}
static inline uint32_t cg__np_id_gen(uint64_t v)
{
    return (uint32_t)(v >> 28) & CG_NP_GEN_MASK;
}
/* Frees every live object (finalize with objects NCCL left open): comms
 * first (they may share a listener's lane), then listeners and
 * registrations, each with its kind's free from frees. */
typedef struct cg__np_frees {
    void (*comm)(cg__np_comm_t *comm);
    void (*listen)(cg__np_listen_t *l);
    void (*mr)(cg__np_mr_t *mr);
} cg__np_frees_t;
void cg__np_table_sweep(const cg__np_frees_t *frees);

/* The slot an id of kind names (tag and kind already checked) when it is
 * live in the id's generation; NULL otherwise. Lock-free: the generation
 * is read first (acquire, slot_alloc stores it last), so kind and object
 * are those of that generation. Slot 0 is never live (generation 0). */
static inline cg__np_slot_t *cg__np_id_live(uint64_t v)
{
    cg__np_slot_t *slots = cg__np.slots;
    uint32_t i = cg__np_id_slot(v), cur;

    if (slots == NULL)
        return NULL;
    cur = atomic_load_explicit(&slots[i].gen, memory_order_acquire);
    if (!(cur & 1) || (cur & CG_NP_GEN_MASK) != cg__np_id_gen(v))
        return NULL;
    return &slots[i];
}

/* The object behind id when it is live and of kind; NULL otherwise. */
static inline void *cg__np_lookup(const void *id, cg__np_kind_t kind)
{
    uint64_t v = (uint64_t)(uintptr_t)id;
    cg__np_slot_t *s;

    if (v >> 52 != (CG_NP_ID_TAG << 4 | (uint64_t)kind) ||
        (v & 0xfffu) != 0 || (s = cg__np_id_live(v)) == NULL ||
        atomic_load_explicit(&s->kind, memory_order_relaxed) != (int)kind)
        return NULL;
    return atomic_load_explicit(&s->obj, memory_order_relaxed);
}

/* The id of request idx (generation gen) of the comm whose id is comm_id:
 * the comm's slot and generation, kind REQ. */
static inline void *cg__np_req_id(const void *comm_id, int idx, unsigned gen)
{
    uint64_t v = (uint64_t)(uintptr_t)comm_id;

    v = (v & ~(0xfull << 52)) | (uint64_t)CG_NP_REQ << 52;
    return (void *)(uintptr_t)(v | (uint64_t)idx << 7 | (gen & 0x7fu));
}

/* The comm and request index behind a request id, and the request's state
 * (BUSY or DONE); NULL if the id is stale or not a request's. */
static inline cg__np_comm_t *cg__np_req_lookup(const void *id, int *idx_p,
                                             int *state_p)
{
    uint64_t v = (uint64_t)(uintptr_t)id;
    cg__np_comm_t *comm;
    cg__np_slot_t *s;
    cg__np_req_t *r;
    int kind, idx;

    if (v >> 52 != (CG_NP_ID_TAG << 4 | CG_NP_REQ) ||
        (s = cg__np_id_live(v)) == NULL)
        return NULL;
    kind = atomic_load_explicit(&s->kind, memory_order_relaxed);
    if (kind != CG_NP_SEND && kind != CG_NP_RECV)
        return NULL;
    comm = atomic_load_explicit(&s->obj, memory_order_relaxed);
    idx = (int)(v >> 7) & 0x1f; /* < NCCL_NET_MAX_REQUESTS */
    r = &comm->reqs[idx];
    *state_p = atomic_load_explicit(&r->state, memory_order_acquire);
    if (*state_p == CG_NP_RQ_FREE ||
        atomic_load_explicit(&r->gen, memory_order_relaxed) != (v & 0x7fu))
        return NULL;
    *idx_p = idx;
    return comm;
}

/* np_lane.c */
cg_status_t cg__np_lane_create(int dev, cg_transport_kind_t kind,
                              uint64_t cookie, cg__np_lane_t **lane_p);
void cg__np_lane_ref(cg__np_lane_t *lane);
void cg__np_lane_unref(cg__np_lane_t *lane);

/* np_dev.c */
cg_status_t cg__np_devs_scan(cg__np_state_t *st);
ncclResult_t cg__np_devices(int *ndev);
ncclResult_t cg__np_get_properties(int dev, ncclNetProperties_v11_t *props);

/* np_conn.c */
ncclResult_t cg__np_listen(void *ctx, int dev, void *handle, void **listen);
ncclResult_t cg__np_connect(void *ctx, int dev, void *handle, void **send,
                           ncclNetDeviceHandle_v11_t **dev_comm);
ncclResult_t cg__np_accept(void *listen, void **recv,
                          ncclNetDeviceHandle_v11_t **dev_comm);
ncclResult_t cg__np_close_send(void *send);
ncclResult_t cg__np_close_recv(void *recv);
ncclResult_t cg__np_close_listen(void *listen);
void cg__np_comm_free(cg__np_comm_t *comm);
void cg__np_listen_free(cg__np_listen_t *l);

/* np_data.c */
ncclResult_t cg__np_isend(void *send, void *data, size_t size, int tag,
                         void *mhandle, void *phandle, void **request);
ncclResult_t cg__np_irecv(void *recv, int n, void **data, size_t *sizes,
                         int *tags, void **mhandles, void **phandles,
                         void **request);
ncclResult_t cg__np_iflush(void *recv, int n, void **data, int *sizes,
                          void **mhandles, void **request);
ncclResult_t cg__np_test(void *request, int *done, int *sizes);

/* np_mr.c */
ncclResult_t cg__np_reg_mr(void *comm, void *data, size_t size, int type,
                          void **mhandle);
ncclResult_t cg__np_reg_mr_dmabuf(void *comm, void *data, size_t size,
                                 int type, uint64_t offset, int fd,
                                 void **mhandle);
ncclResult_t cg__np_dereg_mr(void *comm, void *mhandle);
void cg__np_mr_free(cg__np_mr_t *mr);

#endif
