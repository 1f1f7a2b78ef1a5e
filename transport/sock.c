/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Socket utilities: non-blocking listen/connect/accept, liveness tuning,
 * partial and deadline-bounded I/O, address strings and packing. Interface
 * picking lives in sock_ifaddr.c. Layer: transport; calls core/base only.
 */
#include "transport/sock.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "core/base/error.h"

uint64_t cg_deadline_ns(uint64_t delta_ns)
{
    uint64_t now = cg_now_ns();
    return (delta_ns > UINT64_MAX - now) ? UINT64_MAX : now + delta_ns;
}

const char *cg_sockaddr_str(const cg_sockaddr_t *a, char *buf, size_t len)
{
    char host[INET6_ADDRSTRLEN] = "?";

    if (len == 0)
        return buf;
    if (a->u.sa.sa_family == AF_INET) {
        inet_ntop(AF_INET, &a->u.in.sin_addr, host, sizeof(host));
        snprintf(buf, len, "%s:%d", host, ntohs(a->u.in.sin_port));
    } else if (a->u.sa.sa_family == AF_INET6) {
        inet_ntop(AF_INET6, &a->u.in6.sin6_addr, host, sizeof(host));
        snprintf(buf, len, "[%s]:%d", host, ntohs(a->u.in6.sin6_port));
    } else {
        snprintf(buf, len, "<family %d>", a->u.sa.sa_family);
    }
    return buf;
}

int cg_sockaddr_port(const cg_sockaddr_t *a)
{
    if (a->u.sa.sa_family == AF_INET6)
        return ntohs(a->u.in6.sin6_port);
    return ntohs(a->u.in.sin_port);
}

void cg_sockaddr_set_port(cg_sockaddr_t *a, int port)
{
    if (a->u.sa.sa_family == AF_INET6)
        a->u.in6.sin6_port = htons((uint16_t)port);
    else
        a->u.in.sin_port = htons((uint16_t)port);
}

void cg_sockaddr_pack(const cg_sockaddr_t *a,
                      uint8_t out[CG_SOCKADDR_PACKED_SIZE])
{
    uint16_t port = (uint16_t)cg_sockaddr_port(a);
    uint32_t scope = 0;

    memset(out, 0, CG_SOCKADDR_PACKED_SIZE);
    out[0] = (a->u.sa.sa_family == AF_INET6) ? 6 : 4;
    out[2] = (uint8_t)(port >> 8);
    out[3] = (uint8_t)port;
    if (a->u.sa.sa_family == AF_INET6) {
        memcpy(out + 4, &a->u.in6.sin6_addr, 16);
        scope = a->u.in6.sin6_scope_id;
    } else {
        memcpy(out + 4, &a->u.in.sin_addr, 4);
    }
    for (int i = 0; i < 4; i++)
        out[20 + i] = (uint8_t)(scope >> (8 * i));
}

cg_status_t cg_sockaddr_unpack(const uint8_t in[CG_SOCKADDR_PACKED_SIZE],
                               cg_sockaddr_t *a_p)
{
    cg_sockaddr_t a;
    uint16_t port = (uint16_t)((in[2] << 8) | in[3]);

    memset(&a, 0, sizeof(a));
    if (in[0] == 4) {
        a.u.in.sin_family = AF_INET;
        a.u.in.sin_port = htons(port);
        memcpy(&a.u.in.sin_addr, in + 4, 4);
        a.len = sizeof(a.u.in);
    } else if (in[0] == 6) {
        a.u.in6.sin6_family = AF_INET6;
        a.u.in6.sin6_port = htons(port);
        memcpy(&a.u.in6.sin6_addr, in + 4, 16);
        for (int i = 0; i < 4; i++)
            a.u.in6.sin6_scope_id |= (uint32_t)in[20 + i] << (8 * i);
        a.len = sizeof(a.u.in6);
    } else {
        return cg_error_set(CG_ERR_INVALID_PARAM,
                            "packed address has family byte %u, expected 4 "
                            "or 6", in[0]);
    }
    *a_p = a;
    return CG_OK;
}

cg_status_t cg_sock_resolve(const char *host, int port, cg_sockaddr_t *addr_p)
{
    struct addrinfo hints, *res = NULL;
    cg_sockaddr_t a;
    int rc;

    if (host == NULL || port < 0 || port > 65535)
        return cg_error_set(CG_ERR_INVALID_PARAM,
                            "cannot resolve host %s port %d (port must be "
                            "0..65535)", host ? host : "(null)", port);
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    rc = getaddrinfo(host, NULL, &hints, &res);
    if (rc != 0)
        return cg_error_set(CG_ERR_NOT_FOUND, "cannot resolve host '%s': %s",
                            host, gai_strerror(rc));
    memset(&a, 0, sizeof(a));
    memcpy(&a.u.ss, res->ai_addr, res->ai_addrlen);
    a.len = res->ai_addrlen;
    freeaddrinfo(res);
    cg_sockaddr_set_port(&a, port);
    *addr_p = a;
    return CG_OK;
}

static socklen_t cg__sockaddr_len(const cg_sockaddr_t *a)
{
    if (a->len != 0)
        return a->len;
    return (a->u.sa.sa_family == AF_INET6) ? sizeof(struct sockaddr_in6)
                                           : sizeof(struct sockaddr_in);
}

cg_status_t cg_sock_listen(const cg_sockaddr_t *bind_addr, int backlog,
                           int *fd_p, cg_sockaddr_t *bound_p)
{
    char str[CG_SOCKADDR_STRLEN];
    cg_sockaddr_t bound;
    cg_status_t status;
    int one = 1;
    int fd;

    fd = socket(bind_addr->u.sa.sa_family,
                SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return cg_error_set(CG_ERR_IO, "socket(family %d) failed: %m",
                            bind_addr->u.sa.sa_family);
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, &bind_addr->u.sa, cg__sockaddr_len(bind_addr)) < 0) {
        status = cg_error_set(CG_ERR_IO, "bind to %s failed: %m",
                              cg_sockaddr_str(bind_addr, str, sizeof(str)));
        goto err_close;
    }
    if (listen(fd, backlog) < 0) {
        status = cg_error_set(CG_ERR_IO, "listen(backlog %d) on %s failed: %m",
                              backlog,
                              cg_sockaddr_str(bind_addr, str, sizeof(str)));
        goto err_close;
    }
    memset(&bound, 0, sizeof(bound));
    bound.len = sizeof(bound.u.ss);
    if (getsockname(fd, &bound.u.sa, &bound.len) < 0) {
        status = cg_error_set(CG_ERR_IO, "getsockname on fd %d failed: %m",
                              fd);
        goto err_close;
    }
    if (bound_p != NULL)
        *bound_p = bound;
    *fd_p = fd;
    return CG_OK;

err_close:
    close(fd);
    return status;
}

cg_status_t cg_sock_connect_start(const cg_sockaddr_t *addr, int *fd_p)
{
    char str[CG_SOCKADDR_STRLEN];
    cg_status_t status;
    int fd;

    fd = socket(addr->u.sa.sa_family,
                SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return cg_error_set(CG_ERR_IO, "socket(family %d) failed: %m",
                            addr->u.sa.sa_family);
    if (connect(fd, &addr->u.sa, cg__sockaddr_len(addr)) < 0 &&
        errno != EINPROGRESS) {
        status = (errno == ECONNREFUSED || errno == ENETUNREACH ||
                  errno == EHOSTUNREACH) ? CG_ERR_UNREACHABLE : CG_ERR_IO;
        status = cg_error_set(status, "connect to %s failed: %m",
                              cg_sockaddr_str(addr, str, sizeof(str)));
        close(fd);
        return status;
    }
    *fd_p = fd;
    return CG_OK;
}

cg_status_t cg_sock_connect_check(int fd)
{
    struct pollfd pfd = {.fd = fd, .events = POLLOUT};
    socklen_t len = sizeof(int);
    int err = 0;

    if (poll(&pfd, 1, 0) < 0)
        return cg_error_set(CG_ERR_IO, "poll on fd %d failed: %m", fd);
    if (pfd.revents == 0)
        return CG_INPROGRESS;
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
        return cg_error_set(CG_ERR_IO, "getsockopt(SO_ERROR) on fd %d: %m",
                            fd);
    if (err == 0)
        return CG_OK;
    if (err == EINPROGRESS || err == EALREADY)
        return CG_INPROGRESS;
    errno = err;
    if (err == ETIMEDOUT)
        return cg_error_set(CG_ERR_TIMEOUT, "connect on fd %d: %m", fd);
    if (err == ECONNREFUSED || err == ENETUNREACH || err == EHOSTUNREACH)
        return cg_error_set(CG_ERR_UNREACHABLE, "connect on fd %d: %m", fd);
    /* A proxy or load balancer in between accepts, then closes or resets
     * (EPIPE, ECONNRESET) when the server behind it is not listening yet:
     * the peer's failure, which a dialer may retry, not a local I/O error. */
    if (err == ECONNRESET || err == ECONNABORTED || err == EPIPE)
        return cg_error_set(CG_ERR_PEER_RESET, "connect on fd %d: %m", fd);
    return cg_error_set(CG_ERR_IO, "connect on fd %d: %m", fd);
}

cg_status_t cg_sock_accept(int listen_fd, int *fd_p, cg_sockaddr_t *peer_p)
{
    cg_sockaddr_t peer;
    int fd;

    memset(&peer, 0, sizeof(peer));
    peer.len = sizeof(peer.u.ss);
    fd = accept4(listen_fd, &peer.u.sa, &peer.len,
                 SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ||
            errno == ECONNABORTED)
            return CG_INPROGRESS;
        if (errno == EMFILE || errno == ENFILE)
            return cg_error_set(CG_ERR_IO, "accept on fd %d failed: %m "
                                "(raise the open-file limit, ulimit -n)",
                                listen_fd);
        return cg_error_set(CG_ERR_IO, "accept on fd %d failed: %m",
                            listen_fd);
    }
    if (peer_p != NULL)
        *peer_p = peer;
    *fd_p = fd;
    return CG_OK;
}

void cg_sock_tune(int fd, uint64_t timeout_ns)
{
    uint64_t secs = timeout_ns / 1000000000ull;
    uint64_t ms = timeout_ns / 1000000ull;
    int one = 1, idle, intvl, cnt = 3;
    unsigned int user_to;

    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (timeout_ns == 0 || timeout_ns == UINT64_MAX)
        return;
    /* idle + cnt * intvl ~= timeout: a dead host is noticed in time. */
    idle = (int)(secs / 2 > 0 ? (secs / 2 < 7200 ? secs / 2 : 7200) : 1);
    intvl = (int)(secs / 6 > 0 ? (secs / 6 < 600 ? secs / 6 : 600) : 1);
    user_to = (unsigned int)(ms > 0 ? (ms < UINT_MAX ? ms : UINT_MAX) : 1);
    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
    setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_to, sizeof(user_to));
}

void cg_sock_set_bufsize(int fd, int sndbuf, int rcvbuf)
{
    if (sndbuf > 0)
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
    if (rcvbuf > 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
}

void cg_sock_close(int fd)
{
    if (fd >= 0)
        close(fd);
}

static cg_status_t cg__sock_io_error(int fd, const char *op)
{
    if (errno == EPIPE || errno == ECONNRESET || errno == ENOTCONN)
        return cg_error_set(CG_ERR_PEER_RESET, "%s on fd %d: %m", op, fd);
    if (errno == ETIMEDOUT)
        return cg_error_set(CG_ERR_TIMEOUT,
                            "%s on fd %d: %m (peer unresponsive past the "
                            "TCP user timeout)", op, fd);
    return cg_error_set(CG_ERR_IO, "%s on fd %d failed: %m", op, fd);
}

cg_status_t cg_sock_send_some(int fd, const void *buf, size_t len,
                              size_t *done_p)
{
    ssize_t n;

    if (len == 0)
        return CG_OK;
    do {
        n = send(fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);
    } while (n < 0 && errno == EINTR);
    if (n >= 0) {
        *done_p += (size_t)n;
        return CG_OK;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK)
        return CG_OK;
    return cg__sock_io_error(fd, "send");
}

cg_status_t cg_sock_sendv_some(int fd, struct iovec *iov, int iovcnt,
                               size_t *done_p)
{
    struct msghdr msg;
    ssize_t n;

    memset(&msg, 0, sizeof(msg));
    msg.msg_iov = iov;
    msg.msg_iovlen = (size_t)iovcnt;
    do {
        n = sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    } while (n < 0 && errno == EINTR);
    if (n >= 0) {
        *done_p += (size_t)n;
        return CG_OK;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK)
        return CG_OK;
    return cg__sock_io_error(fd, "sendmsg");
}

cg_status_t cg_sock_recv_avail(int fd, void *buf, size_t len, size_t *done_p,
                               int *eof_p)
{
    ssize_t n;

    *eof_p = 0;
    if (len == 0)
        return CG_OK;
    do {
        n = recv(fd, buf, len, MSG_DONTWAIT);
    } while (n < 0 && errno == EINTR);
    if (n > 0) {
        *done_p += (size_t)n;
        return CG_OK;
    }
    if (n == 0) {
        *eof_p = 1;
        return CG_OK;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK)
        return CG_OK;
    return cg__sock_io_error(fd, "recv");
}

cg_status_t cg_sock_recv_some(int fd, void *buf, size_t len, size_t *done_p)
{
    int eof;
    cg_status_t status = cg_sock_recv_avail(fd, buf, len, done_p, &eof);

    if (status == CG_OK && eof)
        return cg_error_set(CG_ERR_PEER_RESET,
                            "recv on fd %d: connection closed by peer", fd);
    return status;
}

/* Waits for events on fd until the deadline. */
static cg_status_t cg__sock_wait(int fd, short events, uint64_t deadline_ns,
                                 size_t done, size_t len)
{
    struct pollfd pfd = {.fd = fd, .events = events};
    uint64_t now = cg_now_ns();
    int ms;

    if (now >= deadline_ns)
        return cg_error_set(CG_ERR_TIMEOUT,
                            "%s on fd %d timed out after %zu of %zu bytes",
                            (events & POLLOUT) ? "send" : "recv", fd, done,
                            len);
    ms = (deadline_ns - now) / 1000000ull > 1000
             ? 1000 : (int)((deadline_ns - now + 999999) / 1000000ull);
    if (poll(&pfd, 1, ms) < 0 && errno != EINTR)
        return cg_error_set(CG_ERR_IO, "poll on fd %d failed: %m", fd);
    return CG_OK;
}

cg_status_t cg_sock_send_all(int fd, const void *buf, size_t len,
                             uint64_t deadline_ns)
{
    size_t done = 0;
    cg_status_t status;

    while (done < len) {
        size_t before = done;
        status = cg_sock_send_some(fd, (const char *)buf + done, len - done,
                                   &done);
        if (status != CG_OK)
            return status;
        if (done == before) {
            status = cg__sock_wait(fd, POLLOUT, deadline_ns, done, len);
            if (status != CG_OK)
                return status;
        }
    }
    return CG_OK;
}

cg_status_t cg_sock_recv_all(int fd, void *buf, size_t len,
                             uint64_t deadline_ns)
{
    size_t done = 0;
    cg_status_t status;

    while (done < len) {
        size_t before = done;
        status = cg_sock_recv_some(fd, (char *)buf + done, len - done, &done);
        if (status != CG_OK)
            return status;
        if (done == before) {
            status = cg__sock_wait(fd, POLLIN, deadline_ns, done, len);
            if (status != CG_OK)
                return status;
        }
    }
    return CG_OK;
}
