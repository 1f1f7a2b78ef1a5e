/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Memory accounting under the governor: the raw backend (malloc by default),
 * per-category current and peak bytes, failure counters and CG_FAULT_ALLOC
 * fault injection. Thread-safe (C11 atomics). Layer: core/governor; calls core/base.
 * CONTROL allocations are never fault-injected: only buffer categories are.
 */
#ifndef CG_CORE_MEMACCT_H
#define CG_CORE_MEMACCT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "collguard/governor.h"
#include "core/base/log.h"

/* The raw allocator accounted over (malloc, cudaMalloc, ...). alloc returns
 * NULL on failure; free gets the size that was passed to alloc. device:
 * its memory is GPU memory (counted again in device_current/device_peak). */
typedef struct cg_mem_backend {
    void *(*alloc)(void *arg, size_t size);
    void (*free)(void *arg, void *ptr, size_t size);
    void *arg;
    int device;
} cg_mem_backend_t;

/* Alignment of the default host backend (fits AVX-512 vector loads). */
#define CG_MEM_HOST_ALIGN 64

typedef struct cg_memacct {
    cg_mem_backend_t backend;
    uint64_t fault_every;                 /* CG_FAULT_ALLOC; 0 off */
    atomic_uint_fast64_t buffer_attempts; /* non-CONTROL allocations tried */
    atomic_uint_fast64_t current[CG_MEM_CAT_COUNT];
    atomic_uint_fast64_t peak[CG_MEM_CAT_COUNT];
    atomic_uint_fast64_t device_current[CG_MEM_CAT_COUNT]; /* of which GPU */
    atomic_uint_fast64_t device_peak[CG_MEM_CAT_COUNT];
    atomic_uint_fast64_t failures;        /* backend NULL or injected */
    atomic_uint_fast64_t injected;        /* of which injected */
} cg_memacct_t;

/* The default host backend: malloc and free, blocks aligned to
 * CG_MEM_HOST_ALIGN (memacct.c says why not posix_memalign). */
cg_mem_backend_t cg_mem_backend_host(void);

/* backend NULL or backend->alloc NULL selects cg_mem_backend_host(). */
void cg_memacct_init(cg_memacct_t *acct, const cg_mem_backend_t *backend,
                     uint64_t fault_every);
/* Warns through log (may be NULL) for each category with live bytes and
 * returns the total live bytes (0 when everything was freed). */
uint64_t cg_memacct_cleanup(cg_memacct_t *acct, const cg_log_t *log);

/* Allocates size bytes of category cat and counts them. Returns NULL when
 * the backend fails or a fault is injected (*injected_p tells which, when
 * not NULL); the failure counter is bumped, nothing is logged. size 0 is
 * rejected as a failure (nothing to account). */
void *cg_memacct_alloc(cg_memacct_t *acct, cg_mem_cat_t cat, size_t size,
                       int *injected_p);
/* size must be the size passed to cg_memacct_alloc. NULL is a no-op. */
void cg_memacct_free(cg_memacct_t *acct, cg_mem_cat_t cat, void *ptr,
                     size_t size);
/* The same through another raw allocator (cudaMalloc, cudaMallocHost):
 * same counters and fault injection; backend NULL is acct's own. */
void *cg_memacct_alloc_on(cg_memacct_t *acct, const cg_mem_backend_t *backend,
                          cg_mem_cat_t cat, size_t size, int *injected_p);
void cg_memacct_free_on(cg_memacct_t *acct, const cg_mem_backend_t *backend,
                        cg_mem_cat_t cat, void *ptr, size_t size);

uint64_t cg_memacct_current(const cg_memacct_t *acct, cg_mem_cat_t cat);
uint64_t cg_memacct_peak(const cg_memacct_t *acct, cg_mem_cat_t cat);
/* The same, GPU memory only (backends with device set). */
uint64_t cg_memacct_device_current(const cg_memacct_t *acct,
                                   cg_mem_cat_t cat);
uint64_t cg_memacct_device_peak(const cg_memacct_t *acct, cg_mem_cat_t cat);
/* Every peak (all and GPU) set to the current bytes: peaks count from
 * now on. */
void cg_memacct_reset_peaks(cg_memacct_t *acct);
uint64_t cg_memacct_failures(const cg_memacct_t *acct);
uint64_t cg_memacct_injected(const cg_memacct_t *acct);

const char *cg_mem_cat_name(cg_mem_cat_t cat);

#endif
