/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the files of np_harness (np_harness.c: the net plugin driven as
 * NCCL drives it) share: the handle size, a handle id's table slot, and
 * from the bottom up np_harness_util.c (the per-phase watchdog, the
 * bootstrap pipe, polling a request, a connect or an accept to its end),
 * np_harness_recv.c (the receiving process's scenario) and
 * np_harness_send.c (the sending process's); np_harness.c runs them.
 */
#ifndef CG_TESTS_PLUGIN_NCCL_NP_HARNESS_H
#define CG_TESTS_PLUGIN_NCCL_NP_HARNESS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "np_drv.h"

#define H NCCL_NET_HANDLE_MAXSIZE

/* The table slot in a handle id (np_impl.h's layout: bits 12..27), to
 * check that a registration reused a freed one's slot. */
#define ID_SLOT(id) (((uintptr_t)(id) >> 12) & 0xffffu)

/* np_harness_util.c: the watchdog (each phase PHASE_S seconds, or
 * NP_HARNESS_PHASE_S; one that overruns prints its name and exits 3). */
#define PHASE_S 60
extern volatile pid_t g_peer; /* the parent's child, killed with it */
void watchdog_arm(void);
/* A new phase: named for the watchdog, with PHASE_S seconds of its own. */
void phase(const char *name);
/* Writes (out) or reads n bytes of the bootstrap pipe fd; exits 2 when it
 * broke. */
/* Polls one request to completion. */
ncclResult_t wait_req(np_drv_t *d, void *req, int *sizes);
/* Connect on one side, accept on the other, each polled. */
void *do_accept(np_drv_t *d, void *l);
void *do_connect(np_drv_t *d, void *h);

/* np_harness_recv.c, np_harness_send.c: the two processes' halves of the
 * pair run, over the bootstrap pipe fd. */
void receiver(np_drv_t *d, int fd);
void sender(np_drv_t *d, int fd);

#endif
