/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Per-connection UCX error mode. Peers on one host that offer shared memory
 * get endpoints without UCX error handling when all their lanes are shared
 * memory (UCX 1.13 uses zero-copy CMA only there; the control socket
 * watches the peer); all others keep peer error handling (a TCP lane
 * without it aborts the process when its peer dies). Here: host key and
 * flag for the handshake, the lane check, and the abandon notice that keeps
 * a receiver from reading a send its sender gave up on.
 * Layer: transport; calls UCX, the socket API and core/base only.
 */
#include "transport/ucx_impl.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* Room for ucp_context_print_info / ucp_ep_print_info output. */
#define CG_UCX_INFO_MAX 65536

/* Transports that move data through memory of this host only: a dead peer
 * never raises a transport error on them (UCX cannot tell), so endpoints
 * made only of these are safe without UCX error handling. */
static const char *const cg__ucx_shm_tls[] = {"sysv", "posix", "cma",
                                              "knem", "xpmem", "self"};

static int cg__ucx_is_shm_tl(const char *name, size_t len)
{
    size_t i;

    for (i = 0; i < sizeof(cg__ucx_shm_tls) / sizeof(cg__ucx_shm_tls[0]);
         i++) {
        if (strlen(cg__ucx_shm_tls[i]) == len &&
            memcmp(cg__ucx_shm_tls[i], name, len) == 0)
            return 1;
    }
    return 0;
}

/* The kernel's boot id (a UUID, new at each boot) as 16 bytes: processes
 * that share it run on one host. All zero when unreadable. */
static void cg__ucx_host_key(uint8_t key[CG_UCX_HOST_KEY_SIZE])
{
    char text[64];
    ssize_t n;
    size_t i, k = 0;
    int fd, hi = -1;

    memset(key, 0, CG_UCX_HOST_KEY_SIZE);
    fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    n = read(fd, text, sizeof(text) - 1);
    close(fd);
    if (n <= 0)
        return;
    for (i = 0; i < (size_t)n && k < CG_UCX_HOST_KEY_SIZE; i++) {
        char c = text[i];
        int v = (c >= '0' && c <= '9')   ? c - '0'
                : (c >= 'a' && c <= 'f') ? c - 'a' + 10
                : (c >= 'A' && c <= 'F') ? c - 'A' + 10 : -1;
        if (v < 0)
            continue;
        if (hi < 0) {
            hi = v;
        } else {
            key[k++] = (uint8_t)(hi << 4 | v);
            hi = -1;
        }
    }
    if (k < CG_UCX_HOST_KEY_SIZE)
        memset(key, 0, CG_UCX_HOST_KEY_SIZE);
}

/* Runs print(obj, f) into a buffer from params.mem; NULL if that fails.
 * The text is NUL-terminated (cut at CG_UCX_INFO_MAX - 1). */
static char *cg__ucx_info(cg__ucx_tp_t *tp, void (*print)(void *, FILE *),
                          void *obj)
{
    char *buf = cg_mem_alloc(&tp->super.params.mem, CG_MEM_CAT_CONTROL,
                             CG_UCX_INFO_MAX);
    FILE *f;

    if (buf == NULL)
        return NULL;
    memset(buf, 0, CG_UCX_INFO_MAX);
    f = fmemopen(buf, CG_UCX_INFO_MAX - 1, "w");
    if (f == NULL) {
        cg_mem_free(&tp->super.params.mem, CG_MEM_CAT_CONTROL, buf,
                    CG_UCX_INFO_MAX);
        return NULL;
    }
    print(obj, f);
    fclose(f);
    return buf;
}

static void cg__ucx_info_free(cg__ucx_tp_t *tp, char *buf)
{
    cg_mem_free(&tp->super.params.mem, CG_MEM_CAT_CONTROL, buf,
                CG_UCX_INFO_MAX);
}

static void cg__ucx_print_context(void *obj, FILE *f)
{
    ucp_context_print_info(obj, f);
}

static void cg__ucx_print_ep(void *obj, FILE *f)
{
    ucp_ep_print_info(obj, f);
}

/* Each "resource N : md M dev D flags -- tl/dev" line names a transport
 * this context can use; 1 when sysv or posix is among them. */
static int cg__ucx_context_has_shm(cg__ucx_tp_t *tp)
{
    char *info = cg__ucx_info(tp, cg__ucx_print_context, tp->context);
    int found;

    if (info == NULL)
        return 0;
    found = strstr(info, "-- sysv/") != NULL ||
            strstr(info, "-- posix/") != NULL;
    cg__ucx_info_free(tp, info);
    return found;
}

static int cg__ucx_key_known(const uint8_t *key)
{
    static const uint8_t zero[CG_UCX_HOST_KEY_SIZE];

    return memcmp(key, zero, CG_UCX_HOST_KEY_SIZE) != 0;
}

void cg__ucx_mode_init(cg__ucx_tp_t *tp)
{
    cg__ucx_host_key(tp->host_key);
    /* Only offered when asked for: both sides must offer it. */
    tp->shm = tp->super.params.ucx_shm_zcopy && cg__ucx_context_has_shm(tp);
    if (!cg__ucx_key_known(tp->host_key))
        cg_debug(tp->log, "ucx: cannot read /proc/sys/kernel/random/boot_id; "
                 "every endpoint keeps ucx peer error handling");
    cg_debug(tp->log, "ucx: zero-copy shared-memory endpoints %s",
             tp->shm ? "offered" : "not offered (CG_UCX_SHM_ZCOPY=0 or no "
             "shared-memory transport)");
}

static uint32_t cg__ucx_flags_word(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
           (uint32_t)p[3] << 24;
}

size_t cg__ucx_mode_pack(const cg__ucx_tp_t *tp, uint8_t *p)
{
    cg__ucx_put32(p, CG_UCX_HS_MARK | (tp->shm ? CG_UCX_HS_SHM : 0));
    memcpy(p + 4, tp->host_key, CG_UCX_HOST_KEY_SIZE);
    return 4 + CG_UCX_HOST_KEY_SIZE;
}

int cg__ucx_mode_valid(const uint8_t *peer)
{
    return (cg__ucx_flags_word(peer) & 0xffffff00u) == CG_UCX_HS_MARK;
}

int cg__ucx_mode_want_none(const cg__ucx_tp_t *tp, const uint8_t *peer)
{
    uint32_t flags = cg__ucx_flags_word(peer);

    if (!tp->shm || !(flags & CG_UCX_HS_SHM))
        return 0;
    if (!cg__ucx_key_known(tp->host_key))
        return 0;
    return memcmp(tp->host_key, peer + 4, CG_UCX_HOST_KEY_SIZE) == 0;
}

/* The smallest tag send UCX moves by rendezvous, from the "tag_send:"
 * line ("0..<egr/short>..93..<egr/bcopy>..8256..<rndv>..(inf)"): SIZE_MAX
 * when none is, 0 when the line cannot be read (check every receive). */
static size_t cg__ucx_rndv_min(const char *info)
{
    const char *line = strstr(info, "tag_send:");
    const char *end, *rndv, *p;

    if (line == NULL)
        return 0;
    end = strchr(line, '\n');
    rndv = strstr(line, "<rndv>");
    if (rndv == NULL || (end != NULL && rndv > end))
        return SIZE_MAX;
    p = rndv;
    while (p > line && p[-1] == '.')
        p--;
    while (p > line && p[-1] >= '0' && p[-1] <= '9')
        p--;
    return (*p >= '0' && *p <= '9') ? (size_t)strtoull(p, NULL, 10) : 0;
}

int cg__ucx_ep_shm_only(cg__ucx_tp_t *tp, ucp_ep_h ep, char *tl, size_t len,
                        size_t *rndv_min_p)
{
    char *info = cg__ucx_info(tp, cg__ucx_print_ep, ep);
    const char *p;
    int lanes = 0, ok = 1;

    *rndv_min_p = 0;
    if (info == NULL) {
        snprintf(tl, len, "(endpoint info unavailable)");
        return 0;
    }
    *rndv_min_p = cg__ucx_rndv_min(info);
    /* "lane[0]:  3:sysv/memory.0 md[2] -> ..." */
    for (p = strstr(info, "lane["); p != NULL && ok;
         p = strstr(p + 1, "lane[")) {
        const char *name = strchr(p, ':');
        size_t n;

        if (name == NULL)
            break;
        name++;
        while (*name == ' ' || (*name >= '0' && *name <= '9'))
            name++;
        if (*name == ':')
            name++;
        n = strcspn(name, "/ \n");
        lanes++;
        if (!cg__ucx_is_shm_tl(name, n)) {
            snprintf(tl, len, "%.*s", (int)n, name);
            ok = 0;
        }
    }
    if (ok && lanes == 0) {
        snprintf(tl, len, "(no lanes listed)");
        ok = 0;
    }
    cg__ucx_info_free(tp, info);
    return ok;
}

/* Without UCX error handling the receiver of a rendezvous message reads
 * it straight from the sender's memory (CMA), possibly long after the
 * sender gave up on that send (timeout, close) and its user reused the
 * buffer. So a sender that disowns sends still in flight writes one byte
 * on the control socket first, and each rendezvous receive looks for it
 * once its data has arrived. */
void cg__ucx_mode_abandon(cg__ucx_conn_t *conn)
{
    static const char notice = 'A';
    cg_list_t *l;

    if (!conn->err_none || conn->fd < 0)
        return;
    for (l = conn->reqs.next; l != &conn->reqs; l = l->next) {
        cg__ucx_req_t *req = cg_list_entry(l, cg__ucx_req_t, link);
        if (!(req->flags & CG_UCX_REQ_RECV) && req->ucp != NULL)
            break;
    }
    if (l == &conn->reqs)
        return; /* no send in flight: nothing to disown */
    /* The peer's socket holds the byte when send() returns (a socket on
     * this host), before the user can reuse a buffer. A dead peer: EPIPE. */
    if (send(conn->fd, &notice, 1, MSG_NOSIGNAL | MSG_DONTWAIT) != 1)
        cg_debug(((cg__ucx_tp_t *)conn->super.tp)->log, "ucx: abandon notice "
                 "to rank %d not sent: %m", conn->super.peer_rank);
}

int cg__ucx_mode_abandoned(const cg__ucx_conn_t *conn, size_t length)
{
    char byte;

    if (!conn->err_none || length < conn->rndv_min || conn->fd < 0)
        return 0;
    return recv(conn->fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT) == 1;
}
