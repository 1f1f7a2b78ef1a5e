/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The CUDA memory probe, which never creates a CUDA context. It reads the
 * device this rank will use: the first CUDA tensor's device once the engine
 * names it (cg_cuda_probe_set_device), until then local rank % visible
 * devices (CUDA ordinals already honour CUDA_VISIBLE_DEVICES). The reading
 * comes from NVML (nvmlDeviceGetMemoryInfo on the device with the CUDA
 * device's PCI bus id), which needs no context; without NVML, from
 * cuMemGetInfo inside the device's primary context when that context is
 * already active, else the device's total as free (nothing of this
 * process is on it yet). The driver and NVML are loaded with dlopen, so
 * the governor links no CUDA library (the NCCL plugins use it too).
 * Built when CG_HAVE_CUDA; without a driver or GPU init reports
 * CG_ERR_NO_DEVICE quietly. Layer: core/governor; calls core/base and the
 * CUDA driver and NVML through dlopen.
 */
#include "core/governor/probe.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cg_build.h"
#include "core/base/error.h"

int cg_cuda_probe_pick(int device, int local_rank, int ndev)
{
    if (ndev <= 0)
        return -1;
    if (device >= 0)
        return device < ndev ? device : -1;
    return (local_rank > 0 ? local_rank : 0) % ndev;
}

#if CG_HAVE_CUDA

/* The driver's and NVML's C ABI, as far as the probe calls it. */
typedef int cg__cu_result;
typedef int cg__cu_device;
typedef void *cg__cu_context;
typedef struct {
    unsigned long long total, free, used;
} cg__nvml_memory_t;

struct cg__cuda_fns {
    cg__cu_result (*init)(unsigned int);
    cg__cu_result (*device_get_count)(int *);
    cg__cu_result (*device_get)(cg__cu_device *, int);
    cg__cu_result (*device_get_pci_bus_id)(char *, int, cg__cu_device);
    cg__cu_result (*device_total_mem)(size_t *, cg__cu_device);
    cg__cu_result (*primary_ctx_get_state)(cg__cu_device, unsigned int *,
                                           int *);
    cg__cu_result (*primary_ctx_retain)(cg__cu_context *, cg__cu_device);
    cg__cu_result (*primary_ctx_release)(cg__cu_device);
    cg__cu_result (*ctx_push)(cg__cu_context);
    cg__cu_result (*ctx_pop)(cg__cu_context *);
    cg__cu_result (*mem_get_info)(size_t *, size_t *);
    cg__cu_result (*driver_get_version)(int *);
    int (*nvml_init)(void);
    int (*nvml_shutdown)(void);
    int (*nvml_by_pci)(const char *, void **);
    int (*nvml_memory)(void *, cg__nvml_memory_t *);
};

struct cg_cuda_probe {
    void *cuda_lib, *nvml_lib;
    struct cg__cuda_fns fns;
    int ndev;                /* CUDA devices visible to this process */
    _Atomic int device;      /* the first CUDA tensor's; -1 until then */
    _Atomic int local_rank;  /* the device until then: local_rank % ndev */
    pthread_mutex_t lock;    /* readings come from any thread */
    int nvml_for;            /* CUDA ordinal nvml_dev belongs to; -1 */
    void *nvml_dev;
    const char *source;      /* of the last reading: nvml, context, total */
};

static void *cg__sym(void *lib, const char *name)
{
    return lib != NULL ? dlsym(lib, name) : NULL;
}

int cg_cuda_probe_built(void)
{
    return 1;
}

/* Loads the driver's entry points into cp; false when there is no usable
 * driver (no libcuda.so.1, or cuInit fails: no GPU). */
static bool cg__load_driver(cg_cuda_probe_t *cp)
{
    struct cg__cuda_fns *f = &cp->fns;

    cp->cuda_lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (cp->cuda_lib == NULL)
        return false;
    f->init = cg__sym(cp->cuda_lib, "cuInit");
    f->device_get_count = cg__sym(cp->cuda_lib, "cuDeviceGetCount");
    f->device_get = cg__sym(cp->cuda_lib, "cuDeviceGet");
    f->device_get_pci_bus_id = cg__sym(cp->cuda_lib, "cuDeviceGetPCIBusId");
    f->device_total_mem = cg__sym(cp->cuda_lib, "cuDeviceTotalMem_v2");
    f->primary_ctx_get_state =
        cg__sym(cp->cuda_lib, "cuDevicePrimaryCtxGetState");
    f->primary_ctx_retain = cg__sym(cp->cuda_lib, "cuDevicePrimaryCtxRetain");
    f->primary_ctx_release =
        cg__sym(cp->cuda_lib, "cuDevicePrimaryCtxRelease_v2");
    f->ctx_push = cg__sym(cp->cuda_lib, "cuCtxPushCurrent_v2");
    f->ctx_pop = cg__sym(cp->cuda_lib, "cuCtxPopCurrent_v2");
    f->mem_get_info = cg__sym(cp->cuda_lib, "cuMemGetInfo_v2");
    f->driver_get_version = cg__sym(cp->cuda_lib, "cuDriverGetVersion");
    if (f->init == NULL || f->device_get_count == NULL ||
        f->device_get == NULL || f->device_total_mem == NULL ||
        f->init(0) != 0 || f->device_get_count(&cp->ndev) != 0 ||
        cp->ndev <= 0) {
        dlclose(cp->cuda_lib);
        cp->cuda_lib = NULL;
        cp->ndev = 0;
        return false;
    }
    return true;
}

/* NVML, when the machine has it (it reads memory without a context). */
static void cg__load_nvml(cg_cuda_probe_t *cp)
{
    struct cg__cuda_fns *f = &cp->fns;

    cp->nvml_lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    f->nvml_init = cg__sym(cp->nvml_lib, "nvmlInit_v2");
    f->nvml_shutdown = cg__sym(cp->nvml_lib, "nvmlShutdown");
    f->nvml_by_pci = cg__sym(cp->nvml_lib, "nvmlDeviceGetHandleByPciBusId_v2");
    f->nvml_memory = cg__sym(cp->nvml_lib, "nvmlDeviceGetMemoryInfo");
    if (f->nvml_init == NULL || f->nvml_shutdown == NULL ||
        f->nvml_by_pci == NULL || f->nvml_memory == NULL ||
        f->device_get_pci_bus_id == NULL || f->nvml_init() != 0) {
        if (cp->nvml_lib != NULL)
            dlclose(cp->nvml_lib);
        cp->nvml_lib = NULL;
    }
}

int cg_cuda_device_count(void)
{
    cg_cuda_probe_t cp;
    int n;

    memset(&cp, 0, sizeof(cp));
    if (!cg__load_driver(&cp))
        return 0;
    n = cp.ndev;
    dlclose(cp.cuda_lib);
    return n;
}

/* Free and total of CUDA ordinal dev without creating a context. */
static cg_status_t cg__read_dev(cg_cuda_probe_t *cp, int dev,
                                uint64_t *free_p, uint64_t *total_p)
{
    struct cg__cuda_fns *f = &cp->fns;
    cg__cu_device d;
    size_t free_b = 0, total_b = 0;
    unsigned int flags = 0;
    int active = 0;

    if (f->device_get(&d, dev) != 0)
        return cg_error_set(CG_ERR_NO_DEVICE, "cuda memory probe: CUDA "
                            "device %d is gone", dev);
    if (cp->nvml_lib != NULL) {
        if (cp->nvml_for != dev) {
            char bus[32];
            cp->nvml_dev = NULL;
            if (f->device_get_pci_bus_id(bus, (int)sizeof(bus), d) == 0 &&
                f->nvml_by_pci(bus, &cp->nvml_dev) != 0)
                cp->nvml_dev = NULL;
            cp->nvml_for = dev;
        }
        cg__nvml_memory_t m;
        if (cp->nvml_dev != NULL && f->nvml_memory(cp->nvml_dev, &m) == 0) {
            *free_p = m.free;
            *total_p = m.total;
            cp->source = "nvml";
            return CG_OK;
        }
    }
    if (f->device_total_mem(&total_b, d) != 0)
        return cg_error_set(CG_ERR_NO_DEVICE, "cuda memory probe: "
                            "cuDeviceTotalMem on device %d failed", dev);
    if (f->primary_ctx_get_state != NULL && f->primary_ctx_retain != NULL &&
        f->primary_ctx_release != NULL && f->ctx_push != NULL &&
        f->ctx_pop != NULL && f->mem_get_info != NULL &&
        f->primary_ctx_get_state(d, &flags, &active) == 0 && active) {
        cg__cu_context ctx = NULL, popped = NULL;
        /* Active already: retaining it creates nothing. */
        if (f->primary_ctx_retain(&ctx, d) == 0) {
            int ok = f->ctx_push(ctx) == 0;
            if (ok) {
                ok = f->mem_get_info(&free_b, &total_b) == 0;
                (void)f->ctx_pop(&popped);
            }
            (void)f->primary_ctx_release(d);
            if (ok) {
                *free_p = free_b;
                *total_p = total_b;
                cp->source = "context";
                return CG_OK;
            }
        }
    }
    /* No context on the device and no NVML: nothing of this process is
     * there yet; the first CUDA tensor makes the context and the next
     * reading is exact. */
    *free_p = total_b;
    *total_p = total_b;
    cp->source = "total";
    return CG_OK;
}

static cg_status_t cg__cuda_probe_read(void *arg, uint64_t *free_p,
                                       uint64_t *total_p)
{
    cg_cuda_probe_t *cp = arg;
    cg_status_t st;
    int dev;

    pthread_mutex_lock(&cp->lock);
    dev = cg_cuda_probe_pick(atomic_load(&cp->device),
                             atomic_load(&cp->local_rank), cp->ndev);
    st = dev < 0 ? cg_error_set(CG_ERR_INVALID_PARAM, "cuda memory probe: "
                                "CUDA device %d, but %d are visible",
                                atomic_load(&cp->device), cp->ndev)
                 : cg__read_dev(cp, dev, free_p, total_p);
    pthread_mutex_unlock(&cp->lock);
    return st;
}

static int cg__cuda_probe_device(void *arg)
{
    cg_cuda_probe_t *cp = arg;

    return cg_cuda_probe_pick(atomic_load(&cp->device),
                              atomic_load(&cp->local_rank), cp->ndev);
}

cg_status_t cg_cuda_probe_create(cg_cuda_probe_t **cp_p,
                                 cg_mem_probe_t *probe_p)
{
    cg_cuda_probe_t *cp = calloc(1, sizeof(*cp));

    *cp_p = NULL;
    if (cp == NULL)
        return cg_error_set(CG_ERR_NO_MEMORY, "cuda memory probe: out of "
                            "memory");
    atomic_init(&cp->device, -1);
    atomic_init(&cp->local_rank, 0);
    cp->nvml_for = -1;
    if (!cg__load_driver(cp)) {
        free(cp);
        return cg_error_set(CG_ERR_NO_DEVICE, "cuda memory probe: no usable "
                            "CUDA device (no driver or no GPU); use "
                            "CG_MEM_PROBE=host");
    }
    cg__load_nvml(cp);
    pthread_mutex_init(&cp->lock, NULL);
    *cp_p = cp;
    probe_p->name = "cuda";
    probe_p->kind = CG_MEM_KIND_DEVICE;
    probe_p->device = cg__cuda_probe_device;
    probe_p->read = cg__cuda_probe_read;
    probe_p->arg = cp;
    return CG_OK;
}

void cg_cuda_probe_destroy(cg_cuda_probe_t *cp)
{
    if (cp == NULL)
        return;
    if (cp->nvml_lib != NULL) {
        (void)cp->fns.nvml_shutdown();
        dlclose(cp->nvml_lib);
    }
    dlclose(cp->cuda_lib);
    pthread_mutex_destroy(&cp->lock);
    free(cp);
}

const char *cg_cuda_probe_source(cg_cuda_probe_t *cp)
{
    const char *s;

    if (cp == NULL)
        return "none";
    pthread_mutex_lock(&cp->lock);
    s = cp->source != NULL ? cp->source : (cp->nvml_lib ? "nvml" : "driver");
    pthread_mutex_unlock(&cp->lock);
    return s;
}

int cg_cuda_driver_version(void)
{
    cg_cuda_probe_t cp;
    int v = 0;

    memset(&cp, 0, sizeof(cp));
    if (!cg__load_driver(&cp))
        return 0;
    if (cp.fns.driver_get_version == NULL ||
        cp.fns.driver_get_version(&v) != 0)
        v = 0;
    dlclose(cp.cuda_lib);
    return v;
}

#else /* !CG_HAVE_CUDA */

int cg_cuda_probe_built(void)
{
    return 0;
}

int cg_cuda_device_count(void)
{
    return 0;
}

struct cg_cuda_probe {
    _Atomic int device, local_rank;
};

cg_status_t cg_cuda_probe_create(cg_cuda_probe_t **cp_p,
                                 cg_mem_probe_t *probe_p)
{
    (void)probe_p;
    *cp_p = NULL;
    return cg_error_set(CG_ERR_UNSUPPORTED, "cuda memory probe: collguard "
                        "was built without CUDA; use CG_MEM_PROBE=host");
}

void cg_cuda_probe_destroy(cg_cuda_probe_t *cp)
{
    (void)cp;
}

const char *cg_cuda_probe_source(cg_cuda_probe_t *cp)
{
    (void)cp;
    return "none";
}

int cg_cuda_driver_version(void)
{
    return 0;
}

#endif

void cg_cuda_probe_set_device(cg_cuda_probe_t *cp, int device)
{
    /* Called per CUDA tensor: write only a change. */
    if (cp != NULL && atomic_load_explicit(&cp->device,
                                           memory_order_relaxed) != device)
        atomic_store(&cp->device, device);
}

void cg_cuda_probe_set_local_rank(cg_cuda_probe_t *cp, int local_rank)
{
    if (cp != NULL)
        atomic_store(&cp->local_rank, local_rank);
}
