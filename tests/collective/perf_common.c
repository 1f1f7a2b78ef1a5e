/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The perf tools' driver: options (-b -e -f -n -w -c -d -o -r -t -B, plus
 * -H hashes and -R random data), job setup through the bootstrap (mpirun
 * or collguard-run), the size loop (warm-up, timed iterations, the
 * tool's anchor timed alike where it has one, a check run against the
 * independent reference), and nccl-tests' table and summary.
 */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/coll/coll.h"
#include "core/base/error.h"
#include "core/base/parse.h"
#include "tests/collective/perf_common.h"

static double perf_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void perf_usage(const perf_coll_t *c)
{
    fprintf(stderr,
            "usage: %s [-b minbytes] [-e maxbytes] [-f factor] [-n iters]\n"
            "  [-w warmup] [-c 0|1] [-d dtype] [-o op] [-r root] [-t "
            "socket|ucx]\n"
            "  [-B collguard|mpi] [-H] [-R]\n"
            "  sizes: 8, 1K, 64M; dtype: int8 uint8 int16 uint16 int32 "
            "uint32 int64\n  uint64 half float double bfloat16 (or i8 .. "
            "bf16);\n"
            "  op: sum prod min max avg; -r -1: every root in turn;\n"
            "  -H print a hash of each result; -R random data (no -c)\n",
            c->name);
    exit(1);
}

static const struct { const char *alias, *name; } perf_dt_alias[] = {
    {"int8", "i8"}, {"uint8", "u8"}, {"int16", "i16"}, {"uint16", "u16"},
    {"int32", "i32"}, {"int", "i32"},
    {"uint32", "u32"}, {"int64", "i64"}, {"uint64", "u64"}, {"half", "f16"},
    {"float16", "f16"}, {"float", "f32"}, {"float32", "f32"},
    {"double", "f64"}, {"float64", "f64"}, {"bfloat16", "bf16"}};

static uint64_t perf_size_arg(const perf_coll_t *c, const char *s)
{
    uint64_t v;
    if (!cg_parse_size(s, &v)) {
        fprintf(stderr, "%s: bad size '%s' (8, 1K, 64M)\n", c->name, s);
        exit(1);
    }
    return v;
}

static void perf_parse(const perf_coll_t *c, int argc, char **argv,
                       perf_opts_t *o)
{
    int opt;
    *o = (perf_opts_t){.min_bytes = 32 << 20, .max_bytes = 32 << 20,
                       .factor = 2, .iters = 20, .warmup = 5, .check = 1,
                       .dt = CG_DTYPE_F32, .op = CG_OP_SUM, .root = 0,
                       .tp_kind = CG_TRANSPORT_AUTO};
    while ((opt = getopt(argc, argv, "b:e:f:n:w:c:d:o:r:t:B:HRh")) != -1) {
        const char *name = optarg;
        switch (opt) {
        case 'b': o->min_bytes = perf_size_arg(c, optarg); break;
        case 'e': o->max_bytes = perf_size_arg(c, optarg); break;
        case 'f': o->factor = strtoull(optarg, NULL, 10); break;
        case 'n': o->iters = atoi(optarg); break;
        case 'w': o->warmup = atoi(optarg); break;
        case 'c': o->check = atoi(optarg); break;
        case 'r': o->root = atoi(optarg); break;
        case 'H': o->hash = 1; break;
        case 'R': o->random = 1; break;
        case 'd':
            for (size_t i = 0; i < sizeof(perf_dt_alias) /
                                       sizeof(perf_dt_alias[0]); i++)
                if (strcmp(optarg, perf_dt_alias[i].alias) == 0)
                    name = perf_dt_alias[i].name;
            if (cg_dtype_by_name(name, &o->dt) != CG_OK)
                perf_usage(c);
            break;
        case 'o':
            if (strcmp(optarg, "avg") == 0)
                name = "average";
            if (cg_redop_by_name(name, &o->op) != CG_OK ||
                o->op == CG_OP_ADASUM)
                perf_usage(c);
            break;
        case 't':
            if (strcmp(optarg, "ucx") == 0)
                o->tp_kind = CG_TRANSPORT_UCX;
            else if (strcmp(optarg, "socket") == 0)
                o->tp_kind = CG_TRANSPORT_SOCKET;
            else
                perf_usage(c);
            break;
        case 'B':
            if (strcmp(optarg, "mpi") != 0 && strcmp(optarg, "collguard"))
                perf_usage(c);
            o->mpi = strcmp(optarg, "mpi") == 0;
            break;
        default: perf_usage(c);
        }
    }
    if (o->factor < 2 || o->iters < 1 || o->warmup < 0 ||
        o->min_bytes > o->max_bytes || (o->random && o->check))
        perf_usage(c);
}

/* The header's algorithm name for this many bytes. */
static const char *perf_algo_name(const perf_coll_t *c, const cg_comm_t *comm,
                                  size_t bytes)
{
    if (c->algo != NULL)
        return c->algo(comm, bytes);
    return c->has_root ? cg_bcast_algo_name(cg_broadcast_algo(comm, bytes))
                       : cg_coll_algo_name(cg_allreduce_algo(comm, bytes));
}

static int perf_fail(const char *what, cg_status_t st)
{
    fprintf(stderr, "%s: %s: %s\n", what, cg_status_name(st), cg_last_error());
    return 3;
}

static int perf_setup(const perf_opts_t *o, perf_job_t *job)
{
    cg_transport_params_t tp = {0};
    cg_bootstrap_params_t bp = {0};
    cg_comm_params_t cp = {0};
    cg_status_t st;

    st = cg_ctx_create(NULL, &job->ctx);
    if (st != CG_OK)
        return perf_fail("cg_ctx_create", st);
    bp.timeout_ns = job->ctx->cfg.timeout_ns;
    bp.log = &job->ctx->log;
    bp.mem = cg_governor_mem_ops(job->ctx->gov);
    st = cg_bootstrap_create(&bp, &job->bs);
    if (st != CG_OK)
        return perf_fail("cg_bootstrap_create", st);
    job->rank = cg_bootstrap_rank(job->bs);
    job->size = cg_bootstrap_size(job->bs);
    job->ctx->log.rank = job->rank;
    tp.kind = o->tp_kind != CG_TRANSPORT_AUTO ? o->tp_kind
                                               : job->ctx->cfg.transport;
    tp.cookie = cg_bootstrap_cookie(job->bs);
    tp.rank = job->rank;
    tp.timeout_ns = job->ctx->cfg.timeout_ns;
    /* One host: loopback unless the user named interfaces. */
    tp.ifname = job->ctx->cfg.set_by_user[CG_CFG_SOCKET_IFNAME] ||
                        cg_bootstrap_env(job->bs)->local_size != job->size
                    ? job->ctx->cfg.socket_ifname : "lo";
    tp.nsocks = job->ctx->cfg.socket_nsocks;
    tp.ucx_shm_zcopy = job->ctx->cfg.ucx_shm_zcopy;
    tp.log = &job->ctx->log;
    tp.mem = cg_governor_mem_ops(job->ctx->gov);
    st = cg_transport_create(&tp, &job->tp);
    if (st != CG_OK)
        return perf_fail("cg_transport_create", st);
    cp = (cg_comm_params_t){job->bs, job->tp, job->ctx->gov, &job->ctx->cfg,
                            &job->ctx->log};
    st = cg_comm_create(&cp, &job->comm);
    if (st != CG_OK)
        return perf_fail("cg_comm_create", st);
    return 0;
}

static void perf_teardown(perf_job_t *job)
{
    cg_comm_destroy(job->comm);
    if (job->tp != NULL)
        cg_transport_destroy(job->tp);
    cg_bootstrap_destroy(job->bs);
    cg_ctx_destroy(job->ctx);
}

typedef struct perf_result {
    double us, algbw, busbw;
    long wrong;       /* -1: not checked */
    double anchor_us; /* -1: no anchor, or N/A */
} perf_result_t;

/* The slowest rank's value, so every rank prints the same table. */
static double perf_max(perf_job_t *job, double v)
{
    double all[CG_BOOTSTRAP_SIZE_MAX > 4096 ? 4096 : CG_BOOTSTRAP_SIZE_MAX];
    double m = v;
    if (job->size > (int)(sizeof(all) / sizeof(all[0])) ||
        cg_bootstrap_allgather(job->bs, &v, all, sizeof(v)) != CG_OK)
        return v;
    for (int r = 0; r < job->size; r++)
        m = all[r] > m ? all[r] : m;
    return m;
}

static uint64_t perf_hash(const void *buf, size_t len)
{
    const uint8_t *p = buf;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < len; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

static long perf_verify(const perf_coll_t *c, perf_job_t *job,
                        const perf_opts_t *o, const void *recv, size_t count,
                        int root)
{
    long wrong = 0;
    for (size_t i = 0; i < count; i++) {
        double want = c->expect(job, o, i, root);
        double got = perf_load(o->dt, recv, i);
        double tol = c->tolerance != NULL ? c->tolerance(o, want) : 0;
        if (isnan(want)) /* not checked */
            continue;
        if (!(fabs(got - want) <= tol)) {
            if (wrong < 3)
                fprintf(stderr, "rank %d: element %zu is %.17g, expected "
                        "%.17g\n", job->rank, i, got, want);
            wrong++;
        }
    }
    return wrong;
}

/* Times iters calls of run (after warmup ones): the slowest rank's mean.
 * rc PERF_ANCHOR_NA from the first call: *us_p is -1. */
static int perf_time(perf_run_fn run, perf_job_t *job, const perf_opts_t *o,
                     void *send, void *recv, size_t count, int root,
                     double *us_p)
{
    double t0 = 0;
    int rc;

    cg_bootstrap_barrier(job->bs);
    for (int i = 0; i < o->warmup + o->iters; i++) {
        if (i == o->warmup) {
            cg_bootstrap_barrier(job->bs);
            t0 = perf_now();
        }
        cg_governor_tick(job->ctx->gov);
        rc = run(job, o, send, recv, count, root);
        if (rc == PERF_ANCHOR_NA && i == 0) {
            *us_p = -1;
            return 0;
        }
        if (rc != 0)
            return rc;
    }
    *us_p = perf_max(job, (perf_now() - t0) / o->iters * 1e6);
    return 0;
}

static int perf_one(const perf_coll_t *c, perf_job_t *job,
                    const perf_opts_t *o, void *send, void *recv,
                    size_t count, int root, perf_result_t *res)
{
    size_t bytes = count * cg_dtype_size(o->dt);
    int rc;

    rc = perf_time(c->run, job, o, send, recv, count, root, &res->us);
    if (rc != 0)
        return rc;
    res->algbw = res->us > 0 ? bytes / res->us / 1e3 : 0;
    res->busbw = res->algbw * c->bus_factor(job->size);
    res->wrong = -1;
    res->anchor_us = -1;
    if (o->anchor) {
        rc = perf_time(c->anchor, job, o, send, recv, count, root,
                       &res->anchor_us);
        if (rc != 0)
            return rc;
    }
    if (!o->check && !o->hash)
        return 0;
    job->count = count;
    job->inplace = send == recv;
    c->fill(job, o, send, recv, count, root);
    rc = c->run(job, o, send, recv, count, root);
    if (rc != 0)
        return rc;
    if (o->hash)
        printf("# hash %s %zu bytes %s rank %d: %016llx\n", c->name, bytes,
               send == recv ? "in-place" : "out-of-place", job->rank,
               (unsigned long long)perf_hash(recv, bytes));
    if (o->check)
        res->wrong = (long)perf_max(job, (double)perf_verify(c, job, o, recv,
                                                            count, root));
    return 0;
}

static void perf_cell(const perf_result_t *r)
{
    printf(" %8.2f %7.2f %7.2f", r->us, r->algbw, r->busbw);
    if (r->wrong < 0)
        printf(" %6s", "N/A");
    else
        printf(" %6ld", r->wrong);
}

/* The anchor's time and its ratio to collguard's (above 1: collguard is
 * faster). */
static void perf_anchor_cell(const perf_result_t *r)
{
    if (r->anchor_us < 0)
        printf(" %9s %6s", "N/A", "N/A");
    else
        printf(" %9.2f %6.2f", r->anchor_us,
               r->us > 0 ? r->anchor_us / r->us : 0.0);
}

static int perf_loop(const perf_coll_t *c, perf_job_t *job,
                     const perf_opts_t *o, uint8_t *send, uint8_t *recv)
{
    size_t el = cg_dtype_size(o->dt);
    double bw_sum = 0;
    long wrong = 0;
    int rows = 0, rc;

    for (uint64_t b = o->min_bytes; b <= o->max_bytes; b *= o->factor) {
        size_t count = (size_t)b / el;
        int r0 = o->root < 0 ? 0 : o->root;
        int r1 = o->root < 0 ? job->size - 1 : o->root;
        for (int root = r0; root <= r1; root++) {
            perf_result_t oop, ip;
            rc = perf_one(c, job, o, send, recv, count, root, &oop);
            if (rc == 0)
                rc = perf_one(c, job, o, recv, recv, count, root, &ip);
            if (rc != 0)
                return rc;
            if (job->rank == 0) {
                printf("%12zu %12zu %8s %7s %6d", count * el, count,
                       cg_dtype_name(o->dt),
                       c->has_root ? "none" : cg_redop_name(o->op),
                       c->has_root ? root : -1);
                perf_cell(&oop);
                perf_cell(&ip);
                if (o->anchor) {
                    perf_anchor_cell(&oop);
                    perf_anchor_cell(&ip);
                }
                printf("\n");
                fflush(stdout);
            }
            bw_sum += oop.busbw + ip.busbw;
            rows += 2;
            wrong += (oop.wrong > 0 ? oop.wrong : 0) +
                     (ip.wrong > 0 ? ip.wrong : 0);
        }
        if (b == 0)
            break;
    }
    if (job->rank == 0) {
        printf("# Out of bounds values : %ld %s\n", wrong,
               wrong ? "FAILED" : "OK");
        printf("# Avg bus bandwidth    : %g\n", rows ? bw_sum / rows : 0.0);
    }
    return wrong ? 1 : 0;
}

static void perf_header(const perf_coll_t *c, const perf_job_t *job,
                        const perf_opts_t *o)
{
    cg_governor_snapshot_t snap;
    size_t b = (size_t)o->max_bytes;

    cg_governor_snapshot(job->ctx->gov, &snap);
    printf("# %s: %d ranks, backend %s, transport %s, algo %s at %llu B "
           "and %s at %llu B, chunk %llu, iters %d, warmup %d, check %d\n",
           c->name, job->size, o->mpi ? "mpi" : "collguard",
           cg_transport_name(job->tp),
           perf_algo_name(c, job->comm, (size_t)o->min_bytes),
           (unsigned long long)o->min_bytes,
           perf_algo_name(c, job->comm, b),
           (unsigned long long)b, (unsigned long long)snap.chunk_bytes,
           o->iters, o->warmup, o->check);
    if (o->anchor)
        printf("# anchor: %s on the same buffers in the same run, after "
               "each collguard column; ratio = its time / collguard's\n",
               c->anchor_name);
    printf("#%11s %12s %8s %7s %6s %8s %7s %7s %6s %8s %7s %7s %6s",
           "size", "count", "type", "redop", "root", "time", "algbw",
           "busbw", "#wrong", "time", "algbw", "busbw", "#wrong");
    if (o->anchor)
        printf(" %9s %6s %9s %6s", "anchor", "ratio", "anchor", "ratio");
    printf("\n#%11s %12s %8s %7s %6s %8s %7s %7s %6s %8s %7s %7s %6s",
           "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "",
           "(us)", "(GB/s)", "(GB/s)", "");
    if (o->anchor)
        printf(" %9s %6s %9s %6s", "oop (us)", "", "ip (us)", "");
    printf("\n");
}

int perf_main(const perf_coll_t *c, int argc, char **argv)
{
    perf_job_t job = {0};
    cg_governor_snapshot_t snap;
    perf_opts_t o;
    uint8_t *send, *recv;
    size_t max = 0;
    int rc;

    perf_parse(c, argc, argv, &o);
    rc = perf_setup(&o, &job);
    if (rc != 0) {
        perf_teardown(&job);
        return rc;
    }
    o.anchor = c->anchor != NULL && !o.mpi && c->anchor_ready != NULL &&
               c->anchor_ready(&job);
    if (o.root >= job.size) {
        fprintf(stderr, "%s: root %d with %d ranks\n", c->name, o.root,
                job.size);
        perf_teardown(&job);
        return 1;
    }
    max = (size_t)o.max_bytes + 64;
    send = malloc(max);
    recv = malloc(max);
    if (send == NULL || recv == NULL) {
        fprintf(stderr, "%s: cannot allocate 2 x %zu bytes\n", c->name, max);
        rc = 2;
    } else {
        memset(send, 0, max);
        memset(recv, 0, max);
        if (job.rank == 0)
            perf_header(c, &job, &o);
        rc = perf_loop(c, &job, &o, send, recv);
    }
    cg_governor_snapshot(job.ctx->gov, &snap);
    if (rc == 0 && job.rank == 0)
        printf("# governor: ring peak %llu bytes, chunk %llu bytes now, "
               "%llu allocation failures recovered\n",
               (unsigned long long)snap.peak_bytes[CG_MEM_CAT_RING],
               (unsigned long long)snap.chunk_bytes,
               (unsigned long long)snap.alloc_failures);
    free(send);
    free(recv);
    perf_teardown(&job);
    return rc;
}
