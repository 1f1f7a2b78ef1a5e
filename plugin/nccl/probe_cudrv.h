/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A GPU memory probe over the CUDA driver API found already loaded in the
 * process (dlopen with RTLD_NOLOAD: inside NCCL libcuda is there; the
 * plugin never loads a CUDA library itself and links none). It reads
 * cuMemGetInfo on the calling thread's current context.
 * Layer: plugin/nccl.
 */
#ifndef CG_PLUGIN_NCCL_PROBE_CUDRV_H
#define CG_PLUGIN_NCCL_PROBE_CUDRV_H

#include <stddef.h>

#include "collguard/status.h"
#include "core/governor/probe.h"

typedef struct cg_cudrv_probe {
    void *lib;
    int (*mem_get_info)(size_t *free_p, size_t *total_p);
} cg_cudrv_probe_t;

/* CG_OK and *probe_p filled when libcuda is loaded and a first read on
 * this thread works; CG_ERR_NO_DEVICE otherwise (nothing held). */
cg_status_t cg_cudrv_probe_init(cg_cudrv_probe_t *drv,
                                cg_mem_probe_t *probe_p);
void cg_cudrv_probe_cleanup(cg_cudrv_probe_t *drv);

#endif
