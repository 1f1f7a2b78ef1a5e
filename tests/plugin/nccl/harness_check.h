/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The NCCL plugin harnesses' soft checks (np_harness*.c, np_flood*.c,
 * np_regbudget.c, tn_harness.c): a failed CHECK prints the process's role
 * (g_who), the place and the condition and marks the run failed (g_fail),
 * and the run goes on to the next check; OK(e) checks that a plugin call
 * returned ncclSuccess. Each harness is one program: the state is its own,
 * defined once in harness_check.c, which every harness links (the files
 * of np_harness and of np_flood share it). xfer moves bytes through a pipe
 * between two processes of a harness.
 */
#ifndef CG_TESTS_PLUGIN_NCCL_HARNESS_CHECK_H
#define CG_TESTS_PLUGIN_NCCL_HARNESS_CHECK_H

#include <stddef.h>
#include <stdio.h>

extern int g_fail;
extern const char *g_who;

#define CHECK(c)                                                             \
    do {                                                                     \
        if (!(c)) {                                                          \
            fprintf(stderr, "[%s] %s:%d: check failed: %s\n", g_who,        \
                    __FILE__, __LINE__, #c);                                 \
            g_fail = 1;                                                      \
        }                                                                    \
    } while (0)
#define OK(e) CHECK((e) == ncclSuccess)

/* Writes (out) or reads n bytes of buf through fd, all of them; a broken
 * pipe ends the process (exit 2) naming its role. */
void xfer(int fd, void *buf, size_t n, int out);

#endif
