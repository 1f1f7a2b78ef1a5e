/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What a transport backend implements: one cg_transport_ops_t, and objects
 * whose first member is the common header below, so transport.c can
 * dispatch without knowing the backend. Internal to transport/.
 */
#ifndef CG_TRANSPORT_IMPL_H
#define CG_TRANSPORT_IMPL_H

#include "cg_build.h"
#include "transport/transport.h"

typedef struct cg__transport_ops {
    cg_transport_kind_t kind; /* UCX or SOCKET */
    cg_status_t (*create)(const cg_transport_params_t *params,
                          cg_transport_t **tp_p);
    void (*destroy)(cg_transport_t *tp);
    cg_status_t (*listen)(cg_transport_t *tp, cg_tp_handle_t *handle_p,
                          cg_tp_listener_t **listener_p);
    cg_status_t (*accept)(cg_tp_listener_t *listener, cg_tp_conn_t **conn_p);
    void (*listener_close)(cg_tp_listener_t *listener);
    cg_status_t (*connect)(cg_transport_t *tp, const cg_tp_handle_t *handle,
                           cg_tp_conn_t **conn_p);
    cg_status_t (*conn_ready)(cg_tp_conn_t *conn);
    void (*conn_close)(cg_tp_conn_t *conn);
    cg_status_t (*isend)(cg_tp_conn_t *conn, const void *buf, size_t len,
                         uint32_t tag, cg_tp_req_t **req_p);
    cg_status_t (*irecv)(cg_tp_conn_t *conn, void *buf, size_t cap,
                         uint32_t tag, cg_tp_req_t **req_p);
    cg_status_t (*test)(cg_tp_req_t *req, size_t *size_p);
    int (*done)(const cg_tp_req_t *req);
    cg_status_t (*wait)(cg_tp_req_t *req, size_t *size_p);
    cg_status_t (*progress)(cg_transport_t *tp);
} cg_transport_ops_t;

/* Common leading members of every backend object. */
struct cg_transport {
    const cg_transport_ops_t *ops;
    cg_transport_params_t params;
};
struct cg_tp_listener {
    const cg_transport_ops_t *ops;
    cg_transport_t *tp;
};
struct cg_tp_conn {
    const cg_transport_ops_t *ops;
    cg_transport_t *tp;
    int peer_rank;
};
struct cg_tp_req {
    const cg_transport_ops_t *ops;
};

/* Backends compiled into this build (NULL when absent). */
extern const cg_transport_ops_t cg__tcp_ops;
#if CG_HAVE_UCX
extern const cg_transport_ops_t cg__ucx_ops;
#endif

#endif
