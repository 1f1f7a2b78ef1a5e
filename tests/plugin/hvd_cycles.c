/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hvd_cycles N: one rank (alone, or under collguard-run) doing N
 * horovod_init / horovod_shutdown cycles through libcollguard_hvd.so, with
 * an allreduce of every cycle's rank numbers checked in between and, every
 * 10th cycle, a double init, a double shutdown and calls after shutdown.
 * Run under valgrind (tests/valgrind/run.sh): what a cycle leaves behind
 * shows up N times. Prints "ok N" and exits 0; the first failure, exit 1.
 */
#include <stdio.h>
#include <stdlib.h>

#include "plugin/hvd_abi.h"

#define FAIL(...)                                                            \
    do {                                                                     \
        fprintf(stderr, "hvd_cycles: " __VA_ARGS__);                         \
        fputc('\n', stderr);                                                 \
        return 1;                                                            \
    } while (0)

/* Sum of (rank + cycle) over the job, on every rank. */
static int cycle_allreduce(int cycle)
{
    cg_hvd_core_h core = cg_hvd_global_core();
    int size = horovod_size(), rank = horovod_rank();
    float in[16], out[16];
    cg_hvd_tensor_t t = {.name = "cycle", .dtype = CG_DTYPE_F32, .ndim = 1,
                         .shape = {16}, .input = in, .output = out};
    cg_hvd_req_h req;
    cg_status_t st;

    for (int i = 0; i < 16; i++)
        in[i] = (float)(rank + cycle + i);
    st = cg_hvd_enqueue_allreduce(core, &t, CG_OP_SUM, 1.0, 1.0, &req);
    if (st != CG_OK)
        FAIL("cycle %d: enqueue: %s", cycle, cg_last_error());
    st = cg_hvd_wait(req);
    if (st != CG_OK)
        FAIL("cycle %d: allreduce: %s", cycle, cg_hvd_error(req));
    cg_hvd_release(req);
    for (int i = 0; i < 16; i++) {
        float want = (float)(size * (cycle + i) + size * (size - 1) / 2);
        if (out[i] != want)
            FAIL("cycle %d: element %d is %g, expected %g", cycle, i,
                 (double)out[i], (double)want);
    }
    return 0;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 100;

    for (int c = 0; c < n; c++) {
        if (!horovod_init(NULL, 0, NULL, NULL, 0))
            FAIL("cycle %d: horovod_init failed", c);
        if (c % 10 == 0 && !horovod_init(NULL, 0, NULL, NULL, 0))
            FAIL("cycle %d: a second horovod_init failed", c);
        if (horovod_is_initialized() != 1 || cycle_allreduce(c) != 0)
            FAIL("cycle %d: not initialized, or the allreduce failed", c);
        horovod_shutdown();
        if (c % 10 == 0) {
            horovod_shutdown();
            if (horovod_rank() != -1 || cg_hvd_global_core() != NULL ||
                horovod_is_initialized() != 0)
                FAIL("cycle %d: still initialized after shutdown", c);
        }
    }
    printf("ok %d\n", n);
    return 0;
}
