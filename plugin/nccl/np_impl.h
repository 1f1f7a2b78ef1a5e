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
 * lookups in the table are lock-free (a generation per slot).
 */
#ifndef CG_PLUGIN_NCCL_NP_IMPL_H
#define CG_PLUGIN_NCCL_NP_IMPL_H

#include <net/if.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/base/log.h"
#include "core/config.h"
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

typedef struct cg__np_lane {
    pthread_mutex_t lock;  /* every transport call on tp */
    cg_transport_t *tp;
    atomic_int refs;       /* comms and the listener using it */
} cg__np_lane_t;

typedef struct cg__np_req {
    uint8_t gen;           /* 7 bits, in the request's id */
    bool used;
    bool failed;
    int n;
    cg_status_t status;    /* of the first sub-request that failed */
    cg_tp_req_t *tp[CG_NP_MAX_RECVS];   /* NULL once finished */
    size_t size[CG_NP_MAX_RECVS];
} cg__np_req_t;

/* A send or recv comm; a send comm exists while connecting too. */
typedef struct cg__np_comm {
    cg__np_kind_t kind;
    uint32_t slot;
    int dev;
    bool ready;
    cg__np_lane_t *lane;
    cg_tp_conn_t *conn;
    uint32_t free_mask;    /* bit i: reqs[i] is free */
    cg__np_req_t reqs[NCCL_NET_MAX_REQUESTS];
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

/* np_state.c: the library's one state struct. */
extern cg__np_state_t cg__np;
ncclResult_t cg__np_init(ncclDebugLogger_t logger, bool legacy);
ncclResult_t cg__np_finalize(void *ctx);
ncclResult_t cg__np_result(cg_status_t st);

/* np_table.c: ids for the pointers NCCL holds. */
void *cg__np_slot_alloc(cg__np_kind_t kind, void *obj);
void cg__np_slot_release(void *id);
/* The object behind id when it is live and of kind; NULL otherwise. */
void *cg__np_lookup(const void *id, cg__np_kind_t kind);
uint32_t cg__np_id_slot(const void *id);
void *cg__np_req_id(const cg__np_comm_t *comm, int idx);
/* The comm and request index behind a request id; NULL if stale. */
cg__np_comm_t *cg__np_req_lookup(const void *id, int *idx_p);
/* Frees every live object (finalize with objects NCCL left open). */
void cg__np_table_sweep(void);

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
