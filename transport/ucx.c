/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The UCX backend's context and worker: ucp_init (tag matching + wakeup),
 * one single-threaded worker driven only by explicit progress, the periodic
 * sweep (listeners, control sockets, timeouts, endpoint closes), what
 * drives progress (conn_ready, test) and cg_tp_wait's spin-then-sleep.
 * Connections live in ucx_conn.c, requests in ucx_req.c; the top of the
 * ucx_*.c files, none of which calls it. Layer: transport; calls UCX and
 * core/base only.
 */
#include "transport/ucx_impl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "core/base/error.h"

/* cg_tp_wait sleeps once UCX has reported no event for this long. */
#define CG_UCX_SPIN_NS 100000ull
/* Longest single sleep, so sweeps (timeouts, listeners) still run. */
#define CG_UCX_SLEEP_MS 20
/* Sleep bound while handshakes run or sends are pending. */
#define CG_UCX_SHORT_SLEEP_MS 1

static void cg__ucx_sweep(cg__ucx_tp_t *tp, uint64_t now)
{
    cg_list_t *l, *next;

    tp->sweep_now = 0;
    tp->next_sweep_ns = now + CG_UCX_SWEEP_NS;
    for (l = tp->listeners.next; l != &tp->listeners; l = l->next)
        cg__ucx_listener_progress(cg_list_entry(l, cg__ucx_listener_t, link));
    for (l = tp->conns.next; l != &tp->conns; l = l->next)
        cg__ucx_conn_sweep(cg_list_entry(l, cg__ucx_conn_t, link), now);
    for (l = tp->closing.next; l != &tp->closing; l = next) {
        next = l->next;
        cg__ucx_conn_reap(cg_list_entry(l, cg__ucx_conn_t, link));
    }
}

unsigned cg__ucx_progress(cg__ucx_tp_t *tp)
{
    cg_list_t *l, *next;
    unsigned events;
    uint64_t now;

    events = ucp_worker_progress(tp->worker);
    /* The clock is read every few rounds: sweeps need ms precision, and a
     * read costs as much as an idle UCX progress round. */
    if (++tp->rounds % CG_UCX_CLOCK_ROUNDS != 0 && !tp->sweep_now &&
        tp->nhs == 0)
        return events;
    if (tp->nhs > 0) {
        for (l = tp->conns.next; l != &tp->conns; l = next) {
            next = l->next;
            cg__ucx_conn_t *conn = cg_list_entry(l, cg__ucx_conn_t, link);
            if (conn->state == CG_UCX_CONN_HANDSHAKE)
                cg__ucx_conn_hs_progress(conn);
        }
    }
    now = cg_now_ns();
    if (tp->sweep_now || now >= tp->next_sweep_ns)
        cg__ucx_sweep(tp, now);
    return events;
}

static cg_status_t cg__ucx_progress_op(cg_transport_t *super)
{
    cg__ucx_progress((cg__ucx_tp_t *)super);
    return CG_OK;
}

cg_status_t cg__ucx_conn_ready(cg_tp_conn_t *super)
{
    cg__ucx_conn_t *conn = (cg__ucx_conn_t *)super;

    if (conn->state == CG_UCX_CONN_HANDSHAKE)
        cg__ucx_progress((cg__ucx_tp_t *)conn->super.tp);
    switch (conn->state) {
    case CG_UCX_CONN_READY:
        return CG_OK;
    case CG_UCX_CONN_HANDSHAKE:
        return CG_INPROGRESS;
    default:
        return cg_error_set(conn->status, "ucx: connection %u: %s", conn->id,
                            conn->why);
    }
}

cg_status_t cg__ucx_test(cg_tp_req_t *super, size_t *size_p)
{
    cg__ucx_req_t *req = (cg__ucx_req_t *)super;
    cg_status_t st;

    if (req->status == CG_INPROGRESS) {
        cg__ucx_progress(req->tp);
        if (req->status == CG_INPROGRESS)
            return CG_INPROGRESS;
    }
    st = req->status;
    if (size_p != NULL)
        *size_p = (st == CG_OK) ? req->length : 0;
    if (st != CG_OK)
        cg_error_set(st, "ucx: %s request failed: %s",
                     (req->flags & CG_UCX_REQ_RECV) ? "receive" : "send",
                     cg_status_string(st));
    if (req->ucp == NULL)
        cg__ucx_req_free(req);
    else
        req->flags |= CG_UCX_REQ_RELEASED;
    return st;
}

/* Sleeps until the worker, a control socket or a listener has an event, or
 * a bound passes: short while handshakes run (their sockets are not in the
 * epoll set) or sends are pending (UCX raises no event when a full shared
 * memory FIFO drains, so a stalled sender must look again soon). */
static void cg__ucx_sleep(cg__ucx_tp_t *tp)
{
    struct epoll_event evs[8];
    ucs_status_t us;
    int n, i, ms;

    us = ucp_worker_arm(tp->worker);
    if (us == UCS_ERR_BUSY)
        return; /* events arrived meanwhile: progress again */
    ms = (tp->nhs > 0 || tp->nsends > 0 || us != UCS_OK)
             ? CG_UCX_SHORT_SLEEP_MS : CG_UCX_SLEEP_MS;
    n = epoll_wait(tp->epfd, evs, 8, ms);
    for (i = 0; i < n; i++) {
        if (evs[i].data.fd != tp->efd)
            tp->sweep_now = 1;
    }
}

/* Spins on progress while UCX reports events, sleeps once it has been quiet
 * for CG_UCX_SPIN_NS. */
cg_status_t cg__ucx_wait(cg_tp_req_t *req_h, size_t *size_p)
{
    cg__ucx_req_t *req = (cg__ucx_req_t *)req_h;
    cg__ucx_tp_t *tp = req->tp;
    uint64_t quiet_since = 0;
    unsigned idle = 0;

    while (req->status == CG_INPROGRESS) {
        if (cg__ucx_progress(tp) > 0) {
            idle = 0;
            quiet_since = 0;
            continue;
        }
        if (++idle % CG_UCX_CLOCK_ROUNDS != 0)
            continue;
        if (quiet_since == 0) {
            quiet_since = cg_now_ns();
        } else if (cg_now_ns() - quiet_since >= CG_UCX_SPIN_NS &&
                   req->status == CG_INPROGRESS) {
            cg__ucx_sleep(tp);
            quiet_since = 0;
        }
    }
    return cg__ucx_test(req_h, size_p);
}

/* UCX settings collguard changes from UCX's defaults, each only when the
 * user set none of its variables and UCX_TLS allows its transport (else
 * UCX would warn that the setting is unused). */
typedef struct {
    const char *name;       /* for ucp_config_modify: the field name
                             * without its transport prefix */
    const char *value;
    const char *user[3];    /* variables that mean the user chose */
    const char *tls[4];     /* UCX_TLS words naming its transport */
} cg__ucx_default_t;

static const cg__ucx_default_t cg__ucx_defaults[] = {
    /* Shared memory for endpoints with peer error handling (those to a
     * peer whose host is not known to be ours): UCX 1.13 offers posix/sysv
     * to them only with MM_ERROR_HANDLING on, else they fall back to TCP
     * on loopback at half the bandwidth. */
    {"MM_ERROR_HANDLING", "y",
     {"UCX_MM_ERROR_HANDLING", "UCX_POSIX_ERROR_HANDLING",
      "UCX_SYSV_ERROR_HANDLING"},
     {"shm", "mm", "posix", "sysv"}},
    /* With peer error handling UCX 1.13 moves large TCP messages as
     * active-message fragments of TX_SEG_SIZE (8 KiB by default), not by
     * its zero-copy put: larger fragments and receive segments move
     * 512 KiB-32 MiB messages 10-30% faster on loopback. */
    {"TX_SEG_SIZE", "64k", {"UCX_TCP_TX_SEG_SIZE"}, {"tcp"}},
    {"RX_SEG_SIZE", "256k", {"UCX_TCP_RX_SEG_SIZE"}, {"tcp"}},
};

static int cg__ucx_tls_allows(const char *tls, const char *const *words)
{
    size_t i;

    if (tls == NULL || tls[0] == '^' || strstr(tls, "all") != NULL)
        return 1;
    for (i = 0; i < 4 && words[i] != NULL; i++) {
        if (strstr(tls, words[i]) != NULL)
            return 1;
    }
    return 0;
}

static void cg__ucx_config_defaults(cg__ucx_tp_t *tp, ucp_config_t *config)
{
    const char *tls = getenv("UCX_TLS");
    size_t i, k;

    for (i = 0; i < sizeof(cg__ucx_defaults) / sizeof(cg__ucx_defaults[0]);
         i++) {
        const cg__ucx_default_t *d = &cg__ucx_defaults[i];
        ucs_status_t us;
        int user = 0;

        for (k = 0; k < 3 && d->user[k] != NULL; k++)
            user |= getenv(d->user[k]) != NULL;
        if (user || !cg__ucx_tls_allows(tls, d->tls))
            continue;
        us = ucp_config_modify(config, d->name, d->value);
        if (us != UCS_OK)
            cg_debug(tp->log, "ucx: cannot set %s=%s: %s", d->name, d->value,
                     ucs_status_string(us));
    }
}

static cg_status_t cg__ucx_init_worker(cg__ucx_tp_t *tp)
{
    ucp_worker_params_t wp = {0};
    ucp_worker_attr_t attr = {0};
    ucs_status_t us;

    wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wp.thread_mode = UCS_THREAD_MODE_SINGLE;
    us = ucp_worker_create(tp->context, &wp, &tp->worker);
    if (us != UCS_OK)
        return cg_error_set(cg__ucx_status(us), "ucx: ucp_worker_create "
                            "failed: %s", ucs_status_string(us));
    attr.field_mask = UCP_WORKER_ATTR_FIELD_ADDRESS;
    us = ucp_worker_query(tp->worker, &attr);
    if (us != UCS_OK)
        return cg_error_set(cg__ucx_status(us), "ucx: ucp_worker_query "
                            "(address) failed: %s", ucs_status_string(us));
    tp->addr = attr.address;
    tp->addr_len = attr.address_length;
    if (tp->addr_len + CG_UCX_PREFIX_SIZE > CG_HS_PAYLOAD_MAX)
        return cg_error_set(CG_ERR_UNSUPPORTED, "ucx: worker address of %zu "
                            "bytes exceeds the handshake payload limit %d "
                            "(restrict UCX_TLS)", tp->addr_len,
                            CG_HS_PAYLOAD_MAX - CG_UCX_PREFIX_SIZE);
    us = ucp_worker_get_efd(tp->worker, &tp->efd);
    if (us != UCS_OK)
        return cg_error_set(cg__ucx_status(us), "ucx: ucp_worker_get_efd "
                            "failed: %s", ucs_status_string(us));
    return CG_OK;
}

static void cg__ucx_release(cg__ucx_tp_t *tp)
{
    cg_list_t *l;

    if (tp->worker != NULL) {
        if (tp->addr != NULL)
            ucp_worker_release_address(tp->worker, tp->addr);
        ucp_worker_destroy(tp->worker);
        tp->worker = NULL; /* request frees now bypass the cache */
    }
    /* The worker is gone, so no callback can touch these any more. */
    while (!cg_list_empty(&tp->zombies)) {
        l = tp->zombies.next;
        cg__ucx_req_free(cg_list_entry(l, cg__ucx_req_t, link));
    }
    cg__ucx_req_cache_drain(tp);
    if (tp->context != NULL)
        ucp_cleanup(tp->context);
    if (tp->epfd >= 0)
        close(tp->epfd);
    cg_mem_free(&tp->super.params.mem, CG_MEM_CAT_CONTROL, tp, sizeof(*tp));
}

static cg_status_t cg__ucx_create(const cg_transport_params_t *params,
                                  cg_transport_t **tp_p)
{
    ucp_params_t up = {0};
    ucp_config_t *config;
    ucs_status_t us;
    cg__ucx_tp_t *tp;
    cg_status_t st;

    tp = cg_mem_alloc(&params->mem, CG_MEM_CAT_CONTROL, sizeof(*tp));
    if (tp == NULL)
        return cg_error_set(CG_ERR_NO_MEMORY, "ucx: cannot allocate the "
                            "transport (%zu bytes)", sizeof(*tp));
    memset(tp, 0, sizeof(*tp));
    tp->super.ops = &cg__ucx_ops;
    tp->super.params = *params;
    tp->log = params->log;
    if (params->ifname != NULL &&
        strlen(params->ifname) >= sizeof(tp->ifname)) {
        st = cg_error_set(CG_ERR_INVALID_PARAM, "ucx: interface list '%s' "
                          "is longer than %zu bytes", params->ifname,
                          sizeof(tp->ifname) - 1);
        cg_mem_free(&params->mem, CG_MEM_CAT_CONTROL, tp, sizeof(*tp));
        return st;
    }
    if (params->ifname != NULL)
        strcpy(tp->ifname, params->ifname);
    tp->super.params.ifname = tp->ifname;
    tp->efd = -1;
    tp->next_conn_id = 1;
    cg_list_init(&tp->conns);
    cg_list_init(&tp->listeners);
    cg_list_init(&tp->zombies);
    cg_list_init(&tp->closing);
    cg_list_init(&tp->req_cache);
    tp->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (tp->epfd < 0) {
        st = cg_error_set(CG_ERR_IO, "ucx: epoll_create1 failed: %s",
                          strerror(errno));
        goto err_free;
    }

    us = ucp_config_read(NULL, NULL, &config);
    if (us != UCS_OK) {
        st = cg_error_set(CG_ERR_CONFIG, "ucx: ucp_config_read failed: %s "
                          "(check the UCX_* variables)",
                          ucs_status_string(us));
        goto err_free;
    }
    cg__ucx_config_defaults(tp, config);
    up.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_NAME;
    up.features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP;
    up.name = "collguard";
    us = ucp_init(&up, config, &tp->context);
    ucp_config_release(config);
    if (us != UCS_OK) {
        st = cg_error_set(cg__ucx_status(us), "ucx: ucp_init failed: %s",
                          ucs_status_string(us));
        goto err_free;
    }
    st = cg__ucx_init_worker(tp);
    if (st != CG_OK)
        goto err_free;
    cg__ucx_mode_init(tp);
    cg__ucx_epoll_add(tp, tp->efd);
    cg_debug(tp->log, "ucx: worker ready, address %zu bytes", tp->addr_len);
    *tp_p = &tp->super;
    return CG_OK;

err_free:
    cg__ucx_release(tp);
    return st;
}

static void cg__ucx_destroy(cg_transport_t *super)
{
    cg__ucx_tp_t *tp = (cg__ucx_tp_t *)super;
    unsigned left = 0;

    while (!cg_list_empty(&tp->listeners))
        cg__ucx_listener_close(&cg_list_entry(tp->listeners.next,
                                              cg__ucx_listener_t, link)
                                    ->super);
    while (!cg_list_empty(&tp->conns)) {
        left++;
        cg__ucx_conn_close(
            &cg_list_entry(tp->conns.next, cg__ucx_conn_t, link)->super);
    }
    if (left > 0)
        cg_warn(tp->log, "ucx: transport destroyed with %u connection(s) "
                "still open; closed them", left);
    while (!cg_list_empty(&tp->closing)) {
        cg__ucx_conn_t *conn = cg_list_entry(tp->closing.next, cg__ucx_conn_t,
                                        link);
        if (conn->close_req != NULL) {
            ucp_request_free(conn->close_req); /* released when it ends */
            conn->close_req = NULL;
        }
        cg__ucx_conn_reap(conn);
    }
    cg__ucx_release(tp);
}

const cg_transport_ops_t cg__ucx_ops = {
    .kind = CG_TRANSPORT_UCX,
    .create = cg__ucx_create,
    .destroy = cg__ucx_destroy,
    .listen = cg__ucx_listen,
    .accept = cg__ucx_accept,
    .listener_close = cg__ucx_listener_close,
    .connect = cg__ucx_connect,
    .conn_ready = cg__ucx_conn_ready,
    .conn_close = cg__ucx_conn_close,
    .isend = cg__ucx_isend,
    .irecv = cg__ucx_irecv,
    .test = cg__ucx_test,
    .done = cg__ucx_done,
    .wait = cg__ucx_wait,
    .progress = cg__ucx_progress_op,
};
