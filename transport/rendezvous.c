/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The TCP rendezvous, setup half: rank 0 serves the store (accepts every
 * rank through the BOOTSTRAP handshake, drops strangers, sends START with
 * the job cookie); other ranks dial it, retrying until rank 0 listens.
 * Layer: transport; calls transport/sock, transport/handshake, core/base.
 */
#include "transport/rendezvous_impl.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/base/error.h"
#include "transport/handshake.h"
#include "transport/sock.h"

/* Handshakes rank 0 runs at once; more connections wait in the backlog. */
#define CG__RDV_PENDING 16
/* A connection must finish its handshake this fast (or the timeout). */
#define CG__RDV_HS_LIMIT_NS (5ull * 1000000000ull)
/* Pause between dial attempts while rank 0 is not listening. */
#define CG__RDV_RETRY_NS (50ull * 1000000ull)

/* A verified peer: rank in range, not yet seen, same job size. Rejected
 * ones are told why before rank 0 closes them. */
static cg_status_t cg__rdv_admit(cg_rdv_t *rdv, const cg_hs_t *hs)
{
    int rank = hs->peer.rank;
    uint32_t size = (hs->peer.payload_len == 4)
                        ? cg__rdv_get32(hs->peer_payload) : 0;

    if (size != (uint32_t)rdv->p.size)
        return cg_error_set(CG_ERR_MISMATCH,
                            "rank %d says the job has %u ranks, rank 0 has "
                            "%d (a stale process of another run?)", rank,
                            size, rdv->p.size);
    if (rank < 1 || rank >= rdv->p.size)
        return cg_error_set(CG_ERR_MISMATCH, "rank %d outside 1..%d", rank,
                            rdv->p.size - 1);
    if (rdv->fds[rank] >= 0)
        return cg_error_set(CG_ERR_MISMATCH,
                            "rank %d is already connected (two processes "
                            "with the same rank?)", rank);
    rdv->fds[rank] = hs->fd;
    cg_sock_tune(hs->fd, rdv->p.timeout_ns);
    return CG_OK;
}

static bool cg__rdv_not_connected(const cg_rdv_t *rdv, int r)
{
    return rdv->fds[r] < 0;
}

/* CG_ERR_TIMEOUT naming the ranks that never arrived. */
static cg_status_t cg__rdv_missing(cg_rdv_t *rdv, int arrived)
{
    char list[256];

    cg__rdv_format_ranks(rdv, cg__rdv_not_connected, list, sizeof(list));
    return cg_error_set(CG_ERR_TIMEOUT,
                        "rank(s) %s never arrived at the rendezvous %s "
                        "within %.1f s (%d of %d ranks there)", list,
                        rdv->where, (double)rdv->p.timeout_ns / 1e9,
                        arrived + 1, rdv->p.size);
}

/* One finished or failed handshake in slot hs: admit or drop. */
static void cg__rdv_settle(cg_rdv_t *rdv, cg_hs_t *hs, cg_status_t status,
                           const cg_sockaddr_t *from, int *arrived_p)
{
    char str[CG_SOCKADDR_STRLEN];
    char why[CG__RDV_TEXT_MAX];

    if (status == CG_OK)
        status = cg__rdv_admit(rdv, hs);
    if (status == CG_OK) {
        cg_debug(rdv->p.log, "rendezvous: rank %d arrived from %s",
                 hs->peer.rank, cg_sockaddr_str(from, str, sizeof(str)));
        (*arrived_p)++;
    } else {
        snprintf(why, sizeof(why), "%s", cg_last_error());
        cg_warn(rdv->p.log, "rendezvous %s: dropped connection from %s: %s",
                rdv->where, cg_sockaddr_str(from, str, sizeof(str)), why);
        if (status == CG_ERR_MISMATCH) {
            cg__rdv_frame_t f = {CG_RDV_OP_ABORT, 0, (int32_t)status,
                                 strlen(why)};
            cg__rdv_send(hs->fd, &f, why, strlen(why),
                         cg_deadline_ns(100ull * 1000000ull));
        }
        cg_sock_close(hs->fd);
    }
    hs->fd = -1;
}

/* The slot a new connection takes: a free one, else the one whose
 * handshake started first (a real rank sends its header at once, so a
 * slot held longest is the likeliest stranger that says nothing; without
 * this, strangers holding every slot kept the job's ranks waiting in the
 * backlog until their handshake limit, 5 s per 16 of them). */
static int cg__rdv_slot(cg_rdv_t *rdv, cg_hs_t *slots, cg_sockaddr_t *from,
                        const uint64_t *born)
{
    char str[CG_SOCKADDR_STRLEN];
    int old = 0;

    for (int i = 0; i < CG__RDV_PENDING; i++) {
        if (slots[i].fd < 0)
            return i;
        if (born[i] < born[old])
            old = i;
    }
    cg_warn(rdv->p.log, "rendezvous %s: dropped connection from %s: no "
            "handshake after %.1f s while more connections wait",
            rdv->where, cg_sockaddr_str(&from[old], str, sizeof(str)),
            (double)(cg_now_ns() - born[old]) / 1e9);
    cg_sock_close(slots[old].fd);
    slots[old].fd = -1;
    return old;
}

/* Accepts up to one slot's worth of new connections; the newest are
 * never evicted in the same round, so each gets its progress call. */
static void cg__rdv_accept(cg_rdv_t *rdv, int lfd, cg_hs_t *slots,
                           cg_sockaddr_t *from, uint64_t *born,
                           uint64_t deadline)
{
    cg_hs_hdr_t local = {.kind = CG_HS_KIND_BOOTSTRAP,
                         .cookie = rdv->p.job_id, .rank = 0, .nsocks = 1};
    uint64_t hs_deadline = cg_deadline_ns(CG__RDV_HS_LIMIT_NS);
    cg_sockaddr_t peer;
    int fd, i;

    if (hs_deadline > deadline)
        hs_deadline = deadline;
    for (int n = 0; n < CG__RDV_PENDING; n++) {
        if (cg_sock_accept(lfd, &fd, &peer) != CG_OK)
            return;
        i = cg__rdv_slot(rdv, slots, from, born);
        from[i] = peer;
        born[i] = cg_now_ns();
        cg_hs_init(&slots[i], CG_HS_ACCEPTOR, fd, &local, NULL, hs_deadline);
    }
}

static cg_status_t cg__rdv_gather_peers(cg_rdv_t *rdv, int lfd,
                                        cg_hs_t *slots, uint64_t deadline)
{
    struct pollfd pfd[CG__RDV_PENDING + 1];
    cg_sockaddr_t from[CG__RDV_PENDING];
    uint64_t born[CG__RDV_PENDING] = {0};
    int arrived = 0;

    for (int i = 0; i < CG__RDV_PENDING; i++)
        slots[i].fd = -1;
    while (arrived < rdv->p.size - 1) {
        uint64_t now = cg_now_ns();
        int n = 1;

        if (now >= deadline)
            return cg__rdv_missing(rdv, arrived);
        pfd[0] = (struct pollfd){.fd = lfd, .events = POLLIN};
        for (int i = 0; i < CG__RDV_PENDING; i++) {
            if (slots[i].fd >= 0)
                pfd[n++] = (struct pollfd){.fd = slots[i].fd,
                                           .events = cg_hs_poll_events(
                                               &slots[i])};
        }
        uint64_t ms = (deadline - now) / 1000000ull + 1;
        poll(pfd, (nfds_t)n, ms > 100 ? 100 : (int)ms);
        if (pfd[0].revents & POLLIN)
            cg__rdv_accept(rdv, lfd, slots, from, born, deadline);
        for (int i = 0; i < CG__RDV_PENDING; i++) {
            cg_status_t st;
            if (slots[i].fd < 0)
                continue;
            st = cg_hs_progress(&slots[i]);
            if (st != CG_INPROGRESS)
                cg__rdv_settle(rdv, &slots[i], st, &from[i], &arrived);
        }
    }
    return CG_OK;
}

/* Rank 0 listens on the wildcard address of the rendezvous port, since a
 * host's own name often resolves to a loopback alias (127.0.1.1) on that
 * host; a loopback rendezvous stays on loopback. */
static void cg__rdv_bind_addr(cg_sockaddr_t *addr)
{
    int port = cg_sockaddr_port(addr);

    if (addr->u.sa.sa_family == AF_INET) {
        if ((ntohl(addr->u.in.sin_addr.s_addr) >> 24) == 127)
            return;
        addr->u.in.sin_addr.s_addr = htonl(INADDR_ANY);
    } else if (addr->u.sa.sa_family == AF_INET6) {
        if (IN6_IS_ADDR_LOOPBACK(&addr->u.in6.sin6_addr))
            return;
        addr->u.in6.sin6_addr = in6addr_any;
        addr->u.in6.sin6_scope_id = 0;
    }
    cg_sockaddr_set_port(addr, port);
}

/* The inherited socket when it really listens on the rendezvous port. */
static bool cg__rdv_inherited(const cg_rdv_t *rdv)
{
    int fd = rdv->p.listen_fd, on = 0;
    socklen_t len = sizeof(on);
    cg_sockaddr_t a;

    if (fd < 0)
        return false;
    a.len = sizeof(a.u);
    if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &on, &len) != 0 || !on ||
        getsockname(fd, &a.u.sa, &a.len) != 0 ||
        cg_sockaddr_port(&a) != rdv->p.port) {
        cg_warn(rdv->p.log, "rendezvous: fd %d from CG_RUN_RENDEZVOUS_FD is "
                "not a socket listening on port %d; binding the port anew",
                fd, rdv->p.port);
        return false;
    }
    /* Not for our own children; and accept must never block. */
    (void)fcntl(fd, F_SETFD, FD_CLOEXEC);
    (void)fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    return true;
}

static cg_status_t cg__rdv_serve(cg_rdv_t *rdv, uint64_t deadline)
{
    cg__rdv_frame_t start = {CG_RDV_OP_START, 0, 0, 8};
    size_t slots_size = CG__RDV_PENDING * sizeof(cg_hs_t);
    char why[CG__RDV_TEXT_MAX];
    uint8_t cookie[8];
    cg_sockaddr_t addr;
    cg_hs_t *slots;
    cg_status_t status = CG_OK;
    bool own = !cg__rdv_inherited(rdv);
    int lfd = rdv->p.listen_fd;

    if (own)
        status = cg_sock_resolve(rdv->host, rdv->p.port, &addr);
    if (own && status == CG_OK) {
        cg__rdv_bind_addr(&addr);
        status = cg_sock_listen(&addr, 1024, &lfd, NULL);
    }
    if (status != CG_OK) {
        snprintf(why, sizeof(why), "%s", cg_last_error());
        return cg_error_set(status,
                            "rank 0 cannot serve the rendezvous %s: %s (the "
                            "port must be free on rank 0's host)",
                            rdv->where, why);
    }
    slots = cg_mem_alloc(&rdv->p.mem, CG_MEM_CAT_CONTROL, slots_size);
    if (slots == NULL) {
        status = CG_ERR_NO_MEMORY;
        goto err_close;
    }
    cg_debug(rdv->p.log, "rendezvous: serving %s for %d ranks", rdv->where,
             rdv->p.size);
    status = cg__rdv_gather_peers(rdv, lfd, slots, deadline);
    for (int i = 0; i < CG__RDV_PENDING; i++) {
        if (slots[i].fd >= 0)
            cg_sock_close(slots[i].fd);
    }
    cg_mem_free(&rdv->p.mem, CG_MEM_CAT_CONTROL, slots, slots_size);
    if (own)
        cg_sock_close(lfd);
    if (status != CG_OK)
        goto err_abort;
    cg__rdv_put64(cookie, rdv->cookie);
    for (int r = 1; r < rdv->p.size && status == CG_OK; r++) {
        status = cg__rdv_send(rdv->fds[r], &start, cookie, sizeof(cookie),
                              deadline);
        if (status != CG_OK)
            status = cg_error_set(status, "rank %d left the rendezvous %s "
                                  "before it started", r, rdv->where);
    }
    if (status != CG_OK)
        goto err_abort;
    return CG_OK;

err_abort:
    snprintf(why, sizeof(why), "%s", cg_last_error());
    cg__rdv_abort_all(rdv, status, why);
    return cg_error_set(status, "%s", why);
err_close:
    if (own)
        cg_sock_close(lfd);
    return status;
}

static void cg__rdv_pause(uint64_t deadline)
{
    uint64_t now = cg_now_ns();
    uint64_t ns = CG__RDV_RETRY_NS;
    struct timespec ts;

    if (now >= deadline)
        return;
    if (deadline - now < ns)
        ns = deadline - now;
    ts.tv_sec = (time_t)(ns / 1000000000ull);
    ts.tv_nsec = (long)(ns % 1000000000ull);
    nanosleep(&ts, NULL);
}

/* Rank > 0: connect and handshake, retrying while rank 0 is not there. */
static cg_status_t cg__rdv_dial(cg_rdv_t *rdv, uint64_t deadline)
{
    cg_hs_hdr_t local = {.kind = CG_HS_KIND_BOOTSTRAP,
                         .cookie = rdv->p.job_id, .rank = rdv->p.rank,
                         .nsocks = 1, .payload_len = 4};
    char why[CG__RDV_TEXT_MAX] = "no attempt";
    uint8_t payload[4], cookie[8];
    cg_sockaddr_t addr;
    cg_status_t status;
    cg_hs_t hs;
    int fd;

    cg__rdv_put32(payload, (uint32_t)rdv->p.size);
    status = cg_sock_resolve(rdv->host, rdv->p.port, &addr);
    if (status != CG_OK) {
        snprintf(why, sizeof(why), "%s", cg_last_error());
        return cg_error_set(status, "rendezvous %s: %s", rdv->where, why);
    }
    for (;;) {
        status = cg_sock_connect_start(&addr, &fd);
        if (status == CG_OK) {
            cg_hs_init(&hs, CG_HS_CONNECTOR, fd, &local, payload, deadline);
            status = cg_hs_run(&hs);
            if (status == CG_OK)
                break;
            /* Closed before one byte of rank 0's header: a proxy with no
             * rank 0 behind it yet, or rank 0 making room (its slots
             * were full): as a reset, retried. */
            if (status == CG_ERR_HANDSHAKE && hs.hdr_got == 0 &&
                hs.state == CG_HS_ST_FAILED)
                status = CG_ERR_PEER_RESET;
            cg_sock_close(fd);
        }
        snprintf(why, sizeof(why), "%s", cg_last_error());
        if (status != CG_ERR_UNREACHABLE && status != CG_ERR_PEER_RESET &&
            status != CG_ERR_TIMEOUT)
            return cg_error_set(status,
                                "rank %d: the rendezvous %s refused us: %s "
                                "(another job on that port, or a different "
                                "CG_RUN_SECRET?)", rdv->p.rank, rdv->where,
                                why);
        if (cg_now_ns() >= deadline)
            return cg_error_set(CG_ERR_TIMEOUT,
                                "rank %d could not reach the rendezvous %s "
                                "within %.1f s (last attempt: %s): is rank 0 "
                                "running there?", rdv->p.rank, rdv->where,
                                (double)rdv->p.timeout_ns / 1e9, why);
        cg__rdv_pause(deadline);
    }
    rdv->fd = fd;
    cg_sock_tune(fd, rdv->p.timeout_ns);
    status = cg__rdv_recv(rdv, CG_RDV_OP_START, 0, 8, cookie, sizeof(cookie),
                          cg__rdv_follower_deadline(rdv));
    if (status != CG_OK)
        return status;
    rdv->cookie = cg__rdv_get64(cookie);
    return CG_OK;
}

static void cg__rdv_free(cg_rdv_t *rdv)
{
    size_t n = (size_t)rdv->p.size;

    if (rdv->fds != NULL) {
        for (int r = 1; r < rdv->p.size; r++) {
            if (rdv->fds[r] >= 0)
                cg_sock_close(rdv->fds[r]);
        }
    }
    if (rdv->fd >= 0)
        cg_sock_close(rdv->fd);
    cg_mem_free(&rdv->p.mem, CG_MEM_CAT_CONTROL, rdv->rx,
                n * sizeof(*rdv->rx));
    cg_mem_free(&rdv->p.mem, CG_MEM_CAT_CONTROL, rdv->fds,
                n * sizeof(*rdv->fds));
    cg_mem_free(&rdv->p.mem, CG_MEM_CAT_CONTROL, rdv, sizeof(*rdv));
}

cg_status_t cg_rdv_create(const cg_rdv_params_t *params, cg_rdv_t **rdv_p)
{
    uint64_t deadline;
    cg_status_t status;
    cg_rdv_t *rdv;
    size_t n;

    if (params->size < 2 || params->rank < 0 || params->rank >= params->size
        || params->host == NULL || params->mem.alloc == NULL)
        return cg_error_set(CG_ERR_INVALID_PARAM,
                            "cg_rdv_create: rank %d size %d: need size >= 2, "
                            "0 <= rank < size, a host and mem.alloc",
                            params->rank, params->size);
    if (strlen(params->host) >= sizeof(rdv->host))
        return cg_error_set(CG_ERR_INVALID_PARAM, "rendezvous host '%s' is "
                            "longer than %zu characters", params->host,
                            sizeof(rdv->host) - 1);
    deadline = cg_deadline_ns(params->timeout_ns);
    n = (size_t)params->size;
    rdv = cg_mem_alloc(&params->mem, CG_MEM_CAT_CONTROL, sizeof(*rdv));
    if (rdv == NULL)
        return CG_ERR_NO_MEMORY;
    memset(rdv, 0, sizeof(*rdv));
    rdv->p = *params;
    rdv->fd = -1;
    rdv->cookie = params->cookie;
    snprintf(rdv->host, sizeof(rdv->host), "%s", params->host);
    rdv->p.host = rdv->host;
    snprintf(rdv->where, sizeof(rdv->where), "%s%s%s:%d (%s)",
             strchr(rdv->host, ':') ? "[" : "", rdv->host,
             strchr(rdv->host, ':') ? "]" : "", params->port,
             params->addr_from ? params->addr_from : "rendezvous");
    if (params->rank == 0) {
        rdv->fds = cg_mem_alloc(&params->mem, CG_MEM_CAT_CONTROL,
                                n * sizeof(*rdv->fds));
        rdv->rx = cg_mem_alloc(&params->mem, CG_MEM_CAT_CONTROL,
                               n * sizeof(*rdv->rx));
        if (rdv->fds == NULL || rdv->rx == NULL) {
            status = CG_ERR_NO_MEMORY;
            goto err_free;
        }
        for (size_t r = 0; r < n; r++)
            rdv->fds[r] = -1;
        status = cg__rdv_serve(rdv, deadline);
    } else {
        status = cg__rdv_dial(rdv, deadline);
    }
    if (status != CG_OK)
        goto err_free;
    *rdv_p = rdv;
    return CG_OK;

err_free:
    cg__rdv_free(rdv);
    return status;
}

void cg_rdv_destroy(cg_rdv_t *rdv)
{
    if (rdv != NULL)
        cg__rdv_free(rdv);
}

uint64_t cg_rdv_cookie(const cg_rdv_t *rdv)
{
    return rdv->cookie;
}
