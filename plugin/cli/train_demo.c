/* SPDX-License-Identifier: Apache-2.0 */
/*
 * collguard-train-demo: a data-parallel training loop through the Horovod
 * shim's core, run under any launcher (mpirun, collguard-run, torchrun,
 * horovodrun). Rank 0's parameters are broadcast at step 0; every step
 * then averages a transformer's gradients (enqueue all, wait all) and
 * checks every element against a closed-form reference. Mid-run the
 * memory the governor sees is squeezed (an application probe,
 * CG_CTX_PARAM_PROBE, withholds a ballast from the real host reading) and
 * released, the same steps on every rank; rank 0 prints a row per step.
 * Layer: plugin (a command over the public API and core/context.h).
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "collguard/collguard.h"
#include "collguard/hvd.h"
#include "core/base/parse.h"
#include "core/context.h"
#include "plugin/cli/train_model.h"

typedef struct {
    int steps, layers, hidden, vocab;
    int compute_ms;   /* the forward/backward pass a step stands for */
    int corrupt_step; /* testing: the last rank spoils an element then */
    const char *out;
} cg__opts_t;

/* The squeeze: level 0 none, 1 free memory held between the WARN and
 * CRITICAL thresholds, 2 below CRITICAL. Read by the governor's samples
 * on any thread. */
typedef struct {
    atomic_int level;
    atomic_uint_fast64_t ballast;  /* bytes withheld at the last sample */
    cg_size_or_frac_t warn, critical; /* CG_PRESSURE_WARN / _CRITICAL */
    atomic_uint_fast64_t total;    /* total at the last sample */
} cg__squeeze_t;

static cg_status_t cg__squeezed_probe(void *arg, uint64_t *free_p,
                                      uint64_t *total_p)
{
    cg__squeeze_t *sq = arg;
    int level = atomic_load(&sq->level);
    uint64_t target = *free_p, ballast = 0;
    uint64_t warn = cg_config_resolve_size(&sq->warn, *total_p);
    uint64_t critical = cg_config_resolve_size(&sq->critical, *total_p);

    atomic_store(&sq->total, *total_p);
    if (level == 1)
        target = warn > critical ? critical + (warn - critical) / 2
                                 : critical;
    else if (level == 2)
        target = critical / 2;
    if (*free_p > target)
        ballast = *free_p - target;
    *free_p -= ballast;
    atomic_store(&sq->ballast, ballast);
    return CG_OK;
}

/* Squeeze level of step s (1..steps): WARN from a fifth of the run,
 * CRITICAL from a third, released at half, so the second half shows the
 * recovery (CG_PRESSURE_DWELL, then sizes doubling back per sample). */
static int cg__squeeze_at(int s, int steps)
{
    if (s >= steps / 2 || s < steps / 5)
        return 0;
    return s >= steps / 3 ? 2 : 1;
}

static double cg__now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cg__parse(int argc, char **argv, cg__opts_t *o)
{
    memset(o, 0, sizeof(*o));
    o->steps = 30;
    o->layers = 6;
    o->hidden = 256;
    o->vocab = 8192;
    o->compute_ms = 100;
    o->out = "/tmp/collguard-demo";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int64_t n;
        if (strcmp(a, "--out") == 0 && v != NULL) {
            o->out = v;
        } else if (strcmp(a, "--steps") == 0 && v != NULL &&
                   cg_parse_int(v, 6, 100000, &n)) {
            o->steps = (int)n;
        } else if (strcmp(a, "--layers") == 0 && v != NULL &&
                   cg_parse_int(v, 0, 1000, &n)) {
            o->layers = (int)n;
        } else if (strcmp(a, "--hidden") == 0 && v != NULL &&
                   cg_parse_int(v, 8, 16384, &n)) {
            o->hidden = (int)n;
        } else if (strcmp(a, "--compute-ms") == 0 && v != NULL &&
                   cg_parse_int(v, 0, 60000, &n)) {
            o->compute_ms = (int)n;
        } else if (strcmp(a, "--corrupt-step") == 0 && v != NULL &&
                   cg_parse_int(v, 1, 100000, &n)) {
            o->corrupt_step = (int)n;
        } else {
            fprintf(stderr, "usage: collguard-train-demo [--steps N>=6] "
                    "[--layers L] [--hidden H] [--compute-ms MS] "
                    "[--out DIR] [--corrupt-step S]\n");
            return -1;
        }
        i++;
    }
    return 0;
}

/* Where the timeline and the metrics file go unless the user chose. */
static int cg__default_outputs(const cg__opts_t *o)
{
    char path[4096];

    if (mkdir(o->out, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "collguard-train-demo: cannot create %s: %s\n",
                o->out, strerror(errno));
        return -1;
    }
    snprintf(path, sizeof(path), "%s/metrics.rank%%r.prom", o->out);
    setenv("CG_METRICS_FILE", path, 0);
    snprintf(path, sizeof(path), "%s/timeline.json", o->out);
    if (getenv("CG_TIMELINE") == NULL) /* CG_TIMELINE wins when set */
        setenv("HOROVOD_TIMELINE", path, 0);
    /* The table shows the governor's reactions; its log lines from every
     * rank would interleave with it (CG_LOG_LEVEL=warn shows them). */
    setenv("CG_LOG_LEVEL", "error", 0);
    return 0;
}

static cg_status_t cg__enqueue_all(cg_hvd_core_h core, cg_demo_model_t *m,
                                   int bcast)
{
    for (int t = 0; t < m->n; t++) {
        cg_demo_tensor_t *d = &m->t[t];
        char name[128];
        cg_hvd_tensor_t x = {0};
        cg_status_t st;

        snprintf(name, sizeof(name), "%s.%s", bcast ? "broadcast" :
                 "allreduce", d->name);
        x.name = name;
        x.dtype = CG_DTYPE_F32;
        x.ndim = d->ndim;
        x.shape[0] = d->shape[0];
        x.shape[1] = d->shape[1];
        x.input = x.output = bcast ? d->param : d->grad;
        x.flags = CG_HVD_REQUIRES_GRAD | CG_HVD_IS_LEAF;
        x.device = -1;
        st = bcast ? cg_hvd_enqueue_broadcast(core, &x, 0,
                                              (cg_hvd_req_h *)&d->req)
                   : cg_hvd_enqueue_allreduce(core, &x, CG_OP_AVG, 1.0, 1.0,
                                              (cg_hvd_req_h *)&d->req);
        if (st != CG_OK) {
            fprintf(stderr, "enqueue %s: %s\n", name, cg_last_error());
            return st;
        }
    }
    return CG_OK;
}

static cg_status_t cg__wait_all(cg_demo_model_t *m)
{
    cg_status_t first = CG_OK;

    for (int t = 0; t < m->n; t++) {
        cg_hvd_req_h r = m->t[t].req;
        cg_status_t st = cg_hvd_wait(r);
        if (st != CG_OK && first == CG_OK) {
            fprintf(stderr, "%s: %s\n", m->t[t].name, cg_hvd_error(r));
            first = st;
        }
        cg_hvd_release(r);
        m->t[t].req = NULL;
    }
    return first;
}

/* Wrong elements summed over ranks (an int64 allreduce through the shim),
 * so every rank reports the job's verdict, not only its own. */
static uint64_t cg__agree_bad(cg_hvd_core_h core, int step, uint64_t bad,
                              cg_status_t *st)
{
    int64_t v = (int64_t)bad;
    char name[64];
    cg_hvd_tensor_t x = {0};
    cg_hvd_req_h req;

    if (*st != CG_OK)
        return bad;
    snprintf(name, sizeof(name), "demo.wrong_elements.step%d", step);
    x.name = name;
    x.dtype = CG_DTYPE_I64;
    x.ndim = 0;
    x.input = x.output = &v;
    x.device = -1;
    *st = cg_hvd_enqueue_allreduce(core, &x, CG_OP_SUM, 1.0, 1.0, &req);
    if (*st != CG_OK) {
        fprintf(stderr, "enqueue %s: %s\n", name, cg_last_error());
        return bad;
    }
    *st = cg_hvd_wait(req);
    if (*st != CG_OK)
        fprintf(stderr, "%s: %s\n", name, cg_hvd_error(req));
    cg_hvd_release(req);
    return *st == CG_OK ? (uint64_t)v : bad;
}

static void cg__header(int rank, int size, const cg_demo_model_t *m,
                       const cg__opts_t *o, const cg__squeeze_t *sq)
{
    int s = 1, w, c, r;
    uint64_t total, warn, critical;
    char b[32], fw[32], fc[32];

    if (rank != 0)
        return;
    while (cg__squeeze_at(s, o->steps) == 0 && s < o->steps)
        s++;
    for (w = s; cg__squeeze_at(w, o->steps) == 1; w++)
        ;
    for (c = w; cg__squeeze_at(c, o->steps) == 2; c++)
        ;
    r = c;
    printf("collguard-train-demo: %d ranks, %d tensors, %s of float32 "
           "gradients averaged per step (%d ms of compute stand-in each)\n",
           size, m->n, cg_format_size(m->elems * 4, b, sizeof(b)),
           o->compute_ms);
    total = atomic_load(&sq->total);
    warn = cg_config_resolve_size(&sq->warn, total);
    critical = cg_config_resolve_size(&sq->critical, total);
    printf("squeeze: the probe withholds a ballast from the real free "
           "memory: steps %d-%d leave %s free (warn), %d-%d %s (critical), "
           "released from step %d\n", s, w - 1,
           cg_format_size(warn > critical ? critical + (warn - critical) / 2
                                          : critical,
                          fw, sizeof(fw)),
           w, c - 1, cg_format_size(critical / 2, fc, sizeof(fc)), r);
    printf("%4s %10s %-8s %6s %5s %5s %10s %10s %9s %8s %7s %s\n", "step",
           "ballast", "pressure", "tensor", "calls", "fused", "fused-MiB",
           "fusion", "chunk", "ms", "busbw", "check");
}

/* One step of averaged gradients; rank 0 prints its row. Returns the
 * wrong elements of all ranks; this rank's are added to *mine_p (the
 * first described in err); *st a failed request. */
static uint64_t cg__step(cg_hvd_core_h core, cg_ctx_h ctx, cg_demo_model_t *m,
                       cg__squeeze_t *sq, const cg__opts_t *o, int s,
                       cg_status_t *st, uint64_t *mine_p, char *err,
                       size_t errlen)
{
    int rank = cg_hvd_core_rank(core), size = cg_hvd_core_size(core);
    cg_hvd_stats_t a, b;
    cg_governor_snapshot_t snap;
    char c[3][32], fused[32];
    double t0, dt, busbw;
    uint64_t bad, all_bad;

    atomic_store(&sq->level, cg__squeeze_at(s, o->steps));
    /* The governor sees the step's memory now, not at its next tick. */
    (void)cg_ctx_governor_snapshot(ctx, &snap);
    cg_demo_fill_grads(m, rank, s);
    if (o->compute_ms > 0) /* the backward pass that made the gradients */
        nanosleep(&(struct timespec){o->compute_ms / 1000,
                                     (o->compute_ms % 1000) * 1000000L},
                  NULL);
    cg_hvd_core_stats(core, &a);
    t0 = cg__now_s();
    *st = cg__enqueue_all(core, m, 0);
    if (*st == CG_OK)
        *st = cg__wait_all(m);
    dt = cg__now_s() - t0;
    if (s == o->corrupt_step && rank == size - 1 && m->n > 0)
        m->t[m->n - 1].grad[0] += 1.0f; /* proves the check can fail */
    cg_hvd_core_stats(core, &b);
    bad = *st == CG_OK ? cg_demo_check_grads(m, size, s, err, errlen) : 0;
    *mine_p += bad;
    all_bad = cg__agree_bad(core, s, bad, st);
    if (rank != 0)
        return all_bad;
    (void)cg_ctx_governor_snapshot(ctx, &snap);
    busbw = (double)m->elems * 4 / dt * 2 * (size - 1) / size / 1e9;
    snprintf(fused, sizeof(fused), "%.1f",
             (double)(b.fused_bytes - a.fused_bytes) / (1 << 20));
    printf("%4d %10s %-8s %6llu %5llu %5llu %10s %10s %9s %8.1f %7.2f %s\n",
           s, cg_format_size(atomic_load(&sq->ballast), c[0], 32),
           cg_pressure_name(snap.pressure),
           (unsigned long long)(b.allreduce_tensors - a.allreduce_tensors),
           (unsigned long long)(b.allreduce_calls - a.allreduce_calls),
           (unsigned long long)(b.fused_calls - a.fused_calls), fused,
           cg_format_size(b.fusion_bytes, c[1], 32),
           cg_format_size(snap.chunk_bytes, c[2], 32), dt * 1e3, busbw,
           *st != CG_OK ? "FAILED" : all_bad ? "WRONG" : "exact");
    return all_bad;
}

/* Rank 0 says where the outputs are; every rank checks its metrics file. */
static int cg__report_outputs(int rank)
{
    const char *tpl = getenv("CG_METRICS_FILE"), *tl;
    char path[4096], line[64] = "";
    size_t n = 0;
    FILE *f;

    for (const char *p = tpl; *p != '\0' && n + 12 < sizeof(path); p++) {
        if (p[0] == '%' && p[1] == 'r')
            n += (size_t)snprintf(path + n, sizeof(path) - n, "%d", rank);
        else
            path[n++] = *p;
        p += p[0] == '%';
    }
    path[n] = '\0';
    f = fopen(path, "r");
    if (f == NULL || fgets(line, sizeof(line), f) == NULL ||
        strncmp(line, "# HELP collguard_", 17) != 0) {
        fprintf(stderr, "collguard-train-demo: rank %d: metrics file %s is "
                "missing or not Prometheus text\n", rank, path);
        if (f != NULL)
            fclose(f);
        return -1;
    }
    fclose(f);
    if (rank != 0)
        return 0;
    printf("metrics: %s (one file per rank, %%r = rank; Prometheus text "
           "for node_exporter's textfile collector)\n", tpl);
    tl = getenv("CG_TIMELINE") != NULL ? getenv("CG_TIMELINE")
                                       : getenv("HOROVOD_TIMELINE");
    if (tl != NULL && tl[0] != '\0' && strcmp(tl, "DYNAMIC") != 0) {
        struct stat sb;
        if (stat(tl, &sb) == 0)
            printf("timeline: %s (%lld bytes; open it in chrome://tracing "
                   "or ui.perfetto.dev)\n", tl, (long long)sb.st_size);
        else
            printf("timeline: %s was not written (this build has no "
                   "HOROVOD_TIMELINE support)\n", tl);
    }
    return 0;
}

int main(int argc, char **argv)
{
    cg__opts_t o;
    cg__squeeze_t sq = {0};
    cg_ctx_params_t cp = {0};
    cg_demo_model_t m;
    cg_hvd_core_h core;
    cg_ctx_h ctx;
    cg_status_t st = CG_OK;
    uint64_t mine = 0, job = 0;
    char err[256] = "";
    int rank, failed = 0;

    setvbuf(stdout, NULL, _IOLBF, 0);
    if (cg__parse(argc, argv, &o) != 0 || cg__default_outputs(&o) != 0)
        return 2;
    cp.field_mask = CG_CTX_PARAM_BOOTSTRAP | CG_CTX_PARAM_PROBE;
    cp.bootstrap = 1;
    cp.probe_fn = cg__squeezed_probe;
    cp.probe_arg = &sq;
    if (cg_ctx_create(&cp, &ctx) != CG_OK) {
        fprintf(stderr, "collguard-train-demo: %s\n", cg_last_error());
        return 1;
    }
    sq.warn = ctx->cfg.pressure_warn;
    sq.critical = ctx->cfg.pressure_critical;
    if (cg_hvd_core_create(ctx, &core) != CG_OK) {
        fprintf(stderr, "collguard-train-demo: %s\n", cg_last_error());
        cg_ctx_destroy(ctx);
        return 1;
    }
    rank = cg_hvd_core_rank(core);
    if (cg_demo_model_build(&m, o.layers, o.hidden, o.vocab, rank) != 0) {
        fprintf(stderr, "collguard-train-demo: out of memory for the "
                "model\n");
        cg_hvd_core_destroy(core);
        cg_ctx_destroy(ctx);
        return 1;
    }
    cg__header(rank, cg_hvd_core_size(core), &m, &o, &sq);
    st = cg__enqueue_all(core, &m, 1);
    if (st == CG_OK)
        st = cg__wait_all(&m);
    mine = st == CG_OK ? cg_demo_check_params(&m, err, sizeof(err)) : 0;
    job = cg__agree_bad(core, 0, mine, &st);
    if (rank == 0)
        printf("%4d %10s parameters broadcast from rank 0: %s\n", 0, "",
               st != CG_OK ? "FAILED" : job ? "WRONG" : "exact");
    for (int s = 1; s <= o.steps && st == CG_OK; s++)
        job += cg__step(core, ctx, &m, &sq, &o, s, &st, &mine,
                        mine ? NULL : err, mine ? 0 : sizeof(err));
    if (mine != 0)
        fprintf(stderr, "collguard-train-demo: rank %d: %llu wrong "
                "elements; first: %s\n", rank, (unsigned long long)mine,
                err);
    failed = st != CG_OK || job != 0;
    if (rank == 0 && failed)
        printf("FAILED: %llu wrong elements over all ranks, status %s\n",
               (unsigned long long)job, cg_status_name(st));
    else if (rank == 0)
        printf("every element of %d steps x %zu gradients on every rank "
               "matched the reference\n", o.steps, m.elems);
    cg_demo_model_free(&m);
    cg_hvd_core_destroy(core); /* writes the metrics file a last time */
    cg_ctx_destroy(ctx);
    if (cg__report_outputs(rank) != 0)
        failed = 1;
    return failed ? 1 : 0;
}
