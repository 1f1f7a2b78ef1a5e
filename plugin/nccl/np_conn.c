/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Connection setup of the net plugin: listen (a fresh lane and cookie per
 * listener, both in the 128-byte handle), connect and accept that never
 * block (NULL comm until the handshake is done; a connect in progress is
 * remembered in the handle NCCL passes again), and close. A peer that does
 * not present the listener's cookie is refused by the transport's
 * handshake and logged; the listener keeps serving.
 * Layer: plugin/nccl; calls transport/ and core/base.
 */
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

#include "core/base/clock.h"
#include "core/base/error.h"
#include "plugin/nccl/np_impl.h"

static void cg__np_put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void cg__np_put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t cg__np_get64(const uint8_t *p)
{
    uint64_t v = 0;

    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static uint64_t cg__np_new_cookie(void)
{
    uint64_t c = 0;

    while (c == 0)
        if (getrandom(&c, sizeof(c), 0) != sizeof(c))
            c = cg_now_ns() * 0x9e3779b97f4a7c15ull;
    return c;
}

static int cg__np_dev_ok(int dev)
{
    if (cg__np.users > 0 && dev >= 0 && dev < cg__np.ndevs)
        return 1;
    cg_warn(&cg__np.log, "net plugin %s: device %d out of range (%d "
            "devices)", CG_NP_NAME, dev, cg__np.ndevs);
    return 0;
}

void cg__np_listen_free(cg__np_listen_t *l)
{
    cg__np_lock(&l->lane->lock);
    cg_tp_listener_close(l->listener);
    cg__np_unlock(&l->lane->lock);
    cg__np_lane_unref(l->lane);
    cg_mem_free(&cg__np.mem, CG_MEM_CAT_CONTROL, l, sizeof(*l));
}

void cg__np_comm_free(cg__np_comm_t *comm)
{
    cg__np_lock(&comm->lane->lock);
    cg_tp_conn_close(comm->conn);
    cg__np_unlock(&comm->lane->lock);
    cg__np_lane_unref(comm->lane);
    cg_mem_free(&cg__np.mem, CG_MEM_CAT_CONTROL, comm, sizeof(*comm));
}

ncclResult_t cg__np_listen(void *ctx, int dev, void *handle, void **listen)
{
    cg_tp_handle_t tph;
    cg__np_listen_t *l;
    uint8_t *h = handle;
    uint64_t cookie;
    cg_status_t st;

    (void)ctx;
    if (handle == NULL || listen == NULL)
        return ncclInvalidArgument;
    *listen = NULL;
    if (!cg__np_dev_ok(dev))
        return ncclInvalidArgument;
    l = cg_mem_alloc(&cg__np.mem, CG_MEM_CAT_CONTROL, sizeof(*l));
    if (l == NULL)
        return ncclSystemError;
    memset(l, 0, sizeof(*l));
    l->dev = dev;
    cookie = cg__np_new_cookie();
    st = cg__np_lane_create(dev, cg__np.cfg.transport, cookie, &l->lane);
    if (st != CG_OK)
        goto err_free;
    st = cg_tp_listen(l->lane->tp, &tph, &l->listener);
    if (st != CG_OK)
        goto err_lane;
    for (size_t i = CG_NP_TPH_MAX; i < sizeof(tph.bytes); i++)
        if (tph.bytes[i] != 0) {
            st = cg_error_set(CG_ERR_INTERNAL, "the %s transport's handle "
                              "needs more than %d bytes",
                              cg_transport_name(l->lane->tp), CG_NP_TPH_MAX);
            goto err_listener;
        }
    *listen = cg__np_slot_alloc(CG_NP_LISTEN, l);
    if (*listen == NULL) {
        st = cg_error_set(CG_ERR_BUSY, "all %u handle slots in use",
                          CG_NP_SLOTS);
        goto err_listener;
    }
    l->slot = cg__np_id_slot((uint64_t)(uintptr_t)*listen);
    memset(h, 0, NCCL_NET_HANDLE_MAXSIZE);
    cg__np_put32(h, CG_NP_HANDLE_MAGIC);
    h[4] = CG_NP_HANDLE_VERSION;
    h[5] = strcmp(cg_transport_name(l->lane->tp), "ucx") == 0
               ? CG_TRANSPORT_UCX : CG_TRANSPORT_SOCKET;
    cg__np_put64(h + 8, cookie);
    memcpy(h + CG_NP_HANDLE_HDR, tph.bytes, CG_NP_TPH_MAX);
    cg_debug(&cg__np.log, "net plugin %s: listening on device %d over %s",
             CG_NP_NAME, dev, cg_transport_name(l->lane->tp));
    return ncclSuccess;

err_listener:
    cg_tp_listener_close(l->listener);
err_lane:
    cg__np_lane_unref(l->lane);
err_free:
    cg_warn(&cg__np.log, "net plugin %s: listen on device %d failed: %s",
            CG_NP_NAME, dev, cg_last_error());
    cg_mem_free(&cg__np.mem, CG_MEM_CAT_CONTROL, l, sizeof(*l));
    return cg__np_result(st);
}

/* First call on a handle: a lane with the handle's cookie and transport,
 * the connect started, the comm's id written into the handle. */
static ncclResult_t cg__np_connect_start(int dev, uint8_t *h, void **id_p)
{
    cg_tp_handle_t tph;
    cg__np_comm_t *comm;
    cg_status_t st;
    int kind = h[5];

    if (kind != CG_TRANSPORT_UCX && kind != CG_TRANSPORT_SOCKET)
        return ncclInvalidArgument;
    comm = cg_mem_alloc(&cg__np.mem, CG_MEM_CAT_CONTROL, sizeof(*comm));
    if (comm == NULL)
        return ncclSystemError;
    memset(comm, 0, sizeof(*comm));
    comm->kind = CG_NP_SEND;
    comm->dev = dev;
    memset(&tph, 0, sizeof(tph));
    memcpy(tph.bytes, h + CG_NP_HANDLE_HDR, CG_NP_TPH_MAX);
    st = cg__np_lane_create(dev, (cg_transport_kind_t)kind,
                           cg__np_get64(h + 8), &comm->lane);
    if (st != CG_OK)
        goto err_free;
    st = cg_tp_connect(comm->lane->tp, &tph, &comm->conn);
    if (st != CG_OK)
        goto err_lane;
    *id_p = cg__np_slot_alloc(CG_NP_SEND, comm);
    if (*id_p == NULL) {
        st = cg_error_set(CG_ERR_BUSY, "all handle slots in use");
        cg_tp_conn_close(comm->conn);
        goto err_lane;
    }
    cg__np_put64(h + 16, (uint64_t)(uintptr_t)*id_p);
    return ncclSuccess;

err_lane:
    cg__np_lane_unref(comm->lane);
err_free:
    cg_warn(&cg__np.log, "net plugin %s: connect on device %d failed: %s",
            CG_NP_NAME, dev, cg_last_error());
    cg_mem_free(&cg__np.mem, CG_MEM_CAT_CONTROL, comm, sizeof(*comm));
    return cg__np_result(st);
}

ncclResult_t cg__np_connect(void *ctx, int dev, void *handle, void **send,
                           ncclNetDeviceHandle_v11_t **dev_comm)
{
    uint8_t *h = handle;
    cg__np_comm_t *comm;
    ncclResult_t res;
    cg_status_t st;
    void *id;

    (void)ctx;
    (void)dev_comm; /* host-driven only: never offloaded */
    if (handle == NULL || send == NULL)
        return ncclInvalidArgument;
    *send = NULL;
    if (!cg__np_dev_ok(dev))
        return ncclInvalidArgument;
    if (h[0] != 'C' || h[1] != 'G' || h[2] != 'N' || h[3] != 'P' ||
        h[4] != CG_NP_HANDLE_VERSION) {
        cg_warn(&cg__np.log, "net plugin %s: connect with a handle that "
                "is not collguard's (version %d); refused", CG_NP_NAME,
                h[4]);
        return ncclInvalidArgument;
    }
    id = (void *)(uintptr_t)cg__np_get64(h + 16);
    if (id == NULL) {
        res = cg__np_connect_start(dev, h, &id);
        if (res != ncclSuccess)
            return res;
    }
    comm = cg__np_lookup(id, CG_NP_SEND);
    if (comm == NULL || comm->ready) {
        cg_warn(&cg__np.log, "net plugin %s: connect with a stale handle "
                "(its connection was already returned or closed)",
                CG_NP_NAME);
        return ncclInvalidArgument;
    }
    cg__np_lock(&comm->lane->lock);
    st = cg_tp_conn_ready(comm->conn);
    cg__np_unlock(&comm->lane->lock);
    if (st == CG_INPROGRESS)
        return ncclSuccess;
    cg__np_put64(h + 16, 0);
    if (st != CG_OK) {
        cg_warn(&cg__np.log, "net plugin %s: connect failed: %s",
                CG_NP_NAME, cg_last_error());
        cg__np_slot_release(id);
        cg__np_comm_free(comm);
        return cg__np_result(st);
    }
    comm->ready = true;
    *send = id;
    return ncclSuccess;
}

ncclResult_t cg__np_accept(void *listen, void **recv,
                          ncclNetDeviceHandle_v11_t **dev_comm)
{
    cg__np_listen_t *l = cg__np_lookup(listen, CG_NP_LISTEN);
    cg__np_comm_t *comm;
    cg_tp_conn_t *conn = NULL;
    cg_status_t st;

    (void)dev_comm;
    if (recv == NULL)
        return ncclInvalidArgument;
    *recv = NULL;
    if (l == NULL)
        return ncclInvalidArgument;
    cg__np_lock(&l->lane->lock);
    st = cg_tp_accept(l->listener, &conn);
    cg__np_unlock(&l->lane->lock);
    if (st == CG_INPROGRESS)
        return ncclSuccess;
    if (st != CG_OK) {
        cg_warn(&cg__np.log, "net plugin %s: accept failed: %s",
                CG_NP_NAME, cg_last_error());
        return cg__np_result(st);
    }
    comm = cg_mem_alloc(&cg__np.mem, CG_MEM_CAT_CONTROL, sizeof(*comm));
    if (comm == NULL)
        goto err_conn;
    memset(comm, 0, sizeof(*comm));
    comm->kind = CG_NP_RECV;
    comm->dev = l->dev;
    comm->ready = true;
    comm->lane = l->lane;
    comm->conn = conn;
    *recv = cg__np_slot_alloc(CG_NP_RECV, comm);
    if (*recv == NULL) {
        cg_mem_free(&cg__np.mem, CG_MEM_CAT_CONTROL, comm, sizeof(*comm));
        goto err_conn;
    }
    cg__np_lane_ref(l->lane);
    return ncclSuccess;

err_conn:
    cg__np_lock(&l->lane->lock);
    cg_tp_conn_close(conn);
    cg__np_unlock(&l->lane->lock);
    cg_warn(&cg__np.log, "net plugin %s: no memory or slot for an accepted "
            "connection", CG_NP_NAME);
    return ncclSystemError;
}

static ncclResult_t cg__np_close(void *id, cg__np_kind_t kind)
{
    void *obj = cg__np_lookup(id, kind);

    if (obj == NULL)
        return ncclInvalidArgument;
    cg__np_slot_release(id);
    if (kind == CG_NP_LISTEN)
        cg__np_listen_free(obj);
    else
        cg__np_comm_free(obj);
    return ncclSuccess;
}

ncclResult_t cg__np_close_send(void *send)
{
    return cg__np_close(send, CG_NP_SEND);
}

ncclResult_t cg__np_close_recv(void *recv)
{
    return cg__np_close(recv, CG_NP_RECV);
}

ncclResult_t cg__np_close_listen(void *listen)
{
    return cg__np_close(listen, CG_NP_LISTEN);
}
