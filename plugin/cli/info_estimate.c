/* SPDX-License-Identifier: Apache-2.0 */
/*
 * collguard-info --estimate: parses a parameter count (or a file of
 * tensor shapes), dtype, optimizer, mixed-precision mode, rank count and
 * backend, probes the device the governor would watch (CG_MEM_PROBE; or
 * --free/--total), takes the sizes' caps and floors from the
 * configuration, and prints cg_estimate's per-rank table. Layer: plugin
 * (a command over core/context and core/governor).
 */
#include "plugin/cli/info_estimate.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collguard/collguard.h"
#include "collguard/estimate.h"
#include "core/base/parse.h"
#include "core/context.h"

static void cg__est_usage(FILE *out)
{
    fprintf(out,
        "usage: collguard-info --estimate [COUNT] [--shapes FILE] [options]\n"
        "  COUNT            parameters: 125000000, 7e9, 350M, 1.5B, 70B\n"
        "  --shapes FILE    or the sum over tensor shapes, one a line\n"
        "                   (4096x4096, 4096,11008 or 4096 11008; # comments)\n"
        "  --dtype D        parameter dtype: fp32 (default), fp16, bf16, fp64\n"
        "  --optimizer O    sgd, momentum, adam (default), adamw\n"
        "  --mixed M        none (default), fp16, bf16: weights and grads in\n"
        "                   M, fp32 master weights and optimizer state\n"
        "  --ranks N        data-parallel ranks (default 1)\n"
        "  --backend B      nccl (default), collguard, mpi\n"
        "  --free SIZE      free device memory instead of probing it\n"
        "  --total SIZE     total device memory (default: --free)\n"
        "Caps and floors come from CG_FUSION_THRESHOLD, CG_FUSION_MIN,\n"
        "NCCL_BUFFSIZE, CG_NCCL_BUFFSIZE_MIN and CG_MEM_RESERVE. Activations\n"
        "are not estimated.\n");
}

static int cg__bad(const char *fmt, const char *a, const char *b)
{
    fprintf(stderr, "collguard-info --estimate: ");
    fprintf(stderr, fmt, a, b);
    fprintf(stderr, "\n");
    return 2;
}

/* 125000000, 7e9, 350M, 1.5B, 2T (decimal suffixes K, M, B/G, T). */
static int cg__parse_count(const char *s, uint64_t *n_p)
{
    char *end;
    double v, mul = 1;

    errno = 0;
    v = strtod(s, &end);
    if (end == s || errno != 0)
        return 0;
    if (*end != '\0') {
        switch (*end) {
        case 'K': case 'k': mul = 1e3; break;
        case 'M': case 'm': mul = 1e6; break;
        case 'B': case 'b': case 'G': case 'g': mul = 1e9; break;
        case 'T': case 't': mul = 1e12; break;
        default: return 0;
        }
        if (end[1] != '\0')
            return 0;
    }
    v *= mul;
    if (!(v >= 1) || v > 1e18 || v != floor(v))
        return 0;
    *n_p = (uint64_t)v;
    return 1;
}

/* The sum of the products of the shapes in path; 2 on error (said). */
static int cg__parse_shapes(const char *path, uint64_t *n_p)
{
    FILE *f = fopen(path, "r");
    char line[1024], where[1100];
    uint64_t total = 0;
    int lineno = 0;

    if (f == NULL)
        return cg__bad("cannot open --shapes file %s: %s", path,
                       strerror(errno));
    while (fgets(line, sizeof(line), f) != NULL) {
        uint64_t prod = 1;
        int dims = 0;
        char *p = line, *end;
        lineno++;
        line[strcspn(line, "#\n")] = '\0';
        for (;;) {
            while (*p == ' ' || *p == '\t' || *p == ',' || *p == 'x' ||
                   *p == '(' || *p == ')' || *p == '[' || *p == ']')
                p++;
            if (*p == '\0')
                break;
            errno = 0;
            unsigned long long d = strtoull(p, &end, 10);
            if (end == p || errno != 0 || d == 0 ||
                __builtin_mul_overflow(prod, (uint64_t)d, &prod)) {
                snprintf(where, sizeof(where), "%s:%d", path, lineno);
                fclose(f);
                return cg__bad("%s: not a shape of positive integers "
                               "(4096x4096): '%s'", where, line);
            }
            dims++;
            p = end;
        }
        if (dims > 0 && __builtin_add_overflow(total, prod, &total)) {
            fclose(f);
            return cg__bad("%s: the parameter count overflows%s", path, "");
        }
    }
    fclose(f);
    if (total == 0)
        return cg__bad("--shapes file %s holds no shape%s", path, "");
    *n_p = total;
    return 0;
}

static int cg__parse_dtype(const char *s, cg_dtype_t *dt_p)
{
    static const struct { const char *name; cg_dtype_t dt; } names[] = {
        {"fp32", CG_DTYPE_F32}, {"f32", CG_DTYPE_F32},
        {"float32", CG_DTYPE_F32}, {"fp16", CG_DTYPE_F16},
        {"f16", CG_DTYPE_F16}, {"float16", CG_DTYPE_F16},
        {"bf16", CG_DTYPE_BF16}, {"bfloat16", CG_DTYPE_BF16},
        {"fp64", CG_DTYPE_F64}, {"f64", CG_DTYPE_F64},
        {"float64", CG_DTYPE_F64}};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (strcmp(s, names[i].name) == 0) {
            *dt_p = names[i].dt;
            return 1;
        }
    return 0;
}

static void cg__row(const char *what, uint64_t bytes, const char *note)
{
    char b[32];
    printf("  %-24s %12s  %s\n", what, cg_format_size(bytes, b, sizeof(b)),
           note);
}

/* What the estimate was asked about, for its first line. */
typedef struct {
    const char *dtype, *optimizer, *mixed, *backend, *device;
} cg__names_t;

static void cg__print(const cg_estimate_params_t *p, const cg_estimate_t *e,
                      const cg__names_t *n)
{
    char a[32], b[32], c[32], note[160];

    printf("memory per rank: %llu parameters, dtype %s, optimizer %s, mixed "
           "precision %s, %d rank(s), backend %s; activations not "
           "included\n", (unsigned long long)p->params, n->dtype,
           n->optimizer, n->mixed, p->ranks, n->backend);
    snprintf(note, sizeof(note), "%.2f bytes per parameter",
             (double)e->model_bytes / (double)p->params);
    cg__row("parameters", e->param_bytes, "");
    cg__row("gradients", e->grad_bytes, "");
    cg__row("fp32 master weights", e->master_bytes, "");
    cg__row("optimizer state", e->optimizer_bytes, "");
    cg__row("model state", e->model_bytes, note);
    cg__row("fusion buffer (device)", e->fusion_bytes, "CG_FUSION_THRESHOLD");
    cg__row("staging (host, pinned)", e->staging_host_bytes,
            p->backend == CG_EST_BACKEND_NCCL ? "" : "the fusion buffer's "
            "size, on the host");
    snprintf(note, sizeof(note), "%llu x NCCL_BUFFSIZE %s",
             (unsigned long long)CG_EST_NCCL_BUFFERS,
             cg_format_size(p->nccl_buffsize, a, sizeof(a)));
    cg__row("NCCL buffers", e->nccl_buffer_bytes,
            e->nccl_buffer_bytes ? note : "");
    cg__row("NCCL fixed cost", e->nccl_fixed_bytes, e->nccl_fixed_bytes
            ? "per communicator, measured on an H200 at creation" : "");
    cg__row("total on the device", e->device_bytes, "");
    printf("  %-24s free %s of %s, reserve %s (CG_MEM_RESERVE)\n", n->device,
           cg_format_size(p->free_bytes, a, sizeof(a)),
           cg_format_size(p->total_bytes, b, sizeof(b)),
           cg_format_size(p->reserve_bytes, c, sizeof(c)));
    if (e->fits)
        printf("  verdict: fits, %s left for activations and the "
               "framework\n", cg_format_size((uint64_t)e->headroom_bytes, a,
                                             sizeof(a)));
    else
        printf("  verdict: does not fit, short by %s\n",
               cg_format_size((uint64_t)-e->headroom_bytes, a, sizeof(a)));
    if (e->fusion_fit)
        printf("  largest CG_FUSION_THRESHOLD that fits: %s\n",
               cg_format_size(e->fusion_fit, a, sizeof(a)));
    else
        printf("  largest CG_FUSION_THRESHOLD that fits: none (not even "
               "CG_FUSION_MIN %s)\n",
               cg_format_size(p->fusion_min, a, sizeof(a)));
    if (p->backend != CG_EST_BACKEND_NCCL)
        printf("  largest NCCL_BUFFSIZE that fits: not used by backend %s\n",
               n->backend);
    else if (e->nccl_buffsize_fit)
        printf("  largest NCCL_BUFFSIZE that fits: %s\n",
               cg_format_size(e->nccl_buffsize_fit, a, sizeof(a)));
    else
        printf("  largest NCCL_BUFFSIZE that fits: none (not even "
               "CG_NCCL_BUFFSIZE_MIN %s)\n",
               cg_format_size(p->nccl_buffsize_min, a, sizeof(a)));
}

/* The device's memory as the governor would see it (CG_MEM_PROBE). */
static int cg__probe(cg_ctx_h ctx, cg_estimate_params_t *p,
                     const char **device_p)
{
    if (ctx->probe.read(ctx->probe.arg, &p->free_bytes, &p->total_bytes) !=
        CG_OK) {
        fprintf(stderr, "collguard-info --estimate: %s (give --free)\n",
                cg_last_error());
        return 1;
    }
    *device_p = ctx->probe.kind == CG_MEM_KIND_DEVICE ? "GPU memory (cuda)"
                                                      : "host memory (no GPU)";
    return 0;
}

int cg_info_estimate(int argc, char **argv)
{
    cg_estimate_params_t p = {.dtype = CG_DTYPE_F32, .optimizer = CG_EST_ADAM,
                              .mixed = CG_EST_MIXED_NONE, .ranks = 1,
                              .backend = CG_EST_BACKEND_NCCL};
    cg__names_t n = {"fp32", "adam", "none", "nccl", "memory (--free)"};
    const char *shapes = NULL, *count = NULL;
    uint64_t free_b = 0, total_b = 0;
    cg_estimate_t e;
    cg_ctx_h ctx;
    int rc = 0, v;

    for (int i = 0; i < argc; i++) {
        const char *o = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(o, "-h") == 0 || strcmp(o, "--help") == 0) {
            cg__est_usage(stdout);
            return 0;
        }
        if (o[0] != '-' || (o[1] >= '0' && o[1] <= '9')) {
            if (count != NULL)
                return cg__bad("a second parameter count '%s'%s", o, "");
            count = o;
            continue;
        }
        if (val == NULL)
            return cg__bad("%s needs a value%s", o, "");
        i++;
        if (strcmp(o, "--shapes") == 0) {
            shapes = val;
        } else if (strcmp(o, "--dtype") == 0) {
            if (!cg__parse_dtype(val, &p.dtype))
                return cg__bad("--dtype '%s': expected fp32, fp16, bf16 or "
                               "fp64%s", val, "");
            n.dtype = val;
        } else if (strcmp(o, "--optimizer") == 0) {
            if ((v = cg_est_optimizer_parse(val)) < 0)
                return cg__bad("--optimizer '%s': expected sgd, momentum, "
                               "adam or adamw%s", val, "");
            p.optimizer = (cg_est_optimizer_t)v;
            n.optimizer = val;
        } else if (strcmp(o, "--mixed") == 0) {
            if ((v = cg_est_mixed_parse(val)) < 0)
                return cg__bad("--mixed '%s': expected none, fp16 or "
                               "bf16%s", val, "");
            p.mixed = (cg_est_mixed_t)v;
            n.mixed = val;
        } else if (strcmp(o, "--backend") == 0) {
            if ((v = cg_est_backend_parse(val)) < 0)
                return cg__bad("--backend '%s': expected nccl, collguard or "
                               "mpi%s", val, "");
            p.backend = (cg_est_backend_t)v;
            n.backend = val;
        } else if (strcmp(o, "--ranks") == 0) {
            int64_t r;
            if (!cg_parse_int(val, 1, 1 << 20, &r))
                return cg__bad("--ranks '%s': expected an integer from 1 to "
                               "1048576%s", val, "");
            p.ranks = (int)r;
        } else if (strcmp(o, "--free") == 0 || strcmp(o, "--total") == 0) {
            uint64_t *dst = o[2] == 'f' ? &free_b : &total_b;
            if (!cg_parse_size(val, dst) || *dst == 0)
                return cg__bad("%s '%s': expected a size (80G, 141GiB)", o,
                               val);
        } else {
            return cg__bad("unknown option '%s'%s (--estimate -h lists "
                           "them)", o, "");
        }
    }
    if ((count == NULL) == (shapes == NULL))
        return cg__bad("give either a parameter count or --shapes FILE%s%s",
                       "", "");
    if (count != NULL && !cg__parse_count(count, &p.params))
        return cg__bad("parameter count '%s': expected a positive integer "
                       "(125000000, 7e9, 350M, 1.5B)%s", count, "");
    if (shapes != NULL && (rc = cg__parse_shapes(shapes, &p.params)) != 0)
        return rc;
    if (total_b != 0 && free_b == 0)
        return cg__bad("--total needs --free%s%s", "", "");
    if (free_b != 0 && total_b != 0 && free_b > total_b)
        return cg__bad("--free is larger than --total%s%s", "", "");
    if (cg_ctx_create(NULL, &ctx) != CG_OK) {
        fprintf(stderr, "collguard-info --estimate: %s\n", cg_last_error());
        return 1;
    }
    if (free_b != 0) {
        p.free_bytes = free_b;
        p.total_bytes = total_b != 0 ? total_b : free_b;
    } else {
        rc = cg__probe(ctx, &p, &n.device);
    }
    (void)cg_ctx_estimate_params(ctx, &p);
    cg_ctx_destroy(ctx);
    if (rc != 0)
        return rc;
    if (cg_estimate(&p, &e) != CG_OK) {
        fprintf(stderr, "collguard-info --estimate: %s\n", cg_last_error());
        return 2;
    }
    cg__print(&p, &e, &n);
    return 0;
}
