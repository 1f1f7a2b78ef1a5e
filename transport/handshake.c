/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The connection handshake: explicit little-endian header encoding, the
 * checks a header must pass, and a non-blocking exchange driven by a table
 * of named states (one progress function per state, as UCX's tcp_ep).
 * Layer: transport; calls transport/sock and core/base only.
 */
#include "transport/handshake.h"

#include <poll.h>
#include <string.h>

#include "core/base/clock.h"
#include "core/base/error.h"
#include "transport/sock.h"

static void cg__put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static void cg__put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void cg__put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint16_t cg__get16(const uint8_t *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}

static uint32_t cg__get32(const uint8_t *p)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++)
        v |= (uint32_t)p[i] << (8 * i);
    return v;
}

static uint64_t cg__get64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

void cg_hs_encode(const cg_hs_hdr_t *hdr, uint8_t out[CG_HS_HDR_SIZE])
{
    cg__put32(out + 0, CG_HS_MAGIC);
    cg__put16(out + 4, hdr->version);
    cg__put16(out + 6, hdr->kind);
    cg__put64(out + 8, hdr->cookie);
    cg__put32(out + 16, (uint32_t)hdr->rank);
    cg__put16(out + 20, hdr->sock_index);
    cg__put16(out + 22, hdr->nsocks);
    cg__put32(out + 24, hdr->conn_id);
    cg__put32(out + 28, hdr->payload_len);
}

cg_status_t cg_hs_decode(const uint8_t *buf, size_t len, cg_hs_hdr_t *hdr_p)
{
    cg_hs_hdr_t h;
    uint32_t magic;

    if (len < CG_HS_HDR_SIZE)
        return cg_error_set(CG_ERR_HANDSHAKE,
                            "truncated header: %zu of %d bytes", len,
                            CG_HS_HDR_SIZE);
    magic = cg__get32(buf);
    if (magic != CG_HS_MAGIC)
        return cg_error_set(CG_ERR_HANDSHAKE,
                            "bad magic 0x%08x, expected 0x%08x (\"CGHS\"): "
                            "not a collguard peer", magic, CG_HS_MAGIC);
    h.version = cg__get16(buf + 4);
    h.kind = cg__get16(buf + 6);
    h.cookie = cg__get64(buf + 8);
    h.rank = (int32_t)cg__get32(buf + 16);
    h.sock_index = cg__get16(buf + 20);
    h.nsocks = cg__get16(buf + 22);
    h.conn_id = cg__get32(buf + 24);
    h.payload_len = cg__get32(buf + 28);
    if (h.version != CG_HS_VERSION)
        return cg_error_set(CG_ERR_HANDSHAKE,
                            "version %u, expected %u (mixed collguard "
                            "builds?)", h.version, CG_HS_VERSION);
    if (h.kind == 0 || h.kind > CG_HS_KIND_MAX)
        return cg_error_set(CG_ERR_HANDSHAKE, "unknown kind %u (1..%u)",
                            h.kind, CG_HS_KIND_MAX);
    if (h.nsocks == 0 || h.nsocks > CG_HS_NSOCKS_MAX)
        return cg_error_set(CG_ERR_HANDSHAKE, "nsocks %u out of range 1..%d",
                            h.nsocks, CG_HS_NSOCKS_MAX);
    if (h.sock_index >= h.nsocks)
        return cg_error_set(CG_ERR_HANDSHAKE,
                            "socket index %u not below nsocks %u",
                            h.sock_index, h.nsocks);
    if (h.payload_len > CG_HS_PAYLOAD_MAX)
        return cg_error_set(CG_ERR_HANDSHAKE,
                            "payload length %u exceeds %d", h.payload_len,
                            CG_HS_PAYLOAD_MAX);
    *hdr_p = h;
    return CG_OK;
}

cg_status_t cg_hs_check(const cg_hs_hdr_t *hdr, uint16_t kind,
                        uint64_t cookie)
{
    if (hdr->kind != kind)
        return cg_error_set(CG_ERR_HANDSHAKE, "kind %u, expected %u",
                            hdr->kind, kind);
    /* The job's cookie is its only secret: never in a log line. */
    if (hdr->cookie != cookie)
        return cg_error_set(CG_ERR_HANDSHAKE,
                            "cookie mismatch: the peer presented 0x%016llx, "
                            "not this job's cookie (a peer from another job, "
                            "or CG_RUN_SECRET differs)",
                            (unsigned long long)hdr->cookie);
    return CG_OK;
}

/* Each state function: CG_OK = moved to another state, CG_INPROGRESS =
 * waiting on the socket, else the failure. */
typedef cg_status_t (*cg__hs_fn)(cg_hs_t *hs);

static cg_status_t cg__hs_connecting(cg_hs_t *hs)
{
    cg_status_t status = cg_sock_connect_check(hs->fd);

    if (status == CG_OK)
        hs->state = CG_HS_ST_SEND;
    return status;
}

static cg_status_t cg__hs_send(cg_hs_t *hs)
{
    size_t total = CG_HS_HDR_SIZE + hs->local.payload_len;
    size_t before = hs->sent;
    cg_status_t status;

    if (hs->sent < CG_HS_HDR_SIZE)
        status = cg_sock_send_some(hs->fd, hs->local_wire + hs->sent,
                                   CG_HS_HDR_SIZE - hs->sent, &hs->sent);
    else
        status = cg_sock_send_some(
            hs->fd,
            (const uint8_t *)hs->local_payload + (hs->sent - CG_HS_HDR_SIZE),
            total - hs->sent, &hs->sent);
    if (status != CG_OK)
        return status;
    if (hs->sent == total) {
        hs->state = (hs->role == CG_HS_CONNECTOR) ? CG_HS_ST_RECV_HDR
                                                  : CG_HS_ST_DONE;
        return CG_OK;
    }
    return (hs->sent == before) ? CG_INPROGRESS : CG_OK;
}

/* Peer's header and payload are in: check them, then answer or finish. */
static cg_status_t cg__hs_peer_complete(cg_hs_t *hs)
{
    if (hs->role == CG_HS_CONNECTOR) {
        if (hs->peer.conn_id != hs->local.conn_id ||
            hs->peer.sock_index != hs->local.sock_index)
            return cg_error_set(CG_ERR_HANDSHAKE,
                                "answer for connection %u socket %u, "
                                "expected connection %u socket %u",
                                hs->peer.conn_id, hs->peer.sock_index,
                                hs->local.conn_id, hs->local.sock_index);
        hs->state = CG_HS_ST_DONE;
        return CG_OK;
    }
    if (hs->before_answer != NULL) {
        cg_status_t status = hs->before_answer(hs, hs->before_answer_arg);
        if (status != CG_OK)
            return status;
    }
    hs->local.conn_id = hs->peer.conn_id;
    hs->local.sock_index = hs->peer.sock_index;
    hs->local.nsocks = hs->peer.nsocks;
    cg_hs_encode(&hs->local, hs->local_wire);
    hs->state = CG_HS_ST_SEND;
    return CG_OK;
}

static cg_status_t cg__hs_recv_hdr(cg_hs_t *hs)
{
    size_t before = hs->hdr_got;
    cg_status_t status;

    status = cg_sock_recv_some(hs->fd, hs->peer_wire + hs->hdr_got,
                               CG_HS_HDR_SIZE - hs->hdr_got, &hs->hdr_got);
    if (status == CG_ERR_PEER_RESET)
        return cg_error_set(CG_ERR_HANDSHAKE,
                            "truncated header: peer closed after %zu of %d "
                            "bytes", hs->hdr_got, CG_HS_HDR_SIZE);
    if (status != CG_OK)
        return status;
    /* Refuse a wrong magic as soon as its 4 bytes are in. */
    if (hs->hdr_got >= 4 && before < 4 &&
        cg__get32(hs->peer_wire) != CG_HS_MAGIC)
        return cg_hs_decode(hs->peer_wire, CG_HS_HDR_SIZE, &hs->peer);
    if (hs->hdr_got < CG_HS_HDR_SIZE)
        return (hs->hdr_got == before) ? CG_INPROGRESS : CG_OK;
    status = cg_hs_decode(hs->peer_wire, CG_HS_HDR_SIZE, &hs->peer);
    if (status == CG_OK)
        status = cg_hs_check(&hs->peer, hs->local.kind, hs->local.cookie);
    if (status != CG_OK)
        return status;
    hs->state = CG_HS_ST_RECV_PAYLOAD;
    return CG_OK;
}

static cg_status_t cg__hs_recv_payload(cg_hs_t *hs)
{
    size_t before = hs->payload_got;
    cg_status_t status;

    if (hs->payload_got < hs->peer.payload_len) {
        status = cg_sock_recv_some(hs->fd, hs->peer_payload + hs->payload_got,
                                   hs->peer.payload_len - hs->payload_got,
                                   &hs->payload_got);
        if (status == CG_ERR_PEER_RESET)
            return cg_error_set(CG_ERR_HANDSHAKE,
                                "truncated payload: peer closed after %zu "
                                "of %u bytes", hs->payload_got,
                                hs->peer.payload_len);
        if (status != CG_OK)
            return status;
        if (hs->payload_got < hs->peer.payload_len)
            return (hs->payload_got == before) ? CG_INPROGRESS : CG_OK;
    }
    return cg__hs_peer_complete(hs);
}

static cg_status_t cg__hs_stay(cg_hs_t *hs)
{
    return (hs->state == CG_HS_ST_DONE) ? CG_OK : hs->status;
}

static const struct {
    const char *name;
    short events;
    cg__hs_fn progress;
} cg__hs_states[CG_HS_ST_COUNT] = {
    [CG_HS_ST_CONNECTING] = {"connecting", POLLOUT, cg__hs_connecting},
    [CG_HS_ST_SEND] = {"send", POLLOUT, cg__hs_send},
    [CG_HS_ST_RECV_HDR] = {"recv_hdr", POLLIN, cg__hs_recv_hdr},
    [CG_HS_ST_RECV_PAYLOAD] = {"recv_payload", POLLIN, cg__hs_recv_payload},
    [CG_HS_ST_DONE] = {"done", 0, cg__hs_stay},
    [CG_HS_ST_FAILED] = {"failed", 0, cg__hs_stay},
};

const char *cg_hs_state_name(cg_hs_state_t state)
{
    return (state < CG_HS_ST_COUNT) ? cg__hs_states[state].name : "?";
}

void cg_hs_init(cg_hs_t *hs, cg_hs_role_t role, int fd,
                const cg_hs_hdr_t *local, const void *local_payload,
                uint64_t deadline_ns)
{
    memset(hs, 0, sizeof(*hs));
    hs->fd = fd;
    hs->role = role;
    hs->local = *local;
    hs->local.version = CG_HS_VERSION;
    if (hs->local.nsocks == 0)
        hs->local.nsocks = 1;
    hs->local_payload = local_payload;
    hs->deadline_ns = deadline_ns;
    hs->status = CG_INPROGRESS;
    cg_hs_encode(&hs->local, hs->local_wire);
    hs->state = (role == CG_HS_CONNECTOR) ? CG_HS_ST_CONNECTING
                                          : CG_HS_ST_RECV_HDR;
}

cg_status_t cg_hs_progress(cg_hs_t *hs)
{
    cg_status_t status = CG_OK;

    if (hs->state == CG_HS_ST_FAILED)
        return hs->status;
    while (status == CG_OK && hs->state != CG_HS_ST_DONE &&
           hs->state != CG_HS_ST_FAILED)
        status = cg__hs_states[hs->state].progress(hs);
    if (hs->state == CG_HS_ST_DONE)
        return CG_OK;
    if (status == CG_INPROGRESS && cg_now_ns() >= hs->deadline_ns)
        status = cg_error_set(CG_ERR_TIMEOUT,
                              "handshake timed out in state %s (header %zu "
                              "of %d bytes in, %zu bytes out)",
                              cg_hs_state_name(hs->state), hs->hdr_got,
                              CG_HS_HDR_SIZE, hs->sent);
    if (status != CG_INPROGRESS && hs->state != CG_HS_ST_FAILED) {
        hs->state = CG_HS_ST_FAILED;
        hs->status = status;
    }
    return status;
}

short cg_hs_poll_events(const cg_hs_t *hs)
{
    return cg__hs_states[hs->state].events;
}

cg_status_t cg_hs_run(cg_hs_t *hs)
{
    cg_status_t status;

    while ((status = cg_hs_progress(hs)) == CG_INPROGRESS) {
        struct pollfd pfd = {.fd = hs->fd, .events = cg_hs_poll_events(hs)};
        uint64_t now = cg_now_ns();
        uint64_t left_ms = (hs->deadline_ns > now)
                               ? (hs->deadline_ns - now) / 1000000ull + 1 : 0;
        poll(&pfd, 1, left_ms > 1000 ? 1000 : (int)left_ms);
    }
    return status;
}

void cg_hs_limit_flush(cg_hs_limit_t *lim, const cg_log_t *log,
                       const char *where, bool force)
{
    uint64_t now = cg_now_ns();

    if (!force && now - lim->window_ns < CG_HS_LOG_WINDOW_NS)
        return;
    if (lim->held > 0)
        cg_warn(log, "%s: %u more connections refused in %.1f s, not "
                "logged one by one (%llu refused in all)", where, lim->held,
                (double)(now - lim->window_ns) / 1e9,
                (unsigned long long)lim->total);
    lim->window_ns = now;
    lim->logged = 0;
    lim->held = 0;
}

bool cg_hs_limit_take(cg_hs_limit_t *lim, const cg_log_t *log,
                      const char *where)
{
    cg_hs_limit_flush(lim, log, where, false);
    lim->total++;
    if (lim->logged < CG_HS_LOG_BURST) {
        lim->logged++;
        return true;
    }
    lim->held++;
    return false;
}
