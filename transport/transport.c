/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Backend selection (CG_TRANSPORT) and dispatch through the ops table of
 * each object. Layer: transport.
 */
#include "transport/transport_impl.h"

#include "cg_build.h"
#include "core/base/error.h"

const char *cg_transport_built(void)
{
#if CG_HAVE_UCX
    return "ucx,socket";
#else
    return "socket";
#endif
}

cg_status_t cg_transport_create(const cg_transport_params_t *params,
                                cg_transport_t **tp_p)
{
    const cg_transport_ops_t *ops = &cg__tcp_ops;

    if (params == NULL || tp_p == NULL || params->mem.alloc == NULL)
        return cg_error_set(CG_ERR_INVALID_PARAM,
                            "cg_transport_create: params, tp_p and mem.alloc "
                            "are required");
    switch (params->kind) {
    case CG_TRANSPORT_UCX:
#if CG_HAVE_UCX
        ops = &cg__ucx_ops;
        break;
#else
        return cg_error_set(CG_ERR_UNSUPPORTED,
                            "CG_TRANSPORT=ucx but this build has no UCX "
                            "(install libucx-dev and rebuild, or use "
                            "CG_TRANSPORT=socket)");
#endif
    case CG_TRANSPORT_AUTO:
#if CG_HAVE_UCX
        ops = &cg__ucx_ops;
#endif
        break;
    case CG_TRANSPORT_SOCKET:
        break;
    }
    cg_status_t st = ops->create(params, tp_p);
#if CG_HAVE_UCX
    if (st != CG_OK && params->kind == CG_TRANSPORT_AUTO) {
        cg_warn(params->log, "UCX transport unavailable (%s); using sockets",
                cg_last_error());
        st = cg__tcp_ops.create(params, tp_p);
    }
#endif
    return st;
}

void cg_transport_destroy(cg_transport_t *tp)
{
    if (tp != NULL)
        tp->ops->destroy(tp);
}

cg_transport_kind_t cg_transport_kind(const cg_transport_t *tp)
{
    return tp->ops->kind;
}

const char *cg_transport_name(const cg_transport_t *tp)
{
    return cg_transport_kind_name(tp->ops->kind);
}

cg_status_t cg_tp_listen(cg_transport_t *tp, cg_tp_handle_t *handle_p,
                         cg_tp_listener_t **listener_p)
{
    return tp->ops->listen(tp, handle_p, listener_p);
}

cg_status_t cg_tp_accept(cg_tp_listener_t *listener, cg_tp_conn_t **conn_p)
{
    return listener->ops->accept(listener, conn_p);
}

void cg_tp_listener_close(cg_tp_listener_t *listener)
{
    if (listener != NULL)
        listener->ops->listener_close(listener);
}

cg_status_t cg_tp_connect(cg_transport_t *tp, const cg_tp_handle_t *handle,
                          cg_tp_conn_t **conn_p)
{
    return tp->ops->connect(tp, handle, conn_p);
}

cg_status_t cg_tp_conn_ready(cg_tp_conn_t *conn)
{
    return conn->ops->conn_ready(conn);
}

int cg_tp_conn_peer_rank(const cg_tp_conn_t *conn)
{
    return conn->peer_rank;
}

void cg_tp_conn_close(cg_tp_conn_t *conn)
{
    if (conn != NULL)
        conn->ops->conn_close(conn);
}

cg_status_t cg_tp_isend(cg_tp_conn_t *conn, const void *buf, size_t len,
                        uint32_t tag, cg_tp_req_t **req_p)
{
    return conn->ops->isend(conn, buf, len, tag, req_p);
}

cg_status_t cg_tp_irecv(cg_tp_conn_t *conn, void *buf, size_t cap,
                        uint32_t tag, cg_tp_req_t **req_p)
{
    return conn->ops->irecv(conn, buf, cap, tag, req_p);
}

cg_status_t cg_tp_test(cg_tp_req_t *req, size_t *size_p)
{
    return req->ops->test(req, size_p);
}

int cg_tp_done(const cg_tp_req_t *req)
{
    return req->ops->done(req);
}

cg_status_t cg_tp_wait(cg_tp_req_t *req, size_t *size_p)
{
    return req->ops->wait(req, size_p);
}

cg_status_t cg_tp_progress(cg_transport_t *tp)
{
    return tp->ops->progress(tp);
}
