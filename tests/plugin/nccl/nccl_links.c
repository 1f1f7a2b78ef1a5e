/* SPDX-License-Identifier: Apache-2.0 */
/* The NCCL the plugins target links and reports its version. */
#include <nccl.h>
#include <stdio.h>

int main(void)
{
    int v = 0;
    if (ncclGetVersion(&v) != ncclSuccess || v < 22800) {
        fprintf(stderr, "ncclGetVersion: %d\n", v);
        return 1;
    }
    printf("NCCL %d (header %d)\n", v, NCCL_VERSION_CODE);
    return 0;
}
