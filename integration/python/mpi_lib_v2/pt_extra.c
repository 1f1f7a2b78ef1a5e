/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What mpi_lib_v2 offers beyond Horovod's bindings, for collguard.torch:
 * the memory governor's snapshot (pressure level, budget, free bytes,
 * projected seconds to OOM) and the engine's counters, as dicts.
 * Layer: integration (mpi_lib_v2).
 */
#include "integration/python/mpi_lib_v2/pt.h"

#include <stddef.h>
#include <string.h>

#include "collguard/governor.h"
#include "plugin/hvd_abi.h"

/* The name of a level, from collguard/governor.h's one list. */
static const char *pt__pressure_name(cg_pressure_t p)
{
#define PT__PRESSURE(e, s)                                                    \
    case e:                                                                   \
        return s;
    switch (p) {
        CG_PRESSURE_MAP(PT__PRESSURE)
    }
#undef PT__PRESSURE
    return "unknown";
}

/* {category name: bytes} of one of the snapshot's per-category arrays. */
static PyObject *pt__by_category(const uint64_t *bytes)
{
    static const char *const names[CG_MEM_CAT_COUNT] = {
#define PT__CAT_NAME(e, s) [e] = s,
        CG_MEM_CAT_MAP(PT__CAT_NAME)
#undef PT__CAT_NAME
    };
    PyObject *d = PyDict_New(), *v;

    for (int c = 0; d != NULL && c < CG_MEM_CAT_COUNT; c++) {
        v = PyLong_FromUnsignedLongLong((unsigned long long)bytes[c]);
        if (v == NULL || PyDict_SetItemString(d, names[c], v) != 0) {
            Py_XDECREF(v);
            Py_DECREF(d);
            return NULL;
        }
        Py_DECREF(v);
    }
    return d;
}

/* () -> dict; samples free memory now. */
PyObject *pt_memory_snapshot(PyObject *self, PyObject *args)
{
    cg_governor_snapshot_t s;
    cg_ctx_h ctx = cg_hvd_global_ctx();
    cg_status_t st;
    PyObject *eta, *peak, *current, *dpeak, *dcurrent;

    (void)self;
    (void)args;
    if (ctx == NULL) {
        PyErr_SetString(PyExc_ValueError, "collguard: Horovod has not been "
                        "initialized; use hvd.init().");
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    st = cg_ctx_governor_snapshot(ctx, &s);
    Py_END_ALLOW_THREADS
    if (st != CG_OK) {
        PyErr_Format(PyExc_RuntimeError, "collguard: governor snapshot: %s",
                     cg_last_error());
        return NULL;
    }
    if (s.oom_eta_s < 0) {
        eta = Py_None;
        Py_INCREF(eta);
    } else {
        eta = PyFloat_FromDouble(s.oom_eta_s);
        if (eta == NULL)
            return NULL;
    }
    peak = pt__by_category(s.peak_bytes);
    current = pt__by_category(s.current_bytes);
    dpeak = pt__by_category(s.device_peak_bytes);
    dcurrent = pt__by_category(s.device_current_bytes);
    if (peak == NULL || current == NULL || dpeak == NULL ||
        dcurrent == NULL) {
        Py_DECREF(eta);
        Py_XDECREF(peak);
        Py_XDECREF(current);
        Py_XDECREF(dpeak);
        Py_XDECREF(dcurrent);
        return NULL;
    }
    return Py_BuildValue(
        "{s:s,s:s,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:N,s:K,s:K,s:K,s:K,s:i,s:N,"
        "s:N,s:N,s:N}",
        "level", pt__pressure_name(s.pressure), "memory",
        s.kind == CG_MEM_KIND_DEVICE ? "device" : "host", "free_bytes",
        (unsigned long long)s.free_bytes, "total_bytes",
        (unsigned long long)s.total_bytes, "reserve_bytes",
        (unsigned long long)s.reserve_bytes, "budget_bytes",
        (unsigned long long)s.budget_bytes, "fusion_bytes",
        (unsigned long long)s.fusion_bytes, "chunk_bytes",
        (unsigned long long)s.chunk_bytes, "nccl_buffsize",
        (unsigned long long)s.nccl_buffsize, "oom_eta_s", eta,
        "alloc_failures", (unsigned long long)s.alloc_failures,
        "early_warnings", (unsigned long long)s.early_warnings,
        "fusion_current_bytes",
        (unsigned long long)s.current_bytes[CG_MEM_CAT_FUSION], "degrades",
        (unsigned long long)s.degrades, "device", s.device, "peak_bytes",
        peak, "current_bytes", current, "device_peak_bytes", dpeak,
        "device_current_bytes", dcurrent);
}

/* () -> None: peaks count from now on (cg_ctx_governor_reset_peaks). */
PyObject *pt_memory_reset_peaks(PyObject *self, PyObject *args)
{
    cg_ctx_h ctx = cg_hvd_global_ctx();

    (void)self;
    (void)args;
    if (ctx == NULL) {
        PyErr_SetString(PyExc_ValueError, "collguard: Horovod has not been "
                        "initialized; use hvd.init().");
        return NULL;
    }
    if (cg_ctx_governor_reset_peaks(ctx) != CG_OK) {
        PyErr_Format(PyExc_RuntimeError, "collguard: %s", cg_last_error());
        return NULL;
    }
    Py_RETURN_NONE;
}

/* () -> dict of cg_hvd_stats_t. */
PyObject *pt_core_stats(PyObject *self, PyObject *args)
{
    cg_hvd_core_h core = pt_core();
    cg_hvd_stats_t s;

    (void)self;
    (void)args;
    if (core == NULL)
        return NULL;
    cg_hvd_core_stats(core, &s);
    /* A table, not one format string: a key cannot lose its value. */
#define PT__K(f) {#f, offsetof(cg_hvd_stats_t, f)}
    static const struct {
        const char *name;
        size_t off; /* of a uint64_t */
    } keys[] = {
        PT__K(cycles), PT__K(allreduce_calls), PT__K(allreduce_tensors),
        PT__K(fused_calls), PT__K(max_fused_tensors), PT__K(duplicates),
        PT__K(mismatches), PT__K(fusion_bytes), PT__K(fused_bytes),
        PT__K(cache_hits), PT__K(full_rounds), PT__K(allgather_calls),
        PT__K(allgather_tensors), PT__K(execute_ns), PT__K(grouped_calls),
        PT__K(alltoall_calls), PT__K(alltoall_bytes),
        PT__K(stage_chunk_bytes), PT__K(stage_slot_bytes), PT__K(waits),
        PT__K(wait_sleeps), PT__K(spin_ns), PT__K(wait_spins),
        PT__K(gpu_backend), PT__K(nccl_estimate_bytes),
        PT__K(nccl_budget_bytes), PT__K(nccl_create_bytes),
        PT__K(nccl_fallbacks)};
#undef PT__K
    PyObject *d = PyDict_New();

    for (size_t i = 0; d != NULL && i < sizeof(keys) / sizeof(keys[0]); i++) {
        uint64_t v;
        memcpy(&v, (const char *)&s + keys[i].off, sizeof(v));
        PyObject *o = PyLong_FromUnsignedLongLong((unsigned long long)v);
        if (o == NULL || PyDict_SetItemString(d, keys[i].name, o) != 0) {
            Py_XDECREF(o);
            Py_CLEAR(d);
            break;
        }
        Py_DECREF(o);
    }
    return d;
}
