/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Helpers for transport tests: a counting cg_mem_ops_t that checks every
 * free against its allocation and reports live bytes per category, scaled
 * timeouts, a transport factory, blocking accept/connect loops, data
 * patterns and fork()ed peers that report through their exit status.
 */
#ifndef CG_TP_TEST_UTIL_H
#define CG_TP_TEST_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "transport/transport.h"

typedef struct tp_mem {
    size_t live[CG_MEM_CAT_COUNT];
    size_t peak[CG_MEM_CAT_COUNT];
    size_t allocs, frees;
    size_t bad_frees; /* free of NULL-size mismatch or over-free */
} tp_mem_t;

cg_mem_ops_t tp_mem_ops(tp_mem_t *m);
/* Total live bytes in every category. */
size_t tp_mem_live(const tp_mem_t *m);

/* base_ms * CG_TEST_TIMEOUT_MULTIPLIER (default 1). */
uint64_t tp_scaled_ns(uint64_t base_ms);

/* A socket transport on loopback ("lo"). timeout_ms 0: 5000. */
cg_transport_t *tp_make(tp_mem_t *m, int nsocks, uint64_t timeout_ms,
                        uint64_t cookie, int rank);
cg_transport_t *tp_make_log(tp_mem_t *m, int nsocks, uint64_t timeout_ms,
                            uint64_t cookie, int rank, const cg_log_t *log);

/* A log whose warnings are collected into text. */
typedef struct tp_logcap {
    cg_log_t log;
    int lines;
    char text[16384];
} tp_logcap_t;
void tp_logcap_init(tp_logcap_t *c);
/* Blocks (progressing) until a conn is accepted or the deadline. */
cg_status_t tp_accept(cg_transport_t *tp, cg_tp_listener_t *l,
                      cg_tp_conn_t **conn_p, uint64_t timeout_ms);
/* Connects and waits until ready. */
cg_status_t tp_connect(cg_transport_t *tp, const cg_tp_handle_t *h,
                       cg_tp_conn_t **conn_p, uint64_t timeout_ms);

/* Byte i of message seed: a pattern that catches shifts and mix-ups. */
void tp_fill(void *buf, size_t len, uint32_t seed);
/* Index of the first wrong byte, or (size_t)-1 when all are right. */
size_t tp_check(const void *buf, size_t len, uint32_t seed);

/* Forks; the child runs fn(arg) and _exit()s with its return value. */
pid_t tp_fork(int (*fn)(void *arg), void *arg);
/* Exit status of pid (or 128+signal), waiting at most timeout_ms; kills
 * it and returns -1 when it overstays. */
int tp_reap(pid_t pid, uint64_t timeout_ms);

/* A parent with a listener and a fork()ed child connected to it. The
 * child gets a copy of the pair (handle, nsocks, arg) and opens its own
 * transport with tp_peer_open. */
typedef struct tp_pair {
    tp_mem_t mem;
    cg_transport_t *tp;
    cg_tp_listener_t *l;
    cg_tp_handle_t h;
    cg_tp_conn_t *conn;
    pid_t child;
    int nsocks;
    uint64_t timeout_ms;
    void *arg;
} tp_pair_t;

#define TP_COOKIE 0xc011c0ffee123456ull

/* CG_OK with p->conn accepted; child(p) runs in the child. */
cg_status_t tp_pair_start(tp_pair_t *p, int nsocks, uint64_t timeout_ms,
                          int (*child)(void *arg), void *arg);
/* Same, with the parent's transport logging into log. */
cg_status_t tp_pair_start_log(tp_pair_t *p, int nsocks, uint64_t timeout_ms,
                              int (*child)(void *arg), void *arg,
                              const cg_log_t *log);
/* Closes conn, listener and transport; returns the child's exit status
 * (-1 when it had to be killed). p->mem then shows what leaked. */
int tp_pair_finish(tp_pair_t *p);

typedef struct tp_peer {
    tp_mem_t mem;
    cg_transport_t *tp;
    cg_tp_conn_t *conn;
} tp_peer_t;

/* In the child: own transport, connected to the pair's listener. */
int tp_peer_open(tp_peer_t *c, const tp_pair_t *p);
/* Closes and destroys; nonzero when something leaked. */
int tp_peer_close(tp_peer_t *c);

/* Waits on req and checks the status and size; 0 when as expected. */
int tp_wait_expect(cg_tp_req_t *req, cg_status_t want, size_t want_size);

/* In a child: print to stderr and return 1 from the enclosing fn. */
#define TP_CHECK(cond, ...)                                                  \
    do {                                                                     \
        if (!(cond)) {                                                       \
            fprintf(stderr, "child %s:%d: ", __FILE__, __LINE__);            \
            fprintf(stderr, __VA_ARGS__);                                    \
            fprintf(stderr, "\n");                                           \
            return 1;                                                        \
        }                                                                    \
    } while (0)

#endif
