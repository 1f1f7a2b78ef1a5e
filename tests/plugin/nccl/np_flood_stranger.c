/* SPDX-License-Identifier: Apache-2.0 */
/*
 * np_flood's stranger (np_flood.c), a process of raw sockets only: four
 * probes on connections of their own before the flood (garbage, a wrong
 * cookie, a truncated header, an oversized payload length), FLOOD idle
 * connections to the listen address, the probes again while the flood is
 * up, each timed until the listener closes it; its report goes to the
 * victim, and the flood is held until the victim says.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness_check.h"
#include "np_flood.h"

/* ---- the stranger ---- */

static void put_hdr(uint8_t *b, uint16_t kind, uint64_t cookie,
                    uint32_t payload_len)
{
    memset(b, 0, 32);
    memcpy(b, "CGHS", 4);
    b[4] = 1;                          /* version */
    b[6] = (uint8_t)kind;
    for (int i = 0; i < 8; i++)
        b[8 + i] = (uint8_t)(cookie >> (8 * i));
    b[22] = 1;                         /* nsocks */
    b[24] = 7;                         /* conn_id */
    for (int i = 0; i < 4; i++)
        b[28 + i] = (uint8_t)(payload_len >> (8 * i));
}

static int dial(const struct sockaddr_in *sa, int nonblock)
{
    int fd = socket(AF_INET, SOCK_STREAM | (nonblock ? SOCK_NONBLOCK : 0), 0);
    if (fd < 0)
        return -1;
    if (connect(fd, (const struct sockaddr *)sa, sizeof(*sa)) != 0 &&
        errno != EINPROGRESS) {
        close(fd);
        return -1;
    }
    return fd;
}

static void probe_send(const struct sockaddr_in *sa, uint16_t kind, int i,
                       probe_t *pr)
{
    uint8_t data[512];
    size_t len;

    pr->fd = dial(sa, 0);
    switch (i) {
    case P_GARBAGE:
        for (size_t k = 0; k < sizeof(data); k++)
            data[k] = (uint8_t)(k * 131 + 7);
        len = sizeof(data);
        break;
    case P_COOKIE:
        put_hdr(data, kind, 0x1234567890abcdefull, 0);
        len = 32;
        break;
    case P_TRUNC:
        put_hdr(data, kind, 0, 0);
        len = 13;
        break;
    default:
        put_hdr(data, kind, 0, 0xfffffff0u);
        len = 32;
    }
    pr->sent = now_ms();
    pr->closed_ms = -1;
    if (pr->fd < 0 ||
        send(pr->fd, data, len, MSG_NOSIGNAL) != (ssize_t)len)
        pr->closed_ms = -2;
}

/* Waits until the listener closes the probe's socket (EOF or reset). */
static void probe_wait(probe_t *pr, int limit_ms)
{
    char buf[256];

    while (pr->closed_ms == -1 && now_ms() - pr->sent < limit_ms) {
        struct pollfd p = {pr->fd, POLLIN, 0};
        if (poll(&p, 1, 50) <= 0)
            continue;
        ssize_t k = recv(pr->fd, buf, sizeof(buf), MSG_DONTWAIT);
        if (k > 0)
            pr->answered += (int)k;
        else if (k == 0 || (errno != EAGAIN && errno != EINTR))
            pr->closed_ms = now_ms() - pr->sent;
    }
}

void stranger(int ctl, int ucx, int timeout_ms)
{
    static int held[FLOOD];
    static struct pollfd p[FLOOD];
    unsigned char h[H];
    const uint8_t *pk = h + TPH + 4; /* packed: family, 0, port, address */
    struct sockaddr_in sa;
    report_t r;
    uint16_t kind = ucx ? 2 : 1;   /* the listener's own handshake kind */
    char c;

    g_who = "stranger";
    memset(&r, 0, sizeof(r));
    xfer(ctl, h, H, 0);
    if (pk[0] != 4) {
        fprintf(stderr, "[stranger] not an IPv4 listen address\n");
        exit(2);
    }
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)(pk[2] << 8 | pk[3]));
    memcpy(&sa.sin_addr, pk + 4, 4);

    for (int i = 0; i < NPROBES; i++)
        probe_send(&sa, kind, i, &r.pr[0][i]);
    for (int i = 0; i < NPROBES; i++)
        if (i != P_TRUNC)
            probe_wait(&r.pr[0][i], 2000);
    for (int i = 0; i < FLOOD; i++)
        held[i] = dial(&sa, 1);
    /* Established within 1.5 s (the rest retry their SYN in the kernel). */
    for (int64_t t0 = now_ms(); now_ms() - t0 < 1500;) {
        int n = 0;
        for (int i = 0; i < FLOOD; i++)
            p[i] = (struct pollfd){held[i], POLLOUT, 0};
        if (poll(p, FLOOD, 100) < 0)
            break;
        for (int i = 0; i < FLOOD; i++)
            n += (p[i].revents & POLLOUT) != 0;
        r.opened = n;
        if (n == FLOOD)
            break;
    }
    for (int i = 0; i < NPROBES; i++)
        probe_send(&sa, kind, i, &r.pr[1][i]);
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < NPROBES; i++)
            if (i != P_TRUNC)
                probe_wait(&r.pr[k][i], 2000);
    xfer(ctl, &r, sizeof(r), 1); /* the genuine peer connects now */
    for (int k = 0; k < 2; k++)
        probe_wait(&r.pr[k][P_TRUNC], timeout_ms + 2000);
    xfer(ctl, &r, sizeof(r), 1);
    xfer(ctl, &c, 1, 0);          /* hold the flood until told */
    for (int i = 0; i < FLOOD; i++)
        if (held[i] >= 0)
            close(held[i]);
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < NPROBES; i++)
            if (r.pr[k][i].fd >= 0)
                close(r.pr[k][i].fd);
    xfer(ctl, &c, 1, 1);
    exit(0);
}
