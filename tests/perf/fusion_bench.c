/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fusion_bench (tests/perf/fusion): steps of N allreduces of small f32
 * tensors through the Horovod shim's C enqueue API (enqueue all, then wait
 * all), with fusion and with fusion off (CG_FUSION_THRESHOLD=0), next to N
 * plain MPI_Allreduce calls and one cg_allreduce of the fused payload, in
 * the same run under mpirun, variants alternating in rounds. Prints median
 * ms/step, steps/s, the speed-up over MPI and the shim's per-tensor cost;
 * "spin off" is the fused shim with CG_SPIN_TIME=0 (every hand-off between
 * the caller and the background thread through a condition variable);
 * checks every element of a few tensors every step (exit 1 when wrong).
 * Usage: mpirun -np 2 fusion_bench [-n 1000] [-s 4K] [-i 20] [-w 3] [-r 5]
 *                                  [-c 4] [-x fusmp]
 */
#include <mpi.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "collguard/hvd.h"
#include "core/base/error.h"
#include "core/base/parse.h"
#include "core/coll/coll.h"
#include "core/coll/comm.h"
#include "core/context.h"

extern char **environ;

enum { V_FUSED, V_UNFUSED, V_NOSPIN, V_MPI, V_PLAIN, V_COUNT };
static const char *const v_names[V_COUNT] = {
    "shim, fusion", "shim, fusion off", "shim, spin off",
    "MPI_Allreduce x N", "cg_allreduce x 1"};
#define V_SHIMS 3 /* variants below this one run through a shim core */

typedef struct opts {
    int n, steps, warmup, rounds, checked;
    unsigned variants; /* bit v: run variant v */
    size_t count; /* f32 elements per tensor */
} opts_t;

typedef struct samples {
    double *step, *enq, *wait; /* seconds, one per measured step */
    double *cpu;               /* process CPU seconds (all threads) */
    int len;
    uint64_t calls, tensors, cycles; /* core stats summed over rounds */
    uint64_t neg_ns, exec_ns; /* the core's thread, measured steps only */
} samples_t;

typedef struct bench {
    opts_t o;
    int rank, size;
    cg_ctx_h ctx[V_SHIMS]; /* fusion on, fusion off, spin off */
    cg_transport_t *tp;
    cg_comm_t *comm; /* the plain allreduce's */
    float *in, *out; /* n tensors of count, back to back */
    char (*names)[32];
    cg_hvd_req_h *reqs;
    long wrong;
    int seq; /* global step number: stale results cannot pass */
    samples_t s[V_COUNT];
} bench_t;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int fail(const char *what, cg_status_t st)
{
    fprintf(stderr, "fusion_bench: %s: %s: %s\n", what, cg_status_name(st),
            cg_last_error());
    return 2;
}

static void usage(void)
{
    fprintf(stderr, "usage: mpirun -np 2 fusion_bench [-n tensors] "
            "[-s tensor bytes] [-i steps per round] [-w warm-up steps] "
            "[-r rounds] [-c tensors checked per step] [-x fusmp: variants "
            "fused, unfused, spin off, MPI, plain (default all)]\n");
    exit(2);
}

static int int_arg(const char *s)
{
    int64_t v;

    if (!cg_parse_int(s, 0, 1 << 24, &v))
        usage();
    return (int)v;
}

static void parse(int argc, char **argv, opts_t *o)
{
    uint64_t bytes = 4096;
    int c;

    *o = (opts_t){1000, 20, 3, 5, 4, (1u << V_COUNT) - 1, 0};
    while ((c = getopt(argc, argv, "n:s:i:w:r:c:x:")) != -1) {
        switch (c) {
        case 'n': o->n = int_arg(optarg); break;
        case 's':
            if (!cg_parse_size(optarg, &bytes))
                usage();
            break;
        case 'i': o->steps = int_arg(optarg); break;
        case 'w': o->warmup = int_arg(optarg); break;
        case 'r': o->rounds = int_arg(optarg); break;
        case 'c': o->checked = int_arg(optarg); break;
        case 'x':
            o->variants = 0;
            for (const char *p = optarg; *p != '\0'; p++) {
                const char *at = strchr("fusmp", *p);
                if (at == NULL)
                    usage();
                o->variants |= 1u << (at - "fusmp");
            }
            break;
        default: usage();
        }
    }
    o->count = bytes / sizeof(float);
    if (o->n < 1 || o->count < 1 || o->steps < 1 || o->warmup < 0 ||
        o->rounds < 1 || o->checked < 0)
        usage();
    if (o->checked > o->n)
        o->checked = o->n;
}

/* Element i of tensor k at step seq on rank r: (r + 1) * v, v < 251, so
 * every sum is an exact small integer in f32. */
static float value(int k, size_t i, int seq)
{
    return (float)(((size_t)k * 7 + i + (size_t)seq * 13) % 251);
}

static int checked_tensor(const bench_t *b, int j)
{
    return (int)(((long)b->seq * 131 + (long)j * (b->o.n / b->o.checked)) %
                 b->o.n);
}

/* Fresh inputs and poisoned outputs for the tensors checked this step. */
static void prepare(bench_t *b)
{
    b->seq++;
    for (int j = 0; j < b->o.checked; j++) {
        int k = checked_tensor(b, j);
        float *in = b->in + (size_t)k * b->o.count;
        float *out = b->out + (size_t)k * b->o.count;
        for (size_t i = 0; i < b->o.count; i++) {
            in[i] = (float)(b->rank + 1) * value(k, i, b->seq);
            out[i] = -1.0f;
        }
    }
}

static void verify(bench_t *b, int v)
{
    float ranks = (float)(b->size * (b->size + 1) / 2);

    for (int j = 0; j < b->o.checked; j++) {
        int k = checked_tensor(b, j);
        const float *out = b->out + (size_t)k * b->o.count;
        for (size_t i = 0; i < b->o.count; i++) {
            float want = ranks * value(k, i, b->seq);
            if (out[i] == want)
                continue;
            if (b->wrong++ < 5)
                fprintf(stderr, "rank %d: %s, step %d: tensor %d element %zu"
                        " is %g, expected %g\n", b->rank, v_names[v], b->seq,
                        k, i, out[i], want);
        }
    }
}

/* One step through the shim: enqueue all, then wait and release all. */
static int step_shim(bench_t *b, cg_hvd_core_h core, double t[3])
{
    cg_status_t st;

    t[0] = now_s();
    for (int k = 0; k < b->o.n; k++) {
        cg_hvd_tensor_t tn = {.name = b->names[k], .dtype = CG_DTYPE_F32,
                              .ndim = 1, .shape = {(int64_t)b->o.count},
                              .input = b->in + (size_t)k * b->o.count,
                              .output = b->out + (size_t)k * b->o.count};
        st = cg_hvd_enqueue_allreduce(core, &tn, CG_OP_SUM, 1.0, 1.0,
                                      &b->reqs[k]);
        if (st != CG_OK)
            return fail("cg_hvd_enqueue_allreduce", st);
    }
    t[1] = now_s();
    for (int k = 0; k < b->o.n; k++) {
        st = cg_hvd_wait(b->reqs[k]);
        if (st != CG_OK) {
            fprintf(stderr, "fusion_bench: %s: %s\n", b->names[k],
                    cg_hvd_error(b->reqs[k]));
            return 2;
        }
        cg_hvd_release(b->reqs[k]);
    }
    t[2] = now_s();
    return 0;
}

static int step_other(bench_t *b, int v, double t[3])
{
    cg_status_t st;

    t[0] = now_s();
    if (v == V_PLAIN) {
        st = cg_allreduce(b->comm, b->in, b->out, b->o.count * b->o.n,
                          CG_DTYPE_F32, CG_OP_SUM, 1.0, 1.0);
        if (st != CG_OK)
            return fail("cg_allreduce", st);
    }
    for (int k = 0; v == V_MPI && k < b->o.n; k++)
        if (MPI_Allreduce(b->in + (size_t)k * b->o.count,
                          b->out + (size_t)k * b->o.count, (int)b->o.count,
                          MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD) != MPI_SUCCESS)
            return fail("MPI_Allreduce", CG_ERR_IO);
    t[1] = t[2] = now_s();
    return 0;
}

/* One round of variant v: warm-up steps, then measured ones. */
static int round_run(bench_t *b, int v)
{
    samples_t *s = &b->s[v];
    cg_hvd_core_h core = NULL;
    cg_hvd_stats_t stats;
    cg_status_t st;
    double t[3], c0;
    int rc = 0;

    if (v < V_SHIMS) {
        st = cg_hvd_core_create(b->ctx[v], &core);
        if (st != CG_OK)
            return fail("cg_hvd_core_create", st);
    }
    for (int i = 0; i < b->o.warmup + b->o.steps && rc == 0; i++) {
        if (core != NULL && i == b->o.warmup) { /* measured from here */
            cg_hvd_core_stats(core, &stats);
            s->neg_ns -= stats.negotiate_ns;
            s->exec_ns -= stats.execute_ns;
        }
        prepare(b);
        MPI_Barrier(MPI_COMM_WORLD);
        c0 = cpu_s();
        rc = core != NULL ? step_shim(b, core, t) : step_other(b, v, t);
        s->cpu[s->len] = cpu_s() - c0;
        if (rc != 0)
            break;
        verify(b, v);
        if (i < b->o.warmup)
            continue;
        s->step[s->len] = t[2] - t[0];
        s->enq[s->len] = t[1] - t[0];
        s->wait[s->len++] = t[2] - t[1];
    }
    if (core != NULL) {
        cg_hvd_core_stats(core, &stats);
        s->calls += stats.allreduce_calls;
        s->tensors += stats.allreduce_tensors;
        s->cycles += stats.cycles;
        s->neg_ns += stats.negotiate_ns;
        s->exec_ns += stats.execute_ns;
        cg_hvd_core_destroy(core);
    }
    return rc;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median over this rank's samples, then the largest over ranks. */
static double median_max(double *x, int len)
{
    double m, all;

    qsort(x, (size_t)len, sizeof(*x), cmp_double);
    m = len % 2 ? x[len / 2] : (x[len / 2 - 1] + x[len / 2]) / 2;
    MPI_Allreduce(&m, &all, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return all;
}

static bool has(const bench_t *b, int v)
{
    return (b->o.variants >> v) & 1u;
}

static void report(bench_t *b)
{
    double ms[V_COUNT] = {0}, enq[V_COUNT] = {0}, wait[V_COUNT] = {0};
    double cpu[V_COUNT] = {0};
    double n = b->o.n, mib = n * (double)b->o.count * sizeof(float) / 1048576;

    for (int v = 0; v < V_COUNT; v++) {
        if (!has(b, v))
            continue;
        ms[v] = median_max(b->s[v].step, b->s[v].len) * 1e3;
        enq[v] = median_max(b->s[v].enq, b->s[v].len) * 1e3;
        wait[v] = median_max(b->s[v].wait, b->s[v].len) * 1e3;
        cpu[v] = median_max(b->s[v].cpu, b->s[v].len) * 1e6;
    }
    if (b->rank != 0)
        return;
    printf("# fusion: %d ranks, %d f32 tensors x %zu B per step (%.2f MiB), "
           "%d rounds x %d steps (+%d warm-up), medians, slowest rank\n",
           b->size, b->o.n, b->o.count * sizeof(float), mib, b->o.rounds,
           b->o.steps, b->o.warmup);
    printf("%-20s %9s %9s %7s %9s %12s %8s %10s\n", "# variant", "ms/step",
           "steps/s", "vs_mpi", "cpu_us/t", "enqueue_us/t", "wait_ms",
           "tensors/op");
    for (int v = 0; v < V_COUNT; v++) {
        samples_t *s = &b->s[v];
        if (!has(b, v))
            continue;
        printf("%-20s %9.3f %9.1f %6.2fx %9.3f", v_names[v], ms[v],
               1e3 / ms[v], has(b, V_MPI) ? ms[V_MPI] / ms[v] : 0.0,
               cpu[v] / n);
        if (v < V_SHIMS)
            printf(" %12.3f %8.3f %10.1f", enq[v] * 1e3 / n, wait[v],
                   s->calls ? (double)s->tensors / (double)s->calls : 0.0);
        printf("\n");
    }
    if (has(b, V_FUSED) && has(b, V_PLAIN))
        printf("# per-tensor overhead of the shim, (fused step - one %.2f MiB "
               "cg_allreduce) / %d: %.3f us (target < 2 us)\n", mib, b->o.n,
               (ms[V_FUSED] - ms[V_PLAIN]) * 1e3 / n);
    if (has(b, V_FUSED) && has(b, V_MPI))
        printf("# fused step vs %d MPI_Allreduce: %.2fx faster (target >= "
               "3x)\n", b->o.n, ms[V_MPI] / ms[V_FUSED]);
    if (has(b, V_FUSED) && has(b, V_UNFUSED))
        printf("# fusion on vs off: %.2fx\n", ms[V_UNFUSED] / ms[V_FUSED]);
    if (has(b, V_FUSED) && has(b, V_NOSPIN))
        printf("# spin (CG_SPIN_TIME=%s; off with too few CPUs, see the core's "
               "INFO line) vs spin off: %.2fx faster; the "
               "shim beyond cg_allreduce: %.3f vs %.3f us per step\n",
               getenv("CG_SPIN_TIME") ? getenv("CG_SPIN_TIME") : "default",
               ms[V_NOSPIN] / ms[V_FUSED],
               has(b, V_PLAIN) ? (ms[V_FUSED] - ms[V_PLAIN]) * 1e3 : 0.0,
               has(b, V_PLAIN) ? (ms[V_NOSPIN] - ms[V_PLAIN]) * 1e3 : 0.0);
    if (has(b, V_FUSED)) {
        const samples_t *f = &b->s[V_FUSED];
        double steps = (double)b->o.rounds * b->o.steps;
        printf("# fused step, rank 0's background thread (means, waits "
               "for the other ranks included): negotiation %.1f us, "
               "execution %.1f us (copies, collective, completion); enqueue "
               "%.1f us on the caller's thread\n",
               (double)f->neg_ns / steps / 1e3,
               (double)f->exec_ns / steps / 1e3, enq[V_FUSED] * 1e3);
    }
    if (has(b, V_FUSED))
        printf("# cycles per fused step: %.1f (CG_CYCLE_TIME)\n",
               (double)b->s[V_FUSED].cycles /
                   (double)(b->o.rounds * (b->o.steps + b->o.warmup)));
    printf("# results: %s\n", b->wrong ? "WRONG" : "all checked elements "
                                                   "exact");
}

/* A context over the process environment, with `over` in front (the
 * first of a name wins): loopback unless the user named interfaces. */
static int ctx_make(const char *over, cg_ctx_h *ctx_p)
{
    size_t n = 0;
    const char **env;
    cg_status_t st;

    while (environ[n] != NULL)
        n++;
    env = calloc(n + 3, sizeof(*env));
    if (env == NULL)
        return fail("calloc", CG_ERR_NO_MEMORY);
    n = 0;
    if (over != NULL)
        env[n++] = over;
    if (getenv("CG_SOCKET_IFNAME") == NULL &&
        getenv("NCCL_SOCKET_IFNAME") == NULL)
        env[n++] = "CG_SOCKET_IFNAME=lo";
    for (size_t i = 0; environ[i] != NULL; i++)
        env[n++] = environ[i];
    cg_ctx_params_t cp = {.field_mask = CG_CTX_PARAM_ENV |
                                        CG_CTX_PARAM_BOOTSTRAP,
                          .env = env, .bootstrap = 1};
    st = cg_ctx_create(&cp, ctx_p);
    free(env);
    return st == CG_OK ? 0 : fail("cg_ctx_create", st);
}

/* The plain allreduce's own transport and communicator. */
static int comm_make(bench_t *b)
{
    cg_ctx_h ctx = b->ctx[V_FUSED];
    const cg_config_t *cfg = &ctx->cfg;
    cg_transport_params_t tp = {cfg->transport, cg_bootstrap_cookie(ctx->bs),
                                b->rank, cfg->timeout_ns, cfg->socket_ifname,
                                cfg->socket_nsocks, &ctx->log,
                                cg_governor_mem_ops(ctx->gov),
                                cfg->ucx_shm_zcopy};
    cg_comm_params_t cp = {ctx->bs, NULL, ctx->gov, cfg, &ctx->log};
    cg_status_t st;

    st = cg_transport_create(&tp, &b->tp);
    if (st != CG_OK)
        return fail("cg_transport_create", st);
    cp.tp = b->tp;
    st = cg_comm_create(&cp, &b->comm);
    return st == CG_OK ? 0 : fail("cg_comm_create", st);
}

static int setup(bench_t *b)
{
    size_t elems = b->o.count * (size_t)b->o.n;
    int per = b->o.steps * b->o.rounds, rc;

    MPI_Comm_rank(MPI_COMM_WORLD, &b->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &b->size);
    b->in = malloc(elems * sizeof(float));
    b->out = malloc(elems * sizeof(float));
    b->names = malloc((size_t)b->o.n * sizeof(*b->names));
    b->reqs = malloc((size_t)b->o.n * sizeof(*b->reqs));
    for (int v = 0; v < V_COUNT; v++) {
        b->s[v].step = malloc((size_t)per * sizeof(double));
        b->s[v].enq = malloc((size_t)per * sizeof(double));
        b->s[v].wait = malloc((size_t)per * sizeof(double));
        b->s[v].cpu = malloc((size_t)per * sizeof(double));
        if (!b->s[v].step || !b->s[v].enq || !b->s[v].wait || !b->s[v].cpu)
            return fail("malloc", CG_ERR_NO_MEMORY);
    }
    if (!b->in || !b->out || !b->names || !b->reqs)
        return fail("malloc", CG_ERR_NO_MEMORY);
    for (int k = 0; k < b->o.n; k++) {
        snprintf(b->names[k], sizeof(b->names[k]), "model.layer%d.grad", k);
        for (size_t i = 0; i < b->o.count; i++)
            b->in[(size_t)k * b->o.count + i] =
                (float)(b->rank + 1) * value(k, i, 0);
    }
    memset(b->out, 0, elems * sizeof(float));
    rc = ctx_make(NULL, &b->ctx[V_FUSED]);
    if (rc == 0)
        rc = ctx_make("CG_FUSION_THRESHOLD=0", &b->ctx[V_UNFUSED]);
    if (rc == 0)
        rc = ctx_make("CG_SPIN_TIME=0", &b->ctx[V_NOSPIN]);
    if (rc == 0)
        rc = comm_make(b);
    return rc;
}

static void teardown(bench_t *b)
{
    if (b->comm != NULL)
        cg_comm_destroy(b->comm);
    if (b->tp != NULL)
        cg_transport_destroy(b->tp);
    for (int v = 0; v < V_SHIMS; v++)
        if (b->ctx[v] != NULL)
            cg_ctx_destroy(b->ctx[v]);
    for (int v = 0; v < V_COUNT; v++) {
        free(b->s[v].step);
        free(b->s[v].enq);
        free(b->s[v].wait);
        free(b->s[v].cpu);
    }
    free(b->in);
    free(b->out);
    free(b->names);
    free(b->reqs);
}

int main(int argc, char **argv)
{
    bench_t b = {0};
    int provided, rc;
    long wrong = 0;

    parse(argc, argv, &b.o);
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    rc = setup(&b);
    /* Variants alternate, so machine noise hits all of them alike. */
    for (int r = 0; r < b.o.rounds && rc == 0; r++)
        for (int v = 0; v < V_COUNT && rc == 0; v++)
            if (b.o.variants & (1u << v))
                rc = round_run(&b, v);
    if (rc != 0) /* the other ranks may wait in a collective: no hang */
        MPI_Abort(MPI_COMM_WORLD, rc);
    MPI_Allreduce(&b.wrong, &wrong, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    b.wrong = wrong;
    report(&b);
    teardown(&b);
    MPI_Finalize();
    return wrong != 0 ? 1 : 0;
}
