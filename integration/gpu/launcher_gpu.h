/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The GPU a rank of the GPU programs uses: the launcher's local rank
 * (collguard-run, mpirun, torchrun) modulo the GPUs visible, GPU 0 when no
 * launcher says. NCCL cannot put two ranks on one GPU; COLLGUARD and MPI
 * ranks may share one. Header-only. Layer: integration.
 */
#ifndef CG_INTEGRATION_GPU_LAUNCHER_GPU_H
#define CG_INTEGRATION_GPU_LAUNCHER_GPU_H

#include <stdlib.h>

static inline int launcher_gpu(int ndev)
{
    static const char *const vars[] = {"CG_RUN_LOCAL_RANK",
                                       "OMPI_COMM_WORLD_LOCAL_RANK",
                                       "LOCAL_RANK", NULL};

    for (const char *const *v = vars; *v != NULL; v++)
        if (getenv(*v) != NULL)
            return atoi(getenv(*v)) % ndev;
    return 0;
}

#endif
