/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The driver-API GPU probe (see probe_cudrv.h). Layer: plugin/nccl.
 */
#include "plugin/nccl/probe_cudrv.h"

#include <dlfcn.h>
#include <string.h>

#include "core/base/error.h"

static cg_status_t cg__cudrv_read(void *arg, uint64_t *free_p,
                                  uint64_t *total_p)
{
    cg_cudrv_probe_t *drv = arg;
    size_t f = 0, t = 0;
    int rc = drv->mem_get_info(&f, &t);

    if (rc != 0 || t == 0)
        return cg_error_set(CG_ERR_NO_DEVICE, "cuMemGetInfo failed (CUDA "
                            "error %d): no current context on this thread",
                            rc);
    *free_p = f;
    *total_p = t;
    return CG_OK;
}

cg_status_t cg_cudrv_probe_init(cg_cudrv_probe_t *drv,
                                cg_mem_probe_t *probe_p)
{
    uint64_t f, t;
    void *sym;

    memset(drv, 0, sizeof(*drv));
    drv->lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (drv->lib == NULL)
        return cg_error_set(CG_ERR_NO_DEVICE, "libcuda is not loaded in "
                            "this process");
    sym = dlsym(drv->lib, "cuMemGetInfo_v2");
    if (sym == NULL) {
        cg_cudrv_probe_cleanup(drv);
        return cg_error_set(CG_ERR_NO_DEVICE, "libcuda has no "
                            "cuMemGetInfo_v2");
    }
    memcpy(&drv->mem_get_info, &sym, sizeof(sym));
    if (cg__cudrv_read(drv, &f, &t) != CG_OK) {
        cg_cudrv_probe_cleanup(drv);
        return CG_ERR_NO_DEVICE;
    }
    probe_p->name = "cuda-driver";
    probe_p->kind = CG_MEM_KIND_DEVICE;
    probe_p->read = cg__cudrv_read;
    probe_p->arg = drv;
    return CG_OK;
}

void cg_cudrv_probe_cleanup(cg_cudrv_probe_t *drv)
{
    if (drv->lib != NULL)
        dlclose(drv->lib);
    memset(drv, 0, sizeof(*drv));
}
