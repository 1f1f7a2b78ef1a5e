/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Helpers of test_hvd_backend_mpi.c (see test_hvd_backend_job.h).
 * Inputs are small integers (and halves of them), so sums, min, max and
 * products are exact in every dtype and every order of reduction; float
 * min/max also carry NaNs of one rank.
 */
#include "tests/core/backend/test_hvd_backend_job.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/reduce/half.h"

extern char **environ;

static const cg_dtype_t hb_dts[HB_NDT] = {CG_DTYPE_F32, CG_DTYPE_F64,
                                          CG_DTYPE_I32, CG_DTYPE_F16,
                                          CG_DTYPE_BF16, CG_DTYPE_I16};
static const cg_redop_t hb_ops[HB_NOPS] = {CG_OP_SUM, CG_OP_AVG, CG_OP_MIN,
                                           CG_OP_MAX, CG_OP_PROD};
static const size_t hb_counts[4] = {17, 25, 33, 40000};

int hb_job_start(hb_job_t *job, const char *const *vars)
{
    static const char *const base[] = {"CG_TRANSPORT=socket",
                                       "CG_SOCKET_IFNAME=lo",
                                       "CG_TIMEOUT=20s", NULL};
    size_t n = 0, ne = 0;

    while (environ[ne] != NULL)
        ne++;
    job->env = calloc(ne + 32, sizeof(*job->env));
    for (int i = 0; vars[i] != NULL && i < 16; i++)
        job->env[n++] = vars[i];
    for (int i = 0; base[i] != NULL; i++)
        job->env[n++] = base[i];
    for (size_t i = 0; i < ne; i++)
        job->env[n++] = environ[i];
    cg_ctx_params_t cp = {.field_mask = CG_CTX_PARAM_ENV |
                                        CG_CTX_PARAM_BOOTSTRAP,
                          .env = job->env, .bootstrap = 1};
    job->core = NULL;
    if (cg_ctx_create(&cp, &job->ctx) != CG_OK) {
        fprintf(stderr, "context: %s\n", cg_last_error());
        free(job->env);
        return 1;
    }
    if (cg_hvd_core_create(job->ctx, &job->core) != CG_OK) {
        fprintf(stderr, "core create: %s\n", cg_last_error());
        cg_ctx_destroy(job->ctx);
        free(job->env);
        return 1;
    }
    job->rank = cg_hvd_core_rank(job->core);
    job->size = cg_hvd_core_size(job->core);
    return 0;
}

void hb_job_stop(hb_job_t *job)
{
    cg_hvd_core_destroy(job->core);
    cg_ctx_destroy(job->ctx);
    free(job->env);
}

static void hb_put(cg_dtype_t dt, void *buf, size_t i, double v)
{
    switch (dt) {
    case CG_DTYPE_F32:
        ((float *)buf)[i] = (float)v;
        break;
    case CG_DTYPE_F64:
        ((double *)buf)[i] = v;
        break;
    case CG_DTYPE_I32:
        ((int32_t *)buf)[i] = (int32_t)v;
        break;
    case CG_DTYPE_I16:
        ((int16_t *)buf)[i] = (int16_t)v;
        break;
    case CG_DTYPE_F16:
        ((uint16_t *)buf)[i] = cg_f32_to_f16((float)v);
        break;
    default:
        ((uint16_t *)buf)[i] = cg_f32_to_bf16((float)v);
        break;
    }
}

static double hb_get(cg_dtype_t dt, const void *buf, size_t i)
{
    switch (dt) {
    case CG_DTYPE_F32:
        return ((const float *)buf)[i];
    case CG_DTYPE_F64:
        return ((const double *)buf)[i];
    case CG_DTYPE_I32:
        return ((const int32_t *)buf)[i];
    case CG_DTYPE_I16:
        return ((const int16_t *)buf)[i];
    case CG_DTYPE_F16:
        return cg_f16_to_f32(((const uint16_t *)buf)[i]);
    default:
        return cg_bf16_to_f32(((const uint16_t *)buf)[i]);
    }
}

/* Rank r's element i: 1 or 2 for products (no overflow in f16 for up to 8
 * ranks), else +-(r + 1 + i % 5); for float min/max, rank 1 has a NaN at
 * every i % 7 == 3, which the engine's rules propagate (MPI's predefined
 * MPI_MIN/MPI_MAX would lose it in some orders). */
static double hb_val(cg_dtype_t dt, cg_redop_t op, int r, size_t i)
{
    if ((op == CG_OP_MIN || op == CG_OP_MAX) && dt != CG_DTYPE_I32 &&
        dt != CG_DTYPE_I16 &&
        r == 1 && i % 7 == 3)
        return NAN;
    if (op == CG_OP_PROD)
        return 1.0 + (double)((r + i) % 2);
    return (double)(r + 1 + (int)(i % 5)) * (i % 2 ? -1.0 : 1.0);
}

static void hb_alloc(hb_tensor_t *t, bool inplace, int rank)
{
    size_t bytes = t->count * cg_dtype_size(t->dt);

    t->in = malloc(bytes);
    t->out = inplace ? t->in : malloc(bytes);
    for (size_t i = 0; i < t->count; i++)
        hb_put(t->dt, t->in, i, hb_val(t->dt, t->op, rank, i));
    if (!inplace)
        memset(t->out, 0xa5, bytes);
}

void hb_tensor_init(hb_tensor_t *t, const hb_job_t *job, int d, int o, int s,
                    int k)
{
    memset(t, 0, sizeof(*t));
    t->dt = hb_dts[d];
    t->op = hb_ops[o];
    t->pre = s ? 0.5 : 1.0;
    t->post = s ? 4.0 : 1.0;
    t->count = hb_counts[k];
    t->root = -1;
    t->exact = s == 0 && t->op != CG_OP_AVG;
    snprintf(t->name, sizeof(t->name), "ar.%s.%s.s%d.k%d",
             cg_dtype_name(t->dt), cg_redop_name(t->op), s, k);
    hb_alloc(t, k % 2 == 1, job->rank);
}

void hb_bcast_init(hb_tensor_t *t, const hb_job_t *job, int d, int root)
{
    memset(t, 0, sizeof(*t));
    t->dt = hb_dts[d];
    t->op = CG_OP_SUM;
    t->count = root % 2 ? 40000 : 1000;
    t->root = root;
    t->exact = true;
    snprintf(t->name, sizeof(t->name), "bc.%s.root%d", cg_dtype_name(t->dt),
             root);
    hb_alloc(t, root % 2 == 0, job->rank);
}

int hb_enqueue_allreduce(hb_job_t *job, hb_tensor_t *t, cg_hvd_req_h *req_p)
{
    cg_hvd_tensor_t ht = {.name = t->name, .dtype = t->dt, .ndim = 1,
                          .shape = {(int64_t)t->count}, .input = t->in,
                          .output = t->out};

    if (cg_hvd_enqueue_allreduce(job->core, &ht, t->op, t->pre, t->post,
                                 req_p) == CG_OK)
        return 0;
    fprintf(stderr, "rank %d: enqueue %s: %s\n", job->rank, t->name,
            cg_last_error());
    return 1;
}

int hb_enqueue_broadcast(hb_job_t *job, hb_tensor_t *t, cg_hvd_req_h *req_p)
{
    cg_hvd_tensor_t ht = {.name = t->name, .dtype = t->dt, .ndim = 1,
                          .shape = {(int64_t)t->count}, .input = t->in,
                          .output = t->out, .flags = CG_HVD_IS_LEAF};

    if (cg_hvd_enqueue_broadcast(job->core, &ht, t->root, req_p) == CG_OK)
        return 0;
    fprintf(stderr, "rank %d: enqueue %s: %s\n", job->rank, t->name,
            cg_last_error());
    return 1;
}

/* The exact result of element i. */
static double hb_ref(const hb_tensor_t *t, int size, size_t i)
{
    double acc = hb_val(t->dt, t->op, t->root >= 0 ? t->root : 0, i);

    for (int r = 1; r < size && t->root < 0; r++) {
        double v = hb_val(t->dt, t->op, r, i);
        if (isnan(v) || isnan(acc)) {
            acc = NAN;
            continue;
        }
        acc = t->op == CG_OP_SUM    ? acc + v
              : t->op == CG_OP_PROD ? acc * v
              : t->op == CG_OP_MIN  ? (v < acc ? v : acc)
                                    : (v > acc ? v : acc);
    }
    return acc;
}

int hb_wait(hb_job_t *job, hb_tensor_t *t, cg_hvd_req_h req)
{
    cg_status_t st = cg_hvd_wait(req);

    if (st != CG_OK) {
        fprintf(stderr, "rank %d: %s failed: %s\n", job->rank, t->name,
                cg_hvd_error(req));
        cg_hvd_release(req);
        return 1;
    }
    cg_hvd_release(req);
    for (size_t i = 0; t->exact && i < t->count; i++) {
        double got = hb_get(t->dt, t->out, i), want = hb_ref(t, job->size, i);
        if (got != want && !(isnan(got) && isnan(want))) {
            fprintf(stderr, "rank %d: %s[%zu] = %.17g, want %.17g\n",
                    job->rank, t->name, i, got, want);
            return 1;
        }
    }
    return 0;
}

int hb_same(const hb_tensor_t *a, const hb_tensor_t *b, int n,
            const char *what)
{
    for (int k = 0; k < n; k++) {
        size_t el = cg_dtype_size(a[k].dt);
        for (size_t i = 0; i < a[k].count; i++) {
            if (memcmp((char *)a[k].out + i * el, (char *)b[k].out + i * el,
                       el) == 0)
                continue;
            fprintf(stderr, "%s %s[%zu]: COLLGUARD %.17g, MPI %.17g (bits "
                    "differ)\n", what, a[k].name, i,
                    hb_get(a[k].dt, a[k].out, i),
                    hb_get(b[k].dt, b[k].out, i));
            return 1;
        }
    }
    return 0;
}

static void hb_tensor_free(hb_tensor_t *t)
{
    if (t->out != t->in)
        free(t->out);
    free(t->in);
    t->in = t->out = NULL;
}

void hb_result_free(hb_result_t *res)
{
    for (int k = 0; k < HB_NAR; k++)
        hb_tensor_free(&res->ar[k]);
    for (int k = 0; k < HB_NDT * HB_RANKS_MAX; k++)
        hb_tensor_free(&res->bc[k]);
}
