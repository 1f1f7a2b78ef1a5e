/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the files of np_flood (np_flood.c: fault matrix row 7 on the net
 * plugin's listen comm) share: the sizes, the stranger's probes and its
 * report to the victim, and from the bottom up np_flood_util.c (the clock,
 * the control pipes), np_flood_stranger.c (the stranger: raw sockets
 * only) and np_flood_peer.c (the genuine peer); np_flood.c is the victim
 * and runs them.
 */
#ifndef CG_TESTS_PLUGIN_NCCL_NP_FLOOD_H
#define CG_TESTS_PLUGIN_NCCL_NP_FLOOD_H

#include <stddef.h>
#include <stdint.h>

#include "np_drv.h"

#define H NCCL_NET_HANDLE_MAXSIZE
#define FLOOD 1000
#define CONNECT_BOUND_MS 2000
#define MSG 4096
#define TPH 24 /* the transport's handle in the plugin's (np_impl.h) */

enum { P_GARBAGE, P_COOKIE, P_TRUNC, P_OVERSIZED, NPROBES };

/* Round 0 before the flood (their reasons fit in the log's burst), round
 * 1 once the flood is up (refused even while every slot is taken). */
typedef struct probe {
    int fd;
    int64_t sent;
    int64_t closed_ms;       /* after it was sent; -1: never, -2: no send */
    int answered;            /* bytes the listener sent back */
} probe_t;

typedef struct report {
    int opened;              /* flood connections established */
    probe_t pr[2][NPROBES];
} report_t;

/* np_flood_util.c */
int64_t now_ms(void);
/* Writes (out) or reads n bytes of a control pipe; exits 2 when it broke. */

/* np_flood_stranger.c: the stranger's process, on control pipe ctl (the
 * listen handle in, its report out); exits. */
void stranger(int ctl, int ucx, int timeout_ms);
/* np_flood_peer.c: the genuine peer's process, loading lib itself;
 * exits with its checks' verdict. */
void peer(int ctl, const char *lib);

#endif
