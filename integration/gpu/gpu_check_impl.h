/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the files of gpu_check (integration/gpu/gpu_check.c, the GPU
 * correctness suite) share: the sizes, a tensor's spec, a step's outcome,
 * the run's state, each input element's value (inline: they run per
 * element), and each file's functions, from the bottom up:
 * gpu_check_values.c (the reference, poison, hash), gpu_check_verdict.c
 * (exits, verdicts, agreement, rows), gpu_check_step.c (one step),
 * gpu_check_cases.c (the case sets), gpu_check_stage.c (the staging
 * chunk, no-slot cases), gpu_check_squeeze.c (the ballast), and
 * gpu_check.c (main) over them. A file calls only the ones before it.
 * Layer: integration; the program's own, not the library's.
 */
#ifndef CG_INTEGRATION_GPU_GPU_CHECK_IMPL_H
#define CG_INTEGRATION_GPU_GPU_CHECK_IMPL_H

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "collguard/hvd.h"
#include "core/reduce/half.h"

#define ARENA ((size_t)24 << 20)   /* bytes of each tensor arena */
#define BIG ((size_t)9 << 20)      /* bytes of the large tensors */
#define GUARD 64                   /* poisoned bytes after every tensor */
#define ALIGN 256                  /* tensors' alignment in the arenas */
#define MAXT 512                   /* tensors in one step */
#define FUSED 200                  /* tensors of a fused step */
#define MAX_RANKS 4                /* the values stay exact up to this */

enum { V_OK = 0, V_REFUSED = 1, V_WRONG = 2 };

/* One tensor of a step. Rank r's input has shape [dim0 + r * step, row]
 * (1-D when row is 1); step is 0 but for allgather. */
typedef struct {
    cg_hvd_op_type_t type;
    cg_dtype_t dt;
    cg_redop_t op;         /* allreduce, reducescatter */
    double pre, post;      /* allreduce, reducescatter */
    int root;              /* broadcast */
    int oop;               /* allreduce, broadcast: output != input */
    int64_t dim0, step, row;
    uint32_t seed;
} spec_t;

/* What one rank saw of a step or case. */
typedef struct {
    int verdict;           /* V_* */
    size_t elems;          /* this rank's input elements */
    uint64_t hash;         /* of every output byte */
    char why[200];         /* the first refusal or failure */
} outcome_t;

typedef struct {
    cg_ctx_h ctx;
    cg_hvd_core_h core;
    int rank, size;
    int device;             /* this rank's GPU; -1: host mode */
    const char *backend;
    char *dev_in, *dev_out; /* the tensors' arenas: device (or host) */
    char *h_in, *h_out;     /* what was put there */
    char *c_in, *c_out;     /* what came back */
    uint64_t digest;        /* of every output of the run */
    int cases, wrong, refused, shown;
    int corrupt;            /* CG_TEST_CORRUPT_CASE; -1: none */
} gc_t;

/* ---- an input element's value, an element's bytes ------------------- */

static inline uint32_t mix32(uint32_t x)
{
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    x *= 0x846ca68bu;
    x ^= x >> 16;
    return x;
}

static inline int is_float(cg_dtype_t dt)
{
    return dt == CG_DTYPE_F16 || dt == CG_DTYPE_BF16 || dt == CG_DTYPE_F32 ||
           dt == CG_DTYPE_F64;
}

static inline int is_unsigned(cg_dtype_t dt)
{
    return dt == CG_DTYPE_U8 || dt == CG_DTYPE_U32 || dt == CG_DTYPE_U64;
}

/* The hash of (spec, rank) every element of that input derives from. */
static inline uint32_t rank_base(const spec_t *s, int rank)
{
    return mix32(mix32(s->seed) ^ (uint32_t)rank);
}

/* Element i of the input whose rank_base is base: a small integer. Sums
 * of up to 4 ranks of 2 * [-8, 15] and products of 4 of [-2, 3] fit
 * i8/u8 and are exact in bf16; broadcast and allgather values (no
 * arithmetic) span [-100, 200]. */
static inline double in_val(const spec_t *s, uint32_t base, size_t i)
{
    static const double prod_vals[4] = {-2, -1, 1, 2};
    uint32_t h = mix32(base ^ (uint32_t)i);

    if (s->type == CG_HVD_BROADCAST || s->type == CG_HVD_ALLGATHER)
        return is_unsigned(s->dt) ? (double)(h % 200)
                                  : (double)(h % 201) - 100.0;
    if (s->op == CG_OP_PROD)
        return is_unsigned(s->dt) ? (double)(1 + h % 3) : prod_vals[h % 4];
    return is_unsigned(s->dt) ? (double)(h % 16) : (double)(h % 17) - 8.0;
}

/* Bytes of an element (cg_dtype_size, inlined: it runs per element). */
static inline size_t el_size(cg_dtype_t dt)
{
    return dt == CG_DTYPE_I8 || dt == CG_DTYPE_U8 ? 1
           : dt == CG_DTYPE_F16 || dt == CG_DTYPE_BF16 ? 2
           : dt == CG_DTYPE_I32 || dt == CG_DTYPE_U32 || dt == CG_DTYPE_F32
               ? 4 : 8;
}

/* v must be representable in dt (see representable). */
static inline void put_val(cg_dtype_t dt, void *buf, size_t i, double v)
{
    char *p = (char *)buf + i * el_size(dt);
    int8_t i8 = (int8_t)v;
    int32_t i32 = (int32_t)v;
    int64_t i64 = (int64_t)v;
    float f = (float)v;
    uint16_t h;

    switch (dt) {
    case CG_DTYPE_I8: memcpy(p, &i8, 1); break;
    case CG_DTYPE_U8: { uint8_t u = (uint8_t)v; memcpy(p, &u, 1); break; }
    case CG_DTYPE_I32: memcpy(p, &i32, 4); break;
    case CG_DTYPE_U32: { uint32_t u = (uint32_t)v; memcpy(p, &u, 4); break; }
    case CG_DTYPE_I64: memcpy(p, &i64, 8); break;
    case CG_DTYPE_U64: { uint64_t u = (uint64_t)v; memcpy(p, &u, 8); break; }
    case CG_DTYPE_F16: h = cg_f32_to_f16(f); memcpy(p, &h, 2); break;
    case CG_DTYPE_BF16: h = cg_f32_to_bf16(f); memcpy(p, &h, 2); break;
    case CG_DTYPE_F32: memcpy(p, &f, 4); break;
    default: memcpy(p, &v, 8); break; /* f64 */
    }
}

static inline double get_val(cg_dtype_t dt, const void *buf, size_t i)
{
    const char *p = (const char *)buf + i * el_size(dt);
    int8_t i8; uint8_t u8; int32_t i32; uint32_t u32; int64_t i64;
    uint64_t u64; uint16_t h; float f; double d;

    switch (dt) {
    case CG_DTYPE_I8: memcpy(&i8, p, 1); return i8;
    case CG_DTYPE_U8: memcpy(&u8, p, 1); return u8;
    case CG_DTYPE_I32: memcpy(&i32, p, 4); return i32;
    case CG_DTYPE_U32: memcpy(&u32, p, 4); return u32;
    case CG_DTYPE_I64: memcpy(&i64, p, 8); return (double)i64;
    case CG_DTYPE_U64: memcpy(&u64, p, 8); return (double)u64;
    case CG_DTYPE_F16: memcpy(&h, p, 2); return cg_f16_to_f32(h);
    case CG_DTYPE_BF16: memcpy(&h, p, 2); return cg_bf16_to_f32(h);
    case CG_DTYPE_F32: memcpy(&f, p, 4); return f;
    default: memcpy(&d, p, 8); return d;
    }
}

/* gpu_check_values.c */
double gc_ref_reduce(const spec_t *s, const uint32_t *base, int size,
                     size_t i);
int gc_representable(cg_dtype_t dt, double v);
void gc_poison(cg_dtype_t dt, void *buf, size_t n);
int gc_poisoned(cg_dtype_t dt, const void *buf, size_t n);
uint64_t gc_hash_bytes(uint64_t h, const void *buf, size_t n);

/* gpu_check_verdict.c */
void gc_fatal(const char *fmt, ...);
void gc_cuda_or_die(cudaError_t err, const char *what);
void gc_note(outcome_t *o, int verdict, const char *fmt, ...);
void gc_mismatch(gc_t *g, outcome_t *o, const char *name, const spec_t *s,
                 size_t i, double got, double want);
int gc_agree_max(gc_t *g, int32_t *v, int n);
int gc_report(gc_t *g, const char *cname, const char *dtype, const char *op,
              const outcome_t *o, double ms);

/* gpu_check_step.c */
void *gc_arena(const gc_t *g);
void gc_run_step(gc_t *g, int tag, const spec_t *sp, int n, outcome_t *o,
                 double *sec_p);

/* gpu_check_cases.c */
extern const cg_dtype_t gc_dtypes[];
extern const int gc_ndtypes;
int gc_run_case(gc_t *g, const char *cname, const char *op, const spec_t *sp,
                int n, int steps);
void gc_fused_specs(const gc_t *g, spec_t *sp, int n, cg_hvd_op_type_t type,
                    cg_dtype_t dt, cg_redop_t op, int scaled, uint32_t seed);
void gc_allreduce_cases(gc_t *g);
void gc_broadcast_cases(gc_t *g);
void gc_allgather_cases(gc_t *g);
void gc_reducescatter_cases(gc_t *g);
void gc_fused_cases(gc_t *g);

/* gpu_check_stage.c */
void gc_stage_chunk_check(gc_t *g, const char *cname);
int gc_no_slot_cases(gc_t *g);

/* gpu_check_squeeze.c */
void gc_squeeze(gc_t *g);

#endif
