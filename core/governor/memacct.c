/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Per-category accounting of every byte the governor hands out, over a raw
 * backend (aligned malloc by default), with CG_FAULT_ALLOC injection on
 * buffer categories. Lock-free: counters are C11 atomics, so any thread may
 * allocate and free. Layer: core/governor; calls core/base (log) only.
 */
#include "core/governor/memacct.h"

#include <stdint.h>
#include <stdlib.h>

#include "core/base/parse.h"

static const char *const cg__mem_cat_names[CG_MEM_CAT_COUNT] = {
#define CG__MEM_CAT_NAME(e, s) [e] = s,
    CG_MEM_CAT_MAP(CG__MEM_CAT_NAME)
#undef CG__MEM_CAT_NAME
};

const char *cg_mem_cat_name(cg_mem_cat_t cat)
{
    if ((unsigned)cat >= CG_MEM_CAT_COUNT)
        return "unknown";
    return cg__mem_cat_names[cat];
}

/* malloc with the alignment made by hand: the block starts at the first
 * CG_MEM_HOST_ALIGN boundary past the pointer malloc gave, which is kept
 * just before it. Not posix_memalign: glibc's (2.36) asks its heap for
 * size + alignment on every call and skips the per-thread cache, so a
 * freed block rarely serves the next request of the same size; churn of
 * request objects and staging buffers then grew the heap and faulted in
 * fresh pages for every one (net_plugin_perf: a page fault per 4 KiB
 * received). malloc of a repeated size reuses the block. Sanitizer
 * builds keep posix_memalign for exact bounds. */
#if defined(__SANITIZE_ADDRESS__)
/* ASan: exact bounds (the slack below would hide small overruns). */
static void *cg__host_alloc(void *arg, size_t size)
{
    void *ptr = NULL;
    (void)arg;
    if (posix_memalign(&ptr, CG_MEM_HOST_ALIGN, size) != 0)
        return NULL;
    return ptr;
}

static void cg__host_free(void *arg, void *ptr, size_t size)
{
    (void)arg;
    (void)size;
    free(ptr);
}
#else
static void *cg__host_alloc(void *arg, size_t size)
{
    uint8_t *raw;
    uintptr_t p;

    (void)arg;
    if (size > SIZE_MAX - CG_MEM_HOST_ALIGN)
        return NULL;
    raw = malloc(size + CG_MEM_HOST_ALIGN);
    if (raw == NULL)
        return NULL;
    /* malloc aligns to at least 16, so there are >= 16 bytes before p. */
    p = ((uintptr_t)raw + CG_MEM_HOST_ALIGN) &
        ~(uintptr_t)(CG_MEM_HOST_ALIGN - 1);
    ((void **)p)[-1] = raw;
    return (void *)p;
}

static void cg__host_free(void *arg, void *ptr, size_t size)
{
    (void)arg;
    (void)size;
    if (ptr != NULL)
        free(((void **)ptr)[-1]);
}
#endif

cg_mem_backend_t cg_mem_backend_host(void)
{
    cg_mem_backend_t b = {cg__host_alloc, cg__host_free, NULL, 0};
    return b;
}

void cg_memacct_init(cg_memacct_t *acct, const cg_mem_backend_t *backend,
                     uint64_t fault_every)
{
    if (backend != NULL && backend->alloc != NULL)
        acct->backend = *backend;
    else
        acct->backend = cg_mem_backend_host();
    acct->fault_every = fault_every;
    atomic_init(&acct->buffer_attempts, 0);
    atomic_init(&acct->failures, 0);
    atomic_init(&acct->injected, 0);
    for (int c = 0; c < CG_MEM_CAT_COUNT; c++) {
        atomic_init(&acct->current[c], 0);
        atomic_init(&acct->peak[c], 0);
        atomic_init(&acct->device_current[c], 0);
        atomic_init(&acct->device_peak[c], 0);
    }
}

uint64_t cg_memacct_cleanup(cg_memacct_t *acct, const cg_log_t *log)
{
    uint64_t total = 0;
    char buf[32];

    for (int c = 0; c < CG_MEM_CAT_COUNT; c++) {
        uint64_t live = atomic_load(&acct->current[c]);
        if (live == 0)
            continue;
        total += live;
        cg_warn(log, "memory governor destroyed with %s of %s memory still "
                "allocated", cg_format_size(live, buf, sizeof(buf)),
                cg_mem_cat_name(c));
    }
    return total;
}

/* True when this buffer allocation is the Nth one that CG_FAULT_ALLOC=N
 * fails. CONTROL allocations are never injected. */
static int cg__memacct_inject(cg_memacct_t *acct, cg_mem_cat_t cat)
{
    uint64_t n;

    if (cat == CG_MEM_CAT_CONTROL)
        return 0;
    n = atomic_fetch_add(&acct->buffer_attempts, 1) + 1;
    return acct->fault_every != 0 && n % acct->fault_every == 0;
}

static void cg__memacct_raise(atomic_uint_fast64_t *peak_p, uint64_t now)
{
    uint64_t peak = atomic_load(peak_p);
    while (now > peak && !atomic_compare_exchange_weak(peak_p, &peak, now))
        ;
}

void *cg_memacct_alloc(cg_memacct_t *acct, cg_mem_cat_t cat, size_t size,
                       int *injected_p)
{
    return cg_memacct_alloc_on(acct, NULL, cat, size, injected_p);
}

void *cg_memacct_alloc_on(cg_memacct_t *acct, const cg_mem_backend_t *backend,
                          cg_mem_cat_t cat, size_t size, int *injected_p)
{
    const cg_mem_backend_t *be = backend != NULL ? backend : &acct->backend;
    int injected = cg__memacct_inject(acct, cat);
    void *ptr = NULL;
    uint64_t now;

    if (!injected && size > 0)
        ptr = be->alloc(be->arg, size);
    if (injected_p != NULL)
        *injected_p = injected;
    if (ptr == NULL) {
        atomic_fetch_add(&acct->failures, 1);
        if (injected)
            atomic_fetch_add(&acct->injected, 1);
        return NULL;
    }
    now = atomic_fetch_add(&acct->current[cat], size) + size;
    cg__memacct_raise(&acct->peak[cat], now);
    if (be->device) {
        now = atomic_fetch_add(&acct->device_current[cat], size) + size;
        cg__memacct_raise(&acct->device_peak[cat], now);
    }
    return ptr;
}

void cg_memacct_free(cg_memacct_t *acct, cg_mem_cat_t cat, void *ptr,
                     size_t size)
{
    cg_memacct_free_on(acct, NULL, cat, ptr, size);
}

void cg_memacct_free_on(cg_memacct_t *acct, const cg_mem_backend_t *backend,
                        cg_mem_cat_t cat, void *ptr, size_t size)
{
    const cg_mem_backend_t *be = backend != NULL ? backend : &acct->backend;

    if (ptr == NULL)
        return;
    be->free(be->arg, ptr, size);
    atomic_fetch_sub(&acct->current[cat], size);
    if (be->device)
        atomic_fetch_sub(&acct->device_current[cat], size);
}

uint64_t cg_memacct_current(const cg_memacct_t *acct, cg_mem_cat_t cat)
{
    return atomic_load(&((cg_memacct_t *)acct)->current[cat]);
}

uint64_t cg_memacct_peak(const cg_memacct_t *acct, cg_mem_cat_t cat)
{
    return atomic_load(&((cg_memacct_t *)acct)->peak[cat]);
}

uint64_t cg_memacct_device_current(const cg_memacct_t *acct,
                                   cg_mem_cat_t cat)
{
    return atomic_load(&((cg_memacct_t *)acct)->device_current[cat]);
}

uint64_t cg_memacct_device_peak(const cg_memacct_t *acct, cg_mem_cat_t cat)
{
    return atomic_load(&((cg_memacct_t *)acct)->device_peak[cat]);
}

/* The store may overwrite a peak an allocation raised meanwhile: the
 * second load raises it again; later allocations raise it themselves. */
void cg_memacct_reset_peaks(cg_memacct_t *acct)
{
    for (int c = 0; c < CG_MEM_CAT_COUNT; c++) {
        atomic_store(&acct->peak[c], atomic_load(&acct->current[c]));
        cg__memacct_raise(&acct->peak[c], atomic_load(&acct->current[c]));
        atomic_store(&acct->device_peak[c],
                     atomic_load(&acct->device_current[c]));
        cg__memacct_raise(&acct->device_peak[c],
                          atomic_load(&acct->device_current[c]));
    }
}

uint64_t cg_memacct_failures(const cg_memacct_t *acct)
{
    return atomic_load(&((cg_memacct_t *)acct)->failures);
}

uint64_t cg_memacct_injected(const cg_memacct_t *acct)
{
    return atomic_load(&((cg_memacct_t *)acct)->injected);
}
