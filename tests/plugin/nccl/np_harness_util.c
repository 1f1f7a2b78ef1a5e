/* SPDX-License-Identifier: Apache-2.0 */
/*
 * np_harness's plumbing (np_harness.c): the per-phase watchdog (SIGALRM
 * when this process overruns its phase, SIGTERM when its parent did) and
 * polling a request, a connect or an accept to its end. The bootstrap
 * pipe the handles cross goes through xfer (harness_check.c).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness_check.h"
#include "np_harness.h"

/* ---- the watchdog ---- */

static const char *volatile g_phase = "start";
volatile pid_t g_peer;
static unsigned g_phase_s = PHASE_S;

static void say(const char *s)
{
    ssize_t k = write(2, s, strlen(s));
    (void)k;
}

/* SIGALRM: this process overran its phase; SIGTERM: its parent did. */
static void watchdog(int sig)
{
    say("[");
    say(g_who);
    say(sig == SIGALRM ? "] watchdog: stuck in phase '"
                       : "] watchdog: the other process is stuck; this one "
                         "was in phase '");
    say(g_phase);
    say("'\n");
    if (g_peer > 0)
        kill(g_peer, SIGTERM);
    _exit(3);
}

void watchdog_arm(void)
{
    const char *e = getenv("NP_HARNESS_PHASE_S");
    if (e != NULL && atoi(e) > 0)
        g_phase_s = (unsigned)atoi(e);
    signal(SIGALRM, watchdog);
    signal(SIGTERM, watchdog);
}

void phase(const char *name)
{
    g_phase = name;
    alarm(g_phase_s);
}

ncclResult_t wait_req(np_drv_t *d, void *req, int *sizes)
{
    int done = 0;
    ncclResult_t r;
    for (long i = 0; i < 200000000L; i++) {
        r = np_test(d, req, &done, sizes);
        if (r != ncclSuccess || done)
            return r;
    }
    return ncclInternalError;
}

void *do_accept(np_drv_t *d, void *l)
{
    void *rc = NULL;
    for (long i = 0; i < 100000000L && rc == NULL; i++)
        if (np_accept(d, l, &rc) != ncclSuccess)
            return NULL;
    return rc;
}

void *do_connect(np_drv_t *d, void *h)
{
    void *sc = NULL;
    for (long i = 0; i < 100000000L && sc == NULL; i++)
        if (np_connect(d, 0, h, &sc) != ncclSuccess)
            return NULL;
    return sc;
}
