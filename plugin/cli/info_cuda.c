/* SPDX-License-Identifier: Apache-2.0 */
/*
 * collguard-info's CUDA lines: the driver's and the runtime's CUDA
 * versions (a warning when the driver is older than this build's runtime:
 * cuda_compat.h says when that fails and when it runs limited), the NCCL version loaded, and each device's free
 * and total memory as the governor's probe reads it (NVML where the
 * machine has it, so no CUDA context is made). Layer: plugin (a command).
 */
#include "plugin/cli/info_cuda.h"

#include <stdio.h>

#include "cg_build.h"
#include "core/base/parse.h"
#include "plugin/cli/cuda_compat.h"
#include "core/governor/probe.h"

#if CG_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif
#if CG_HAVE_NCCL && CG_HAVE_CUDA
#include <nccl.h>
#endif

/* 12040 -> "12.4" */
static const char *cg__cuda_ver(int v, char *buf, size_t len)
{
    if (v <= 0)
        snprintf(buf, len, "none");
    else
        snprintf(buf, len, "%d.%d", v / 1000, (v % 1000) / 10);
    return buf;
}

void cg_info_cuda(void)
{
    int drv = cg_cuda_driver_version(), rt = 0, n;
    char a[16], b[16];

    if (!cg_cuda_probe_built()) {
        printf("  cuda    not built in\n");
        return;
    }
#if CG_HAVE_CUDA
    if (cudaRuntimeGetVersion(&rt) != cudaSuccess) {
        (void)cudaGetLastError();
        rt = 0;
    }
#endif
    n = cg_cuda_device_count();
    printf("  cuda    driver %s, runtime %s, %d device(s)\n",
           cg__cuda_ver(drv, a, sizeof(a)), cg__cuda_ver(rt, b, sizeof(b)),
           n);
    switch (cg_cuda_compat(drv, rt)) {
    case CG_CUDA_COMPAT_FAIL:
        printf("  cuda    WARNING: the driver supports CUDA %s but this "
               "collguard's runtime is CUDA %s: CUDA calls will fail "
               "(cudaErrorInsufficientDriver); install a driver for CUDA "
               "%s or newer\n",
               a, b, b);
        break;
    case CG_CUDA_COMPAT_MINOR:
        printf("  cuda    WARNING: the driver supports CUDA %s, older than "
               "this collguard's runtime (CUDA %s): it runs under CUDA's "
               "minor-version compatibility, where calls that need a newer "
               "driver fail (cudaErrorCallRequiresNewerDriver) and PTX "
               "from a newer toolkit does not load; a driver for CUDA %s "
               "or newer lifts both\n",
               a, b, b);
        break;
    default:
        break;
    }
#if CG_HAVE_NCCL && CG_HAVE_CUDA
    {
        int nv = 0;
        if (ncclGetVersion(&nv) == ncclSuccess)
            printf("  nccl    %d.%d.%d loaded\n", nv / 10000,
                   (nv % 10000) / 100, nv % 100);
    }
#else
    printf("  nccl    not built in\n");
#endif
    if (n > 0) {
        cg_cuda_probe_t *cp;
        cg_mem_probe_t probe;
        if (cg_cuda_probe_create(&cp, &probe) != CG_OK)
            return;
        for (int d = 0; d < n; d++) {
            uint64_t f = 0, t = 0;
            char fs[32], ts[32];
            cg_cuda_probe_set_device(cp, d);
            if (probe.read(probe.arg, &f, &t) == CG_OK)
                printf("  cuda %d  %s free of %s (read by %s)\n", d,
                       cg_format_size(f, fs, sizeof(fs)),
                       cg_format_size(t, ts, sizeof(ts)),
                       cg_cuda_probe_source(cp));
        }
        cg_cuda_probe_destroy(cp);
    }
}
