/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpu_check's cases (integration/gpu/gpu_check.c): a case is steps of one
 * set of tensors and one row; the sets: allreduce of every dtype x op
 * (scaled, in place and out of place, 1 element to 9 MiB), broadcast from
 * every root, allgather with uneven first dimensions, reducescatter, and
 * the fused steps of 200 small tensors of mixed sizes.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "integration/gpu/gpu_check_impl.h"

/* steps steps of the n tensors of sp (one tag), one row. */
int gc_run_case(gc_t *g, const char *cname, const char *op,
                const spec_t *sp, int n, int steps)
{
    outcome_t o, all;
    double sec, tot = 0;
    const char *dtype = cg_dtype_name(sp[0].dt);

    memset(&all, 0, sizeof(all));
    for (int t = 1; t < n; t++)
        if (sp[t].dt != sp[0].dt)
            dtype = "mixed";
    for (int k = 0; k < steps; k++) {
        gc_run_step(g, g->cases, sp, n, &o, &sec);
        tot += sec;
        if (o.verdict > all.verdict || all.why[0] == '\0') {
            all.verdict = o.verdict > all.verdict ? o.verdict : all.verdict;
            memcpy(all.why, o.why, sizeof(all.why));
        }
        all.elems = o.elems;
        g->digest = gc_hash_bytes(g->digest, &o.hash, sizeof(o.hash));
    }
    return gc_report(g, cname, dtype, op, &all, tot / steps * 1e3);
}

const cg_dtype_t gc_dtypes[] = {
    CG_DTYPE_I8, CG_DTYPE_U8, CG_DTYPE_I32, CG_DTYPE_U32, CG_DTYPE_I64,
    CG_DTYPE_U64, CG_DTYPE_F16, CG_DTYPE_BF16, CG_DTYPE_F32, CG_DTYPE_F64};
#define NDTYPES (int)(sizeof(gc_dtypes) / sizeof(gc_dtypes[0]))
const int gc_ndtypes = NDTYPES;

/* Elements of the three sizes: one, odd, 9 MiB and 3 more (several
 * staging chunks, a last chunk that is not full). */
static int64_t size_elems(int k, cg_dtype_t dt)
{
    return k == 0 ? 1 : k == 1 ? 4099
                               : (int64_t)(BIG / cg_dtype_size(dt)) + 3;
}

/* Floats: x0.5 before, x4 after (exact); integers: x2, x0.5 (sum only:
 * the sum of doubled values halves exactly). */
static void scales(cg_dtype_t dt, int scaled, double *pre, double *post)
{
    *pre = !scaled ? 1.0 : is_float(dt) ? 0.5 : 2.0;
    *post = !scaled ? 1.0 : is_float(dt) ? 4.0 : 0.5;
}

void gc_allreduce_cases(gc_t *g)
{
    static const cg_redop_t ops[] = {CG_OP_SUM, CG_OP_PROD, CG_OP_MIN,
                                     CG_OP_MAX, CG_OP_AVG};
    char cname[64];

    for (int d = 0; d < NDTYPES; d++)
        for (int o = 0; o < 5; o++)
            for (int scaled = 0; scaled < 2; scaled++) {
                cg_dtype_t dt = gc_dtypes[d];
                if (scaled && !is_float(dt) && ops[o] != CG_OP_SUM)
                    continue;
                for (int k = 0; k < 3; k++)
                    for (int oop = 0; oop < 2; oop++) {
                        /* 9 MiB: in place plain, out of place scaled
                         * (the checks' time on a small host) */
                        if (k == 2 && oop != scaled)
                            continue;
                        spec_t s = {.type = CG_HVD_ALLREDUCE, .dt = dt,
                                    .op = ops[o], .oop = oop,
                                    .dim0 = size_elems(k, dt), .row = 1,
                                    .seed = (uint32_t)g->cases};
                        scales(dt, scaled, &s.pre, &s.post);
                        snprintf(cname, sizeof(cname), "allreduce-%s%s",
                                 oop ? "oop" : "ip", scaled ? "-scaled" : "");
                        gc_run_case(g, cname, cg_redop_name(ops[o]), &s, 1, 1);
                    }
            }
}

void gc_broadcast_cases(gc_t *g)
{
    /* one dtype of each element size: broadcast moves bytes */
    static const cg_dtype_t bdt[] = {CG_DTYPE_U8, CG_DTYPE_F16, CG_DTYPE_I32,
                                     CG_DTYPE_F64};
    char cname[64], op[16];

    for (int d = 0; d < 4; d++)
        for (int root = 0; root < g->size; root++)
            for (int k = 0; k < 3; k++)
                for (int oop = 0; oop < 2; oop++) {
                    spec_t s = {.type = CG_HVD_BROADCAST, .dt = bdt[d],
                                .root = root, .oop = oop,
                                .dim0 = size_elems(k, bdt[d]), .row = 1,
                                .seed = (uint32_t)g->cases};
                    snprintf(cname, sizeof(cname), "broadcast-%s",
                             oop ? "oop" : "ip");
                    snprintf(op, sizeof(op), "root=%d", root);
                    gc_run_case(g, cname, op, &s, 1, 1);
                }
}

void gc_allgather_cases(gc_t *g)
{
    for (int d = 0; d < NDTYPES; d++) {
        cg_dtype_t dt = gc_dtypes[d];
        int64_t big = (int64_t)(BIG / 3 / (5 * cg_dtype_size(dt)));
        /* rank r: 1 + r rows; 3r rows of 3 (rank 0 empty); ~3 MiB + 7r
         * rows of 5 */
        spec_t v[3] = {
            {.type = CG_HVD_ALLGATHER, .dt = dt, .dim0 = 1, .step = 1,
             .row = 1},
            {.type = CG_HVD_ALLGATHER, .dt = dt, .dim0 = 0, .step = 3,
             .row = 3},
            {.type = CG_HVD_ALLGATHER, .dt = dt, .dim0 = big, .step = 7,
             .row = 5}};
        static const char *const names[3] = {"allgather-ragged",
                                             "allgather-empty-rank0",
                                             "allgather-3MiB"};
        for (int k = 0; k < 3; k++) {
            v[k].seed = (uint32_t)g->cases;
            gc_run_case(g, names[k], "-", &v[k], 1, 1);
        }
    }
}

void gc_reducescatter_cases(gc_t *g)
{
    static const cg_redop_t ops[] = {CG_OP_SUM, CG_OP_AVG};
    int n = g->size;

    for (int d = 0; d < NDTYPES; d++)
        for (int o = 0; o < 2; o++)
            for (int scaled = 0; scaled < 2; scaled++) {
                cg_dtype_t dt = gc_dtypes[d];
                size_t el = cg_dtype_size(dt);
                /* 1 row of 3 (only rank 0 has a row); 250n + n - 1 rows;
                 * ~9 MiB in rows of 5, kn + 1 rows */
                int64_t dims[3] = {1, 250 * n + n - 1,
                                   (int64_t)(BIG / (5 * el)) / n * n + 1};
                int64_t rows[3] = {3, 1, 5};
                if (scaled && !is_float(dt) && ops[o] != CG_OP_SUM)
                    continue;
                for (int k = 0; k < 3; k++) {
                    spec_t s = {.type = CG_HVD_REDUCESCATTER, .dt = dt,
                                .op = ops[o], .dim0 = dims[k],
                                .row = rows[k], .seed = (uint32_t)g->cases};
                    scales(dt, scaled, &s.pre, &s.post);
                    gc_run_case(g, scaled ? "reducescatter-scaled"
                                          : "reducescatter",
                                cg_redop_name(ops[o]), &s, 1, 1);
                }
            }
}

/* n tensors of mixed sizes (1 to 3000 elements; allgather and
 * reducescatter 1 to ~1200 rows of 2), in place and out of place
 * alternating, broadcast roots in turn. */
void gc_fused_specs(const gc_t *g, spec_t *sp, int n,
                    cg_hvd_op_type_t type, cg_dtype_t dt, cg_redop_t op,
                    int scaled, uint32_t seed)
{
    for (int t = 0; t < n; t++) {
        uint32_t h = mix32(seed * 7919u + (uint32_t)t);
        spec_t s = {.type = type, .dt = dt, .op = op, .root = t % g->size,
                    .oop = t & 1, .dim0 = 1 + h % 3000, .row = 1,
                    .seed = seed * 1000u + (uint32_t)t};
        scales(dt, scaled, &s.pre, &s.post);
        if (type == CG_HVD_ALLGATHER) {
            s.dim0 = h % 300; /* may be 0 on rank 0 */
            s.step = 1 + t % 3;
            s.row = 2;
        } else if (type == CG_HVD_REDUCESCATTER) {
            s.dim0 = (int64_t)(1 + h % 300) * g->size +
                     (t & 1 ? g->size - 1 : 1);
            s.row = 2;
        }
        sp[t] = s;
    }
}

void gc_fused_cases(gc_t *g)
{
    static const struct {
        cg_hvd_op_type_t type;
        cg_dtype_t dt;
        cg_redop_t op;
        int scaled;
    } f[] = {
        {CG_HVD_ALLREDUCE, CG_DTYPE_F32, CG_OP_SUM, 0},
        {CG_HVD_ALLREDUCE, CG_DTYPE_F16, CG_OP_AVG, 1},
        {CG_HVD_ALLREDUCE, CG_DTYPE_BF16, CG_OP_SUM, 1},
        {CG_HVD_ALLREDUCE, CG_DTYPE_F64, CG_OP_PROD, 0},
        {CG_HVD_ALLREDUCE, CG_DTYPE_I32, CG_OP_MAX, 0},
        {CG_HVD_ALLREDUCE, CG_DTYPE_I64, CG_OP_SUM, 1},
        {CG_HVD_ALLREDUCE, CG_DTYPE_U8, CG_OP_MIN, 0},
        {CG_HVD_ALLREDUCE, CG_DTYPE_I8, CG_OP_AVG, 0},
        {CG_HVD_BROADCAST, CG_DTYPE_F32, CG_OP_SUM, 0},
        {CG_HVD_ALLGATHER, CG_DTYPE_I32, CG_OP_SUM, 0},
        {CG_HVD_REDUCESCATTER, CG_DTYPE_F32, CG_OP_AVG, 1},
        {CG_HVD_REDUCESCATTER, CG_DTYPE_BF16, CG_OP_SUM, 0},
    };
    static const char *const tname[] = {"allreduce", "broadcast",
                                        "allgather", "reducescatter"};
    spec_t sp[FUSED];
    char cname[64];

    for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++) {
        gc_fused_specs(g, sp, FUSED, f[i].type, f[i].dt, f[i].op, f[i].scaled,
                       (uint32_t)g->cases);
        snprintf(cname, sizeof(cname), "fused%d-%s%s", FUSED,
                 tname[f[i].type], f[i].scaled ? "-scaled" : "");
        gc_run_case(g, cname, f[i].type == CG_HVD_BROADCAST ? "roots"
                              : f[i].type == CG_HVD_ALLGATHER
                                  ? "-" : cg_redop_name(f[i].op),
                    sp, FUSED, 3);
    }
}
