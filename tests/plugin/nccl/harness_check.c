/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The soft checks' state of one harness program (harness_check.h): linked
 * into each, so that every file of a program that is split in several
 * marks the same run failed and names the same role; and the pipe
 * transfer between a harness's processes.
 */
#include <stdlib.h>
#include <unistd.h>

#include "harness_check.h"

int g_fail;
const char *g_who = "?";

void xfer(int fd, void *buf, size_t n, int out)
{
    size_t done = 0;
    while (done < n) {
        ssize_t k = out ? write(fd, (char *)buf + done, n - done)
                        : read(fd, (char *)buf + done, n - done);
        if (k <= 0) {
            fprintf(stderr, "[%s] the pipe to the other process broke\n",
                    g_who);
            exit(2);
        }
        done += (size_t)k;
    }
}
