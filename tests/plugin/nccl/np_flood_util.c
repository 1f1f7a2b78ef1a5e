/* SPDX-License-Identifier: Apache-2.0 */
/*
 * np_flood's plumbing (np_flood.c): the monotonic clock in milliseconds
 * and the control pipes between the victim, the stranger and the peer.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "harness_check.h"
#include "np_flood.h"

int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void xfer(int fd, void *buf, size_t n, int out)
{
    size_t done = 0;
    while (done < n) {
        ssize_t k = out ? write(fd, (char *)buf + done, n - done)
                        : read(fd, (char *)buf + done, n - done);
        if (k <= 0) {
            fprintf(stderr, "[%s] control pipe broke\n", g_who);
            exit(2);
        }
        done += (size_t)k;
    }
}
