/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Socket utilities shared by the TCP transport, the UCX backend's control
 * socket and bootstrap: interface/address picking (NCCL_SOCKET_IFNAME
 * syntax), non-blocking listen/connect/accept, liveness tuning, partial and
 * deadline-bounded send/recv, and a fixed-size address encoding for handles.
 * Layer: transport; calls core/base only. No state: every call is reentrant.
 */
#ifndef CG_TRANSPORT_SOCK_H
#define CG_TRANSPORT_SOCK_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "collguard/status.h"
#include "core/base/clock.h"

typedef struct cg_sockaddr {
    union {
        struct sockaddr sa;
        struct sockaddr_in in;
        struct sockaddr_in6 in6;
        struct sockaddr_storage ss;
    } u;
    socklen_t len;
} cg_sockaddr_t;

/* Longest "[ffff:...:ffff%ifname]:65535" cg_sockaddr_str writes. */
#define CG_SOCKADDR_STRLEN 80
/* Size of the packed form: family(1) reserved(1) port(2, big-endian)
 * address(16; IPv4 in the first 4 bytes) scope id(4, little-endian). */
#define CG_SOCKADDR_PACKED_SIZE 24

/* NCCL_SOCKET_IFNAME semantics: a comma list of interface-name prefixes; a
 * leading '^' excludes the listed ones, a leading '=' demands exact names.
 * NULL or "" picks as NCCL does without NCCL_SOCKET_IFNAME
 * (cg_sock_auto_select). The first selected up interface, IPv4 before
 * IPv6: writes its address (port 0) and, when ifname_out is not NULL, its
 * name. CG_ERR_NOT_FOUND when nothing matches. */
cg_status_t cg_sock_pick_addr(const char *ifname_spec, cg_sockaddr_t *addr_p,
                              char *ifname_out, size_t ifname_len);
/* NCCL's automatic choice over n interface names (its ncclFindInterfaces
 * without NCCL_SOCKET_IFNAME): the ib* ones if any, else every one but
 * docker*, lo* and virbr*, else the docker* ones, else loopback (lo*, or
 * loopback[i] set; loopback may be NULL); virbr* never. A name may repeat
 * (one entry per address). Sets chosen[i]; returns how many are chosen.
 * A pure function. */
int cg_sock_auto_select(const char *const *names, const bool *loopback,
                        int n, bool *chosen);
/* Every up interface ifname_spec selects, by the rules of
 * cg_sock_pick_addr (an empty spec: cg_sock_auto_select),
 * each name once, in getifaddrs order: up to max names of len bytes into
 * names (names[i * len]); *n_p gets the count. CG_ERR_NOT_FOUND when none
 * matches. */
cg_status_t cg_sock_list_ifnames(const char *ifname_spec, char *names,
                                 size_t len, int max, int *n_p);
/* Numeric or DNS host name; port 0..65535. */
cg_status_t cg_sock_resolve(const char *host, int port, cg_sockaddr_t *addr_p);

/* Binds and listens (port 0: ephemeral); the socket is non-blocking,
 * close-on-exec and SO_REUSEADDR. *bound_p (may be NULL) gets the address
 * actually bound. */
cg_status_t cg_sock_listen(const cg_sockaddr_t *bind_addr, int backlog,
                           int *fd_p, cg_sockaddr_t *bound_p);
/* Starts a non-blocking connect; the socket is close-on-exec. */
cg_status_t cg_sock_connect_start(const cg_sockaddr_t *addr, int *fd_p);
/* CG_OK when connected, CG_INPROGRESS while pending, else the error
 * (refused/unreachable -> CG_ERR_UNREACHABLE, timed out -> CG_ERR_TIMEOUT). */
cg_status_t cg_sock_connect_check(int fd);
/* Accepts one pending connection, non-blocking and close-on-exec;
 * CG_INPROGRESS when none is waiting. peer_p may be NULL. */
cg_status_t cg_sock_accept(int listen_fd, int *fd_p, cg_sockaddr_t *peer_p);
/* TCP_NODELAY, keepalive and TCP_USER_TIMEOUT derived from timeout_ns so
 * that a dead or silent host is detected within about timeout_ns. Best
 * effort: failures are ignored (the request-level timeout still holds). */
void cg_sock_tune(int fd, uint64_t timeout_ns);
/* Sets socket buffer sizes (best effort; 0 leaves one unchanged). */
void cg_sock_set_bufsize(int fd, int sndbuf, int rcvbuf);
void cg_sock_close(int fd);

/* Non-blocking partial I/O: adds the bytes moved to *done_p. EAGAIN is
 * CG_OK with nothing added. A reset/broken pipe, or EOF on receive, is
 * CG_ERR_PEER_RESET; other errors CG_ERR_IO. cg_last_error() names fd and
 * cause. Never raises SIGPIPE. */
cg_status_t cg_sock_send_some(int fd, const void *buf, size_t len,
                              size_t *done_p);
cg_status_t cg_sock_recv_some(int fd, void *buf, size_t len, size_t *done_p);
/* Like recv_some, but an orderly EOF is CG_OK with *eof_p set to 1 (bytes
 * received before it are still added), for callers that drain several
 * sockets of one peer. */
cg_status_t cg_sock_recv_avail(int fd, void *buf, size_t len, size_t *done_p,
                               int *eof_p);
/* Vectored variant of send_some (at most IOV_MAX entries). */
struct iovec;
cg_status_t cg_sock_sendv_some(int fd, struct iovec *iov, int iovcnt,
                               size_t *done_p);

/* Blocking (via poll) until all len bytes moved or the CLOCK_MONOTONIC
 * deadline (cg_now_ns() based) passes -> CG_ERR_TIMEOUT. */
cg_status_t cg_sock_send_all(int fd, const void *buf, size_t len,
                             uint64_t deadline_ns);
cg_status_t cg_sock_recv_all(int fd, void *buf, size_t len,
                             uint64_t deadline_ns);

/* "127.0.0.1:4242" or "[::1]:4242" into buf; returns buf. */
const char *cg_sockaddr_str(const cg_sockaddr_t *a, char *buf, size_t len);
int cg_sockaddr_port(const cg_sockaddr_t *a);
void cg_sockaddr_set_port(cg_sockaddr_t *a, int port);
/* Fixed-size, byte-order-explicit encoding (for listen handles). unpack
 * rejects unknown families with CG_ERR_INVALID_PARAM. */
void cg_sockaddr_pack(const cg_sockaddr_t *a,
                      uint8_t out[CG_SOCKADDR_PACKED_SIZE]);
cg_status_t cg_sockaddr_unpack(const uint8_t in[CG_SOCKADDR_PACKED_SIZE],
                               cg_sockaddr_t *a_p);

/* now + delta, saturating (delta UINT64_MAX: no deadline). */
uint64_t cg_deadline_ns(uint64_t delta_ns);

#endif
