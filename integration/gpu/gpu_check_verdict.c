/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpu_check's outcomes (integration/gpu/gpu_check.c): a setup error that
 * ends the run, a case's verdict and its first reason, a wrong element
 * reported, the ranks' agreement on a verdict (a MAX allreduce of host
 * int32 through the core) and a case's row on rank 0, with the counts.
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "integration/gpu/gpu_check_impl.h"

void gc_fatal(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "gpu_check: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(1);
}

void gc_cuda_or_die(cudaError_t err, const char *what)
{
    if (err != cudaSuccess)
        gc_fatal("%s: %s", what, cudaGetErrorString(err));
}

void gc_note(outcome_t *o, int verdict, const char *fmt, ...)
{
    va_list ap;

    if (verdict > o->verdict || o->why[0] == '\0') {
        va_start(ap, fmt);
        vsnprintf(o->why, sizeof(o->why), fmt, ap);
        va_end(ap);
    }
    if (verdict > o->verdict)
        o->verdict = verdict;
}

void gc_mismatch(gc_t *g, outcome_t *o, const char *name,
                 const spec_t *s, size_t i, double got, double want)
{
    if (g->shown++ < 8)
        fprintf(stderr, "rank %d: %s (%s) [%zu] = %.17g, want %.17g\n",
                g->rank, name, cg_dtype_name(s->dt), i, got, want);
    gc_note(o, V_WRONG, "%s [%zu] = %g, want %g", name, i, got, want);
}

/* n int32 values, each set to its maximum over the ranks, through the
 * core (a host tensor). 0, or -1 when the core failed it. */
int gc_agree_max(gc_t *g, int32_t *v, int n)
{
    cg_hvd_tensor_t t = {.name = "gc.agree", .dtype = CG_DTYPE_I32,
                         .ndim = 1, .shape = {n}, .input = v, .output = v,
                         .flags = CG_HVD_IS_LEAF, .device = -1};
    cg_hvd_req_h req;
    cg_status_t st = cg_hvd_enqueue_allreduce(g->core, &t, CG_OP_MAX, 1.0,
                                              1.0, &req);

    if (st != CG_OK) {
        fprintf(stderr, "rank %d: agreeing on a verdict: %s\n", g->rank,
                cg_last_error());
        return -1;
    }
    st = cg_hvd_wait(req);
    if (st != CG_OK)
        fprintf(stderr, "rank %d: agreeing on a verdict: %s\n", g->rank,
                cg_hvd_error(req));
    cg_hvd_release(req);
    return st == CG_OK ? 0 : -1;
}

/* Agrees on the worst verdict of the ranks, prints rank 0's row, counts.
 * A core that cannot agree any more ends the run. */
int gc_report(gc_t *g, const char *cname, const char *dtype,
              const char *op, const outcome_t *o, double ms)
{
    int32_t v = o->verdict;
    static const char *const word[] = {"ok", "refused", "WRONG"};

    if (gc_agree_max(g, &v, 1) != 0)
        gc_fatal("rank %d: the core stopped during %s (%s)", g->rank, cname,
                 o->why[0] ? o->why : "no error seen here");
    g->cases++;
    g->wrong += v == V_WRONG;
    g->refused += v == V_REFUSED;
    if (g->rank == 0) {
        printf("%-9s %5d  %-22s %-5s %-8s %9zu  %-7s %9.3f", g->backend,
               g->size, cname, dtype, op, o->elems, word[v], ms);
        if (v != V_OK)
            printf("  %s", o->why[0] ? o->why : "(on another rank)");
        printf("\n");
    }
    return v;
}
