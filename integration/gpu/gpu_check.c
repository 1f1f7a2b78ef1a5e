/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The GPU correctness suite of the Horovod shim (issue 14), through
 * include/collguard/hvd.h on CUDA tensors (filled and read back with
 * cudaMemcpy, no kernels): allreduce of every dtype x op (prescale and
 * postscale, in place and out of place), broadcast from every root,
 * allgather with uneven first dimensions (one rank empty), reducescatter
 * (sum, average) with dim0 not divisible by the ranks, from 1 element to
 * 9 MiB (several staging chunks, each at most CG_CHUNK_SIZE) at odd
 * sizes; fused steps of 200 small tensors of mixed sizes; a squeeze
 * phase mid-run (the same mixed step plain, under a cudaMalloc ballast,
 * after freeing it: the same bits each time); under CG_FAULT_ALLOC, the
 * governor's allocation failures must be non-zero. The staging chunk of
 * CUDA tensors on COLLGUARD and MPI (or under CG_GPU_STAGE_EMULATE): after
 * the allreduce cases, under the ballast and after it, every rank must
 * report the same agreed chunk, the least any staging rank's slots hold,
 * each slot its governor's chunk (so ranks may run with different
 * CG_CHUNK_SIZE: gpu_check.sh's chunk-per-rank runs give each rank its own
 * through rank_env.sh, and must print the plain run's digest). Where a
 * rank's slots are refused (CG_FAULT_STAGING=1 on it), only the no-slot
 * cases run: a staged CUDA allreduce and broadcast must fail on every rank
 * with CG_ERR_NO_MEMORY naming that rank, and the core must go on.
 * Inputs are small integers, different on every rank, exact in every
 * dtype and in every sum, product and average made here (1, 2 or 4
 * ranks), so each element is compared exactly with a host reference;
 * outputs are poisoned (each dtype's largest value, and a guard after
 * every tensor) before each step. A dtype x op the backend refuses
 * cleanly (CG_ERR_UNSUPPORTED with a message) is reported "refused".
 * Rank 0 prints one row per case (the verdict agreed over the ranks), the
 * digest of every rank's outputs (gpu_check.sh compares it across runs)
 * and "gpu_check: N cases, M wrong, K refused".
 * Exit 0: all right; 1: a wrong element, a failed request, a setup
 * error; 77: no CUDA device (CUDA mode).
 *   gpu_check         CUDA tensors, the backend HOROVOD_GPU_OPERATIONS
 *                     picks; rank i uses GPU (local rank i) % GPUs
 *   gpu_check --host  the same cases on host tensors (the backend
 *                     HOROVOD_CPU_OPERATIONS picks), no CUDA call
 * 1 rank, or under collguard-run -np N / mpirun (N <= 4).
 * CG_TEST_SQUEEZE_LEAVE=<MiB> (default 256): device memory the ballast
 * leaves free. CG_TEST_CORRUPT_CASE=<k>: case k's first output element
 * flips a bit after it came back (the checks' own test: 1 wrong).
 */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "collguard/hvd.h"
#include "core/base/parse.h"
#include "core/reduce/half.h"
#include "integration/gpu/launcher_gpu.h"

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

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void fatal(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "gpu_check: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(1);
}

static void cuda_or_die(cudaError_t err, const char *what)
{
    if (err != cudaSuccess)
        fatal("%s: %s", what, cudaGetErrorString(err));
}

/* ---- values, the reference, poison ---------------------------------- */

static uint32_t mix32(uint32_t x)
{
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    x *= 0x846ca68bu;
    x ^= x >> 16;
    return x;
}

static int is_float(cg_dtype_t dt)
{
    return dt == CG_DTYPE_F16 || dt == CG_DTYPE_BF16 || dt == CG_DTYPE_F32 ||
           dt == CG_DTYPE_F64;
}

static int is_unsigned(cg_dtype_t dt)
{
    return dt == CG_DTYPE_U8 || dt == CG_DTYPE_U32 || dt == CG_DTYPE_U64;
}

/* The hash of (spec, rank) every element of that input derives from. */
static uint32_t rank_base(const spec_t *s, int rank)
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

/* Element i of the reduced tensor (base: rank_base of every rank), by
 * docs/collectives.md "Reductions": post * op(pre * x_r); average: floats
 * sum * post / size, integers the sum / size truncated toward zero, then
 * post. */
static double ref_reduce(const spec_t *s, const uint32_t *base, int size,
                         size_t i)
{
    double acc = 0;

    for (int r = 0; r < size; r++) {
        double x = in_val(s, base[r], i) * s->pre;
        if (r == 0)
            acc = x;
        else if (s->op == CG_OP_PROD)
            acc *= x;
        else if (s->op == CG_OP_MIN)
            acc = x < acc ? x : acc;
        else if (s->op == CG_OP_MAX)
            acc = x > acc ? x : acc;
        else
            acc += x;
    }
    if (s->op == CG_OP_AVG)
        return is_float(s->dt) ? acc * s->post / size
                               : trunc(acc / size) * s->post;
    return acc * s->post;
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

/* True when v is exactly a value of dt (so the comparison is exact). */
static int representable(cg_dtype_t dt, double v)
{
    double lo = 0, hi = 9007199254740992.0; /* 2^53: exact doubles */
    char tmp[8];

    if (!isfinite(v))
        return 0;
    switch (dt) {
    case CG_DTYPE_I8: lo = -128; hi = 127; break;
    case CG_DTYPE_U8: hi = 255; break;
    case CG_DTYPE_I32: lo = -2147483648.0; hi = 2147483647.0; break;
    case CG_DTYPE_U32: hi = 4294967295.0; break;
    case CG_DTYPE_I64: lo = -hi; break;
    case CG_DTYPE_U64: break;
    default:
        put_val(dt, tmp, 0, v);
        return get_val(dt, tmp, 0) == v;
    }
    return v == trunc(v) && v >= lo && v <= hi;
}

/* Each dtype's largest finite value: never a result here. */
static void poison(cg_dtype_t dt, void *buf, size_t n)
{
    size_t el = cg_dtype_size(dt);
    uint8_t b1 = dt == CG_DTYPE_I8 ? 0x7f : 0xff;
    uint16_t b2 = dt == CG_DTYPE_F16 ? 0x7bff : 0x7f7f;
    uint32_t b4 = dt == CG_DTYPE_U32 ? 0xffffffffu
                  : dt == CG_DTYPE_I32 ? 0x7fffffffu : 0x7f7fffffu;
    uint64_t b8 = dt == CG_DTYPE_U64 ? UINT64_MAX
                  : dt == CG_DTYPE_I64 ? (uint64_t)INT64_MAX
                                       : 0x7fefffffffffffffull;
    char pat[8];

    if (el == 1)
        memcpy(pat, &b1, 1);
    else if (el == 2)
        memcpy(pat, &b2, 2);
    else if (el == 4)
        memcpy(pat, &b4, 4);
    else
        memcpy(pat, &b8, 8);
    for (size_t i = 0; i < n; i++)
        memcpy((char *)buf + i * el, pat, el);
}

/* True when the n elements still hold the poison. */
static int poisoned(cg_dtype_t dt, const void *buf, size_t n)
{
    char ref[GUARD];
    size_t el = cg_dtype_size(dt);

    for (size_t i = 0; i < n; i += GUARD / el) {
        size_t k = n - i < GUARD / el ? n - i : GUARD / el;
        poison(dt, ref, k);
        if (memcmp((const char *)buf + i * el, ref, k * el) != 0)
            return 0;
    }
    return 1;
}

static uint64_t hash_bytes(uint64_t h, const void *buf, size_t n)
{
    const unsigned char *p = buf;
    size_t i = 0;
    uint64_t w;

    for (; i + 8 <= n; i += 8) {
        memcpy(&w, p + i, 8);
        h = (h ^ w) * 0x100000001b3ull;
        h ^= h >> 29;
    }
    for (; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

/* ---- shapes ----------------------------------------------------------- */

static int64_t dim0_of(const spec_t *s, int rank)
{
    return s->dim0 + (int64_t)rank * s->step;
}

static size_t in_elems(const spec_t *s, int rank)
{
    return (size_t)(dim0_of(s, rank) * s->row);
}

/* Whether the tensor's output is a region of its own in dev_out. */
static int has_out(const spec_t *s)
{
    return s->type == CG_HVD_REDUCESCATTER ||
           (s->oop && s->type != CG_HVD_ALLGATHER);
}

/* This rank's output elements and, for reducescatter, its first. */
static size_t out_elems(const gc_t *g, const spec_t *s, size_t *first_p)
{
    int64_t start = 0, rows = 0;

    *first_p = 0;
    if (s->type == CG_HVD_ALLGATHER)
        return 0;
    if (s->type != CG_HVD_REDUCESCATTER)
        return in_elems(s, g->rank);
    cg_hvd_reducescatter_rows(s->dim0, g->size, g->rank, &start, &rows);
    *first_p = (size_t)(start * s->row);
    return (size_t)(rows * s->row);
}

/* ---- moving bytes ----------------------------------------------------- */

/* The arena copies: cudaMemcpy (waited for: the engine's stream does not
 * order behind the default stream) or, in host mode, memcpy. */
static void to_dev(const gc_t *g, void *dst, const void *src, size_t n)
{
    if (n == 0)
        return;
    if (g->device < 0) {
        memcpy(dst, src, n);
        return;
    }
    cuda_or_die(cudaMemcpy(dst, src, n, cudaMemcpyHostToDevice),
                "cudaMemcpy H2D");
    cuda_or_die(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
}

static void from_dev(const gc_t *g, void *dst, const void *src, size_t n)
{
    if (n == 0)
        return;
    if (g->device < 0) {
        memcpy(dst, src, n);
        return;
    }
    cuda_or_die(cudaMemcpy(dst, src, n, cudaMemcpyDeviceToHost),
                "cudaMemcpy D2H");
}

static void *arena(const gc_t *g)
{
    void *p = NULL;

    if (g->device >= 0)
        cuda_or_die(cudaMalloc(&p, ARENA), "cudaMalloc (arena)");
    else if ((p = malloc(ARENA)) == NULL)
        fatal("out of host memory");
    return p;
}

/* ---- outcomes --------------------------------------------------------- */

static void note(outcome_t *o, int verdict, const char *fmt, ...)
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

static void mismatch(gc_t *g, outcome_t *o, const char *name,
                     const spec_t *s, size_t i, double got, double want)
{
    if (g->shown++ < 8)
        fprintf(stderr, "rank %d: %s (%s) [%zu] = %.17g, want %.17g\n",
                g->rank, name, cg_dtype_name(s->dt), i, got, want);
    note(o, V_WRONG, "%s [%zu] = %g, want %g", name, i, got, want);
}

/* n int32 values, each set to its maximum over the ranks, through the
 * core (a host tensor). 0, or -1 when the core failed it. */
static int agree_max(gc_t *g, int32_t *v, int n)
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

/* ---- one step ---------------------------------------------------------- */

/* The checks of one done tensor (in: its input region as it came back,
 * out: its output region). */
static void check_tensor(gc_t *g, const spec_t *s, const char *name,
                         cg_hvd_req_h req, size_t ioff, size_t ooff,
                         outcome_t *o)
{
    size_t el = cg_dtype_size(s->dt), ni = in_elems(s, g->rank), first;
    size_t no = out_elems(g, s, &first);
    const char *in = g->c_in + ioff;
    const char *out = has_out(s) ? g->c_out + ooff : in;
    const void *data = NULL;
    int64_t dim0 = 0, want_dim0 = 0;
    uint32_t base[MAX_RANKS];
    size_t k = 0;

    for (int r = 0; r < g->size; r++)
        base[r] = rank_base(s, r);

    if (s->type == CG_HVD_ALLGATHER) {
        for (int r = 0; r < g->size; r++)
            want_dim0 += dim0_of(s, r);
        if (cg_hvd_allgather_result(req, &data, &dim0) != CG_OK) {
            note(o, V_WRONG, "%s: no allgather result: %s", name,
                 cg_last_error());
            return;
        }
        if (dim0 != want_dim0 || (data == NULL && want_dim0 > 0)) {
            note(o, V_WRONG, "%s: gathered %lld rows at %p, want %lld", name,
                 (long long)dim0, data, (long long)want_dim0);
            return;
        }
        if (g->device >= 0) { /* hvd.h, docs/horovod.md: a host result */
            struct cudaPointerAttributes a;
            if (cudaPointerGetAttributes(&a, data) == cudaSuccess &&
                a.type == cudaMemoryTypeDevice) {
                note(o, V_WRONG, "%s: the allgather result is device "
                     "memory, documented as host memory", name);
                return;
            }
            (void)cudaGetLastError();
        }
        for (int r = 0; r < g->size; r++)
            for (size_t i = 0; i < in_elems(s, r); i++, k++) {
                double want = in_val(s, base[r], i);
                double got = get_val(s->dt, data, k);
                if (got != want)
                    mismatch(g, o, name, s, k, got, want);
            }
        o->hash = hash_bytes(o->hash, data, k * el);
    } else {
        for (size_t i = 0; i < no; i++) {
            double want = s->type == CG_HVD_BROADCAST
                              ? in_val(s, base[s->root], i)
                              : ref_reduce(s, base, g->size, first + i);
            double got = get_val(s->dt, out, i);
            if (!representable(s->dt, want)) {
                note(o, V_WRONG, "test bug: reference %g of %s not exact "
                     "in %s", want, name, cg_dtype_name(s->dt));
                return;
            }
            if (got != want)
                mismatch(g, o, name, s, i, got, want);
        }
        if (has_out(s) && !poisoned(s->dt, out + no * el, GUARD / el))
            note(o, V_WRONG, "%s: written past its output's end", name);
        o->hash = hash_bytes(o->hash, out, no * el);
    }
    /* Nothing writes past an input; an input that is not the output
     * stays as it was (reducescatter: not promised). */
    if (!poisoned(s->dt, in + ni * el, GUARD / el))
        note(o, V_WRONG, "%s: written past its input's end", name);
    else if (s->type != CG_HVD_REDUCESCATTER && (has_out(s) ||
             s->type == CG_HVD_ALLGATHER) &&
             memcmp(in, g->h_in + ioff, ni * el) != 0)
        note(o, V_WRONG, "%s: its input changed", name);
}

static size_t align_up(size_t n)
{
    return (n + ALIGN - 1) / ALIGN * ALIGN;
}

/* Fills, poisons, enqueues the n tensors of sp (names c<tag>.<index>:
 * the same every step, so later steps are negotiated by the cache),
 * waits for all and checks every element. *sec_p: first enqueue to last
 * completion. */
static void run_step(gc_t *g, int tag, const spec_t *sp, int n,
                     outcome_t *o, double *sec_p)
{
    size_t ioff[MAXT], ooff[MAXT], iat = 0, oat = 0;
    cg_hvd_req_h req[MAXT];
    cg_status_t st[MAXT];
    char name[MAXT][24];
    double t0;

    memset(o, 0, sizeof(*o));
    if (n > MAXT)
        fatal("test bug: %d tensors in a step, at most %d", n, MAXT);
    for (int t = 0; t < n; t++) {
        const spec_t *s = &sp[t];
        size_t el = cg_dtype_size(s->dt), ni = in_elems(s, g->rank), first;
        size_t no = out_elems(g, s, &first);

        ioff[t] = iat;
        iat = align_up(iat + ni * el + GUARD);
        ooff[t] = oat;
        if (has_out(s))
            oat = align_up(oat + no * el + GUARD);
        if (iat > ARENA || oat > ARENA)
            fatal("test bug: step c%d needs more than %zu bytes", tag, ARENA);
        uint32_t base = rank_base(s, g->rank);

        for (size_t i = 0; i < ni; i++)
            put_val(s->dt, g->h_in + ioff[t], i, in_val(s, base, i));
        poison(s->dt, g->h_in + ioff[t] + ni * el, GUARD / el);
        if (has_out(s))
            poison(s->dt, g->h_out + ooff[t], no + GUARD / el);
        o->elems += ni;
        snprintf(name[t], sizeof(name[t]), "c%d.%d", tag, t);
    }
    to_dev(g, g->dev_in, g->h_in, iat);
    to_dev(g, g->dev_out, g->h_out, oat);

    t0 = now_s();
    for (int t = 0; t < n; t++) {
        const spec_t *s = &sp[t];
        size_t first, no = out_elems(g, s, &first);
        char *in = g->dev_in + ioff[t];
        cg_hvd_tensor_t ten = {
            .field_mask = g->device >= 0 ? CG_HVD_TENSOR_FIELD_DEVICE : 0,
            .name = name[t], .dtype = s->dt, .ndim = s->row == 1 ? 1 : 2,
            .shape = {dim0_of(s, g->rank), s->row}, .input = in,
            .output = has_out(s) ? g->dev_out + ooff[t] : in,
            .flags = CG_HVD_IS_LEAF, .device = g->device};

        if (s->type == CG_HVD_REDUCESCATTER && no == 0)
            ten.output = NULL; /* allowed for an empty slice */
        switch (s->type) {
        case CG_HVD_ALLREDUCE:
            st[t] = cg_hvd_enqueue_allreduce(g->core, &ten, s->op, s->pre,
                                             s->post, &req[t]);
            break;
        case CG_HVD_BROADCAST:
            st[t] = cg_hvd_enqueue_broadcast(g->core, &ten, s->root, &req[t]);
            break;
        case CG_HVD_ALLGATHER:
            st[t] = cg_hvd_enqueue_allgather(g->core, &ten, &req[t]);
            break;
        default:
            st[t] = cg_hvd_enqueue_reducescatter(g->core, &ten, s->op,
                                                 s->pre, s->post, &req[t]);
            break;
        }
        if (st[t] != CG_OK) {
            note(o, st[t] == CG_ERR_UNSUPPORTED ? V_REFUSED : V_WRONG,
                 "enqueue %s: %s (%s)", name[t], cg_last_error(),
                 cg_status_name(st[t]));
            req[t] = NULL;
        }
    }
    for (int t = 0; t < n; t++)
        if (req[t] != NULL)
            st[t] = cg_hvd_wait(req[t]);
    *sec_p = now_s() - t0;

    from_dev(g, g->c_in, g->dev_in, iat);
    from_dev(g, g->c_out, g->dev_out, oat);
    if (tag == g->corrupt && sp[0].type != CG_HVD_ALLGATHER) {
        size_t first, no = out_elems(g, &sp[0], &first);
        char *out = has_out(&sp[0]) ? g->c_out + ooff[0] : g->c_in + ioff[0];
        if (no > 0)
            out[0] ^= 1; /* the lowest bit of element 0 (little endian) */
    }
    for (int t = 0; t < n; t++) {
        if (req[t] == NULL)
            continue;
        if (st[t] != CG_OK) {
            const char *e = cg_hvd_error(req[t]);
            note(o, st[t] == CG_ERR_UNSUPPORTED && e[0] ? V_REFUSED : V_WRONG,
                 "%s: %s (%s)", name[t], e, cg_status_name(st[t]));
        } else {
            check_tensor(g, &sp[t], name[t], req[t], ioff[t], ooff[t], o);
        }
        cg_hvd_release(req[t]);
    }
}

/* ---- cases ------------------------------------------------------------- */

/* Agrees on the worst verdict of the ranks, prints rank 0's row, counts.
 * A core that cannot agree any more ends the run. */
static int report(gc_t *g, const char *cname, const char *dtype,
                  const char *op, const outcome_t *o, double ms)
{
    int32_t v = o->verdict;
    static const char *const word[] = {"ok", "refused", "WRONG"};

    if (agree_max(g, &v, 1) != 0)
        fatal("rank %d: the core stopped during %s (%s)", g->rank, cname,
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

/* steps steps of the n tensors of sp (one tag), one row. */
static int run_case(gc_t *g, const char *cname, const char *op,
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
        run_step(g, g->cases, sp, n, &o, &sec);
        tot += sec;
        if (o.verdict > all.verdict || all.why[0] == '\0') {
            all.verdict = o.verdict > all.verdict ? o.verdict : all.verdict;
            memcpy(all.why, o.why, sizeof(all.why));
        }
        all.elems = o.elems;
        g->digest = hash_bytes(g->digest, &o.hash, sizeof(o.hash));
    }
    return report(g, cname, dtype, op, &all, tot / steps * 1e3);
}

static const cg_dtype_t dtypes[] = {
    CG_DTYPE_I8, CG_DTYPE_U8, CG_DTYPE_I32, CG_DTYPE_U32, CG_DTYPE_I64,
    CG_DTYPE_U64, CG_DTYPE_F16, CG_DTYPE_BF16, CG_DTYPE_F32, CG_DTYPE_F64};
#define NDTYPES (int)(sizeof(dtypes) / sizeof(dtypes[0]))

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

static void allreduce_cases(gc_t *g)
{
    static const cg_redop_t ops[] = {CG_OP_SUM, CG_OP_PROD, CG_OP_MIN,
                                     CG_OP_MAX, CG_OP_AVG};
    char cname[64];

    for (int d = 0; d < NDTYPES; d++)
        for (int o = 0; o < 5; o++)
            for (int scaled = 0; scaled < 2; scaled++) {
                cg_dtype_t dt = dtypes[d];
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
                        run_case(g, cname, cg_redop_name(ops[o]), &s, 1, 1);
                    }
            }
}

static void broadcast_cases(gc_t *g)
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
                    run_case(g, cname, op, &s, 1, 1);
                }
}

static void allgather_cases(gc_t *g)
{
    for (int d = 0; d < NDTYPES; d++) {
        cg_dtype_t dt = dtypes[d];
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
            run_case(g, names[k], "-", &v[k], 1, 1);
        }
    }
}

static void reducescatter_cases(gc_t *g)
{
    static const cg_redop_t ops[] = {CG_OP_SUM, CG_OP_AVG};
    int n = g->size;

    for (int d = 0; d < NDTYPES; d++)
        for (int o = 0; o < 2; o++)
            for (int scaled = 0; scaled < 2; scaled++) {
                cg_dtype_t dt = dtypes[d];
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
                    run_case(g, scaled ? "reducescatter-scaled"
                                       : "reducescatter",
                             cg_redop_name(ops[o]), &s, 1, 1);
                }
            }
}

/* n tensors of mixed sizes (1 to 3000 elements; allgather and
 * reducescatter 1 to ~1200 rows of 2), in place and out of place
 * alternating, broadcast roots in turn. */
static void fused_specs(const gc_t *g, spec_t *sp, int n,
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

static void fused_cases(gc_t *g)
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
        fused_specs(g, sp, FUSED, f[i].type, f[i].dt, f[i].op, f[i].scaled,
                    (uint32_t)g->cases);
        snprintf(cname, sizeof(cname), "fused%d-%s%s", FUSED,
                 tname[f[i].type], f[i].scaled ? "-scaled" : "");
        run_case(g, cname, f[i].type == CG_HVD_BROADCAST ? "roots"
                           : f[i].type == CG_HVD_ALLGATHER
                               ? "-" : cg_redop_name(f[i].op),
                 sp, FUSED, 3);
    }
}

/* ---- the staging chunk ------------------------------------------------- */

static int env_on(const char *name)
{
    const char *v = getenv(name);
    bool on = false;

    return v != NULL && cg_parse_bool(v, &on) && on;
}

/* 1: CG_FAULT_ALLOC fails some of this rank's allocations. */
static int faults_alloc(void)
{
    const char *v = getenv("CG_FAULT_ALLOC");

    return v != NULL && *v != '\0' && strcmp(v, "0") != 0;
}

/* 1: this rank stages CUDA tensors through host memory (CUDA mode on
 * COLLGUARD or MPI, or CG_GPU_STAGE_EMULATE); 0: it does not; -1: not
 * known here (AUTO picks the backend inside the library). */
static int stages(const gc_t *g)
{
    if (env_on("CG_GPU_STAGE_EMULATE"))
        return 1;
    if (g->device < 0 || strcasecmp(g->backend, "NCCL") == 0)
        return 0;
    if (strcasecmp(g->backend, "COLLGUARD") == 0 ||
        strcasecmp(g->backend, "MPI") == 0)
        return 1;
    return -1;
}

/* Every rank's view, in units of 256 bytes (the slots' granularity). */
enum { C_AGREED, C_SLOT, C_GOV, C_STAGES, C_FAULT, C_FALLOC, C_N };
typedef struct {
    int32_t v[C_N][MAX_RANKS];
} chunks_t;

static void gather_chunks(gc_t *g, chunks_t *c)
{
    cg_hvd_stats_t s;
    cg_governor_snapshot_t snap;

    memset(c, 0, sizeof(*c));
    cg_hvd_core_stats(g->core, &s);
    if (cg_ctx_governor_snapshot(g->ctx, &snap) != CG_OK)
        fatal("governor snapshot: %s", cg_last_error());
    c->v[C_AGREED][g->rank] = (int32_t)(s.stage_chunk_bytes / 256);
    c->v[C_SLOT][g->rank] = (int32_t)(s.stage_slot_bytes / 256);
    c->v[C_GOV][g->rank] = (int32_t)(snap.chunk_bytes / 256);
    c->v[C_STAGES][g->rank] = stages(g) == 1;
    c->v[C_FAULT][g->rank] = env_on("CG_FAULT_STAGING");
    c->v[C_FALLOC][g->rank] = faults_alloc();
    if (agree_max(g, &c->v[0][0], C_N * MAX_RANKS) != 0)
        fatal("rank %d: the core stopped while gathering the staging "
              "chunks", g->rank);
}

/* The verdict on one gathered view (the same on every rank). */
static void judge_chunks(const gc_t *g, const chunks_t *c, outcome_t *o)
{
    int32_t least = INT32_MAX, agreed = c->v[C_AGREED][0];
    int any = 0, fault = -1;

    for (int r = 0; r < g->size; r++) {
        if (c->v[C_AGREED][r] != agreed) {
            note(o, V_WRONG, "rank %d sees an agreed chunk of %d x 256 B, "
                 "rank 0 %d x 256 B", r, (int)c->v[C_AGREED][r],
                 (int)agreed);
            return;
        }
        if (c->v[C_FAULT][r] && fault < 0)
            fault = r;
        if (!c->v[C_STAGES][r])
            continue;
        any = 1;
        least = c->v[C_SLOT][r] < least ? c->v[C_SLOT][r] : least;
    }
    o->elems = (size_t)agreed * 256;
    if (!any && agreed != 0)
        note(o, V_WRONG, "no rank stages, yet %d x 256 B agreed",
             (int)agreed);
    else if (any && fault >= 0 && agreed != 0)
        note(o, V_WRONG, "rank %d has no staging slot, yet %d x 256 B "
             "agreed", fault, (int)agreed);
    else if (any && fault < 0 && (agreed == 0 || agreed != least))
        note(o, V_WRONG, "agreed %d x 256 B, want the least slot, %d x "
             "256 B", (int)agreed, (int)least);
    /* Slots hold the governor's chunk; under CG_FAULT_ALLOC an
     * allocation may have shrunk them (kept until the chunk moves), never
     * grown them past it. */
    for (int r = 0; r < g->size && any && fault < 0; r++)
        if (c->v[C_STAGES][r] &&
            (c->v[C_SLOT][r] > c->v[C_GOV][r] ||
             (!c->v[C_FALLOC][r] && c->v[C_SLOT][r] != c->v[C_GOV][r])))
            note(o, V_WRONG, "rank %d's slots hold %d x 256 B, its "
                 "governor's chunk is %d x 256 B", r, (int)c->v[C_SLOT][r],
                 (int)c->v[C_GOV][r]);
}

/* One row: the ranks' staging chunks, once they have settled (memory
 * still moving gets up to 2 s). */
static void stage_chunk_check(gc_t *g, const char *cname)
{
    struct timespec nap = {0, 50000000};
    char b[32];
    chunks_t c;
    outcome_t o;

    if (stages(g) < 0)
        return; /* AUTO: which backend runs is the library's choice */
    for (int k = 0; k < 40; k++) {
        memset(&o, 0, sizeof(o));
        gather_chunks(g, &c);
        judge_chunks(g, &c, &o);
        if (o.verdict == V_OK)
            break;
        nanosleep(&nap, NULL);
    }
    if (g->rank == 0) {
        printf("staging chunk (%s): agreed %s;", cname,
               cg_format_size(o.elems, b, sizeof(b)));
        for (int r = 0; r < g->size; r++)
            printf(" rank %d %s%s", r,
                   c.v[C_STAGES][r]
                       ? cg_format_size((uint64_t)c.v[C_SLOT][r] * 256, b,
                                        sizeof(b))
                       : "-",
                   c.v[C_FAULT][r] ? " (slots refused)" : "");
        printf("\n");
    }
    report(g, cname, "-", "bytes", &o, 0);
}

/* One staged CUDA collective that must fail on every rank, naming rank
 * `who` (the one whose slots are refused). */
static void no_slot_case(gc_t *g, cg_hvd_op_type_t type, int who)
{
    size_t n = (size_t)1 << 18; /* 1 MiB of f32 */
    cg_hvd_tensor_t t = {.field_mask = CG_HVD_TENSOR_FIELD_DEVICE,
                         .dtype = CG_DTYPE_F32, .ndim = 1,
                         .shape = {(int64_t)n}, .input = g->dev_in,
                         .output = g->dev_in, .flags = CG_HVD_IS_LEAF,
                         .device = g->device};
    char name[64], want[64];
    cg_hvd_req_h req = NULL;
    cg_status_t st;
    outcome_t o;

    memset(&o, 0, sizeof(o));
    o.elems = n;
    snprintf(name, sizeof(name), "gc.no-slot.%s",
             type == CG_HVD_BROADCAST ? "broadcast" : "allreduce");
    snprintf(want, sizeof(want), "rank %d has no staging slot", who);
    t.name = name;
    st = type == CG_HVD_BROADCAST
             ? cg_hvd_enqueue_broadcast(g->core, &t, 0, &req)
             : cg_hvd_enqueue_allreduce(g->core, &t, CG_OP_SUM, 1.0, 1.0,
                                        &req);
    if (st != CG_OK) {
        note(&o, V_WRONG, "enqueue: %s", cg_last_error());
    } else {
        st = cg_hvd_wait(req);
        if (st != CG_ERR_NO_MEMORY || strstr(cg_hvd_error(req), want) == NULL)
            note(&o, V_WRONG, "%s: %s (want CG_ERR_NO_MEMORY naming rank "
                 "%d)", cg_status_name(st), cg_hvd_error(req), who);
        else if (g->rank == 0)
            printf("%s refused as it must be: %s\n", name,
                   cg_hvd_error(req));
        cg_hvd_release(req);
    }
    report(g, type == CG_HVD_BROADCAST ? "no-slot-broadcast"
                                       : "no-slot-allreduce",
           "f32", "-", &o, 0);
}

/* With a rank whose slots are refused (CG_FAULT_STAGING=1 there): the
 * no-slot cases in place of the suite (every staged collective would fail
 * alike); 1 when they ran. */
static int no_slot_cases(gc_t *g)
{
    /* The lowest refused rank is the one the error names: the maximum of
     * size - rank over the refused ranks. */
    int32_t who = env_on("CG_FAULT_STAGING") ? g->size - g->rank : 0;

    if (agree_max(g, &who, 1) != 0)
        fatal("rank %d: the core stopped before the no-slot check",
              g->rank);
    if (who == 0)
        return 0;
    if (g->device >= 0 && stages(g) == 1) {
        no_slot_case(g, CG_HVD_ALLREDUCE, g->size - who);
        no_slot_case(g, CG_HVD_BROADCAST, g->size - who);
    }
    stage_chunk_check(g, "stage-chunk-no-slot");
    return 1;
}

/* ---- the squeeze ------------------------------------------------------- */

/* All but leave bytes of this GPU's free memory, in one cudaMalloc
 * (64 MiB less at each failure); NULL when not even 64 MiB is there. */
static void *take_ballast(size_t leave, size_t *held_p)
{
    size_t free_b = 0, total_b = 0, take;
    void *p = NULL;

    *held_p = 0;
    cuda_or_die(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo");
    take = free_b > leave ? (free_b - leave) & ~(((size_t)2 << 20) - 1) : 0;
    for (; take >= ((size_t)64 << 20); take -= (size_t)64 << 20) {
        if (cudaMalloc(&p, take) == cudaSuccess)
            break;
        (void)cudaGetLastError(); /* out of memory is not sticky */
        p = NULL;
    }
    if (p != NULL)
        *held_p = take;
    return p;
}

/* The mixed step: 200 f32 sums, 200 bf16 averages (scaled), a 9 MiB f16
 * sum, 50 reducescatters, 50 allgathers. */
static int squeeze_specs(const gc_t *g, spec_t *sp, uint32_t seed)
{
    int n = 0;

    fused_specs(g, sp + n, FUSED, CG_HVD_ALLREDUCE, CG_DTYPE_F32, CG_OP_SUM,
                0, seed);
    n += FUSED;
    fused_specs(g, sp + n, FUSED, CG_HVD_ALLREDUCE, CG_DTYPE_BF16, CG_OP_AVG,
                1, seed + 1);
    n += FUSED;
    sp[n++] = (spec_t){.type = CG_HVD_ALLREDUCE, .dt = CG_DTYPE_F16,
                       .op = CG_OP_SUM, .pre = 1, .post = 1, .oop = 1,
                       .dim0 = (int64_t)(BIG / 2) + 3, .row = 1,
                       .seed = seed + 2};
    fused_specs(g, sp + n, 50, CG_HVD_REDUCESCATTER, CG_DTYPE_F32, CG_OP_SUM,
                0, seed + 3);
    n += 50;
    fused_specs(g, sp + n, 50, CG_HVD_ALLGATHER, CG_DTYPE_I64, CG_OP_SUM, 0,
                seed + 4);
    n += 50;
    return n;
}

/* One squeeze row: a step of sp whose bits must equal *ref_hash (set by
 * the first call). */
static void squeeze_row(gc_t *g, const char *cname, int tag, const spec_t *sp,
                        int n, uint64_t *ref_hash, int first)
{
    outcome_t o;
    double sec;

    run_step(g, tag, sp, n, &o, &sec);
    if (first)
        *ref_hash = o.hash;
    else if (o.verdict == V_OK && o.hash != *ref_hash)
        note(&o, V_WRONG, "bits differ from the unsqueezed step (%016llx, "
             "want %016llx)", (unsigned long long)o.hash,
             (unsigned long long)*ref_hash);
    g->digest = hash_bytes(g->digest, &o.hash, sizeof(o.hash));
    report(g, cname, "mixed", "mixed", &o, sec * 1e3);
}

static void squeeze(gc_t *g)
{
    spec_t sp[MAXT];
    const char *v = getenv("CG_TEST_SQUEEZE_LEAVE");
    long leave_mib = v != NULL ? strtol(v, NULL, 10) : 256;
    int n = squeeze_specs(g, sp, (uint32_t)g->cases), tag = g->cases;
    cg_governor_snapshot_t snap;
    int32_t held[MAX_RANKS] = {0}, dummy = 0;
    uint64_t h0 = 0;
    size_t got = 0;
    void *ballast = NULL;
    struct timespec nap = {0, 300000000}; /* > 2 CG_PROBE_INTERVAL */

    if (leave_mib <= 0)
        fatal("CG_TEST_SQUEEZE_LEAVE=%s: expected MiB > 0", v);
    squeeze_row(g, "squeeze-plain", tag, sp, n, &h0, 1);
    squeeze_row(g, "squeeze-plain-again", tag, sp, n, &h0, 0);
    if (g->device < 0)
        return; /* host mode: CG_FAULT_ALLOC is the squeeze */
    /* In rank order, so ranks sharing a GPU do not race for it. */
    for (int r = 0; r < g->size; r++) {
        if (r == g->rank) {
            ballast = take_ballast((size_t)leave_mib << 20, &got);
            held[r] = (int32_t)(got >> 20);
        }
        if (agree_max(g, &dummy, 1) != 0)
            fatal("rank %d: the core stopped before the ballast", g->rank);
    }
    if (agree_max(g, held, g->size) != 0)
        fatal("rank %d: the core stopped before the ballast", g->rank);
    nanosleep(&nap, NULL); /* the governor samples it */
    cg_ctx_governor_snapshot(g->ctx, &snap);
    if (g->rank == 0) {
        printf("ballast (leave %ld MiB):", leave_mib);
        for (int r = 0; r < g->size; r++)
            printf(" rank %d %d MiB", r, (int)held[r]);
        printf("; rank 0 sees %llu MiB free, pressure %s, fusion %llu, "
               "chunk %llu, alloc_failures %llu\n",
               (unsigned long long)(snap.free_bytes >> 20),
               snap.pressure == CG_PRESSURE_OK     ? "ok"
               : snap.pressure == CG_PRESSURE_WARN ? "warn" : "critical",
               (unsigned long long)snap.fusion_bytes,
               (unsigned long long)snap.chunk_bytes,
               (unsigned long long)snap.alloc_failures);
    }
    squeeze_row(g, "squeeze-ballast", tag, sp, n, &h0, 0);
    squeeze_row(g, "squeeze-ballast-again", tag, sp, n, &h0, 0);
    stage_chunk_check(g, "stage-chunk-ballast");
    if (ballast != NULL)
        cuda_or_die(cudaFree(ballast), "cudaFree (ballast)");
    squeeze_row(g, "squeeze-freed", tag, sp, n, &h0, 0);
    nanosleep(&nap, NULL); /* the governor sees the memory back */
    stage_chunk_check(g, "stage-chunk-freed");
}

/* ---- the end ----------------------------------------------------------- */

/* Under CG_FAULT_ALLOC=N the governor must have failed allocations (else
 * the faulted run tested nothing more than the plain one). */
static void fault_check(gc_t *g)
{
    const char *v = getenv("CG_FAULT_ALLOC");
    cg_governor_snapshot_t snap;
    outcome_t o;

    memset(&o, 0, sizeof(o));
    if (cg_ctx_governor_snapshot(g->ctx, &snap) != CG_OK)
        fatal("governor snapshot: %s", cg_last_error());
    if (g->rank == 0)
        printf("governor: alloc_failures %llu, degrades %llu, fusion peak "
               "%llu (device %llu), staging peak %llu\n",
               (unsigned long long)snap.alloc_failures,
               (unsigned long long)snap.degrades,
               (unsigned long long)snap.peak_bytes[CG_MEM_CAT_FUSION],
               (unsigned long long)snap.device_peak_bytes[CG_MEM_CAT_FUSION],
               (unsigned long long)snap.peak_bytes[CG_MEM_CAT_STAGING]);
    if (v == NULL || strtol(v, NULL, 10) <= 0)
        return;
    o.elems = (size_t)snap.alloc_failures;
    if (snap.alloc_failures == 0)
        note(&o, V_WRONG, "CG_FAULT_ALLOC=%s but no allocation failed", v);
    report(g, "fault-alloc-failures", "-", "-", &o, 0);
}

/* Rank 0 prints every rank's digest (one allgather of a u64). */
static void print_digests(gc_t *g)
{
    uint64_t d = g->digest;
    cg_hvd_tensor_t t = {.name = "gc.digest", .dtype = CG_DTYPE_U64,
                         .ndim = 1, .shape = {1}, .input = &d,
                         .flags = CG_HVD_IS_LEAF, .device = -1};
    const void *data;
    int64_t rows;
    cg_hvd_req_h req;
    uint64_t x;

    if (cg_hvd_enqueue_allgather(g->core, &t, &req) != CG_OK)
        fatal("digest: %s", cg_last_error());
    if (cg_hvd_wait(req) != CG_OK ||
        cg_hvd_allgather_result(req, &data, &rows) != CG_OK ||
        rows != g->size)
        fatal("digest: %s", cg_hvd_error(req));
    if (g->rank == 0) {
        printf("gpu_check digest:");
        for (int r = 0; r < g->size; r++) {
            memcpy(&x, (const char *)data + 8 * (size_t)r, 8);
            printf(" %016llx", (unsigned long long)x);
        }
        printf("\n");
    }
    cg_hvd_release(req);
}

int main(int argc, char **argv)
{
    cg_ctx_params_t cp = {.field_mask = CG_CTX_PARAM_BOOTSTRAP,
                          .bootstrap = 1};
    gc_t g = {.device = 0, .digest = 0xcbf29ce484222325ull, .corrupt = -1};
    int host = argc > 1 && strcmp(argv[1], "--host") == 0, ndev = 0;
    const char *be;

    if (argc > 2 || (argc == 2 && !host))
        fatal("usage: gpu_check [--host]");
    for (int d = 0; d < NDTYPES; d++)
        if (el_size(dtypes[d]) != cg_dtype_size(dtypes[d]))
            fatal("test bug: el_size(%s)", cg_dtype_name(dtypes[d]));
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (getenv("CG_TEST_CORRUPT_CASE") != NULL)
        g.corrupt = atoi(getenv("CG_TEST_CORRUPT_CASE"));
    if (host) {
        g.device = -1;
        be = getenv("HOROVOD_CPU_OPERATIONS");
        be = getenv("CG_CPU_OPERATIONS") ? getenv("CG_CPU_OPERATIONS") : be;
        g.backend = be != NULL ? be : "COLLGUARD";
    } else {
        if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
            printf("gpu_check: no CUDA device; skipped\n");
            return 77;
        }
        g.device = launcher_gpu(ndev);
        cuda_or_die(cudaSetDevice(g.device), "cudaSetDevice");
        cuda_or_die(cudaFree(NULL), "CUDA context");
        be = getenv("HOROVOD_GPU_OPERATIONS");
        be = getenv("CG_GPU_OPERATIONS") ? getenv("CG_GPU_OPERATIONS") : be;
        g.backend = be != NULL ? be : "AUTO";
    }
    if (cg_ctx_create(&cp, &g.ctx) != CG_OK ||
        cg_hvd_core_create(g.ctx, &g.core) != CG_OK)
        fatal("%s", cg_last_error());
    g.rank = cg_hvd_core_rank(g.core);
    g.size = cg_hvd_core_size(g.core);
    if (g.size > MAX_RANKS)
        fatal("%d ranks: the inputs stay exact up to %d", g.size, MAX_RANKS);
    g.dev_in = arena(&g);
    g.dev_out = arena(&g);
    g.h_in = malloc(ARENA);
    g.h_out = malloc(ARENA);
    g.c_in = malloc(ARENA);
    g.c_out = malloc(ARENA);
    if (!g.h_in || !g.h_out || !g.c_in || !g.c_out)
        fatal("out of host memory");
    if (g.rank == 0)
        printf("%-9s %5s  %-22s %-5s %-8s %9s  %-7s %9s\n", "backend",
               "ranks", "case", "dtype", "op", "elements", "check", "ms");

    if (!no_slot_cases(&g)) {
        allreduce_cases(&g);
        stage_chunk_check(&g, "stage-chunk");
        broadcast_cases(&g);
        allgather_cases(&g);
        reducescatter_cases(&g);
        fused_cases(&g);
        squeeze(&g);
        fault_check(&g);
    }
    print_digests(&g);
    if (g.rank == 0)
        printf("gpu_check: %d cases, %d wrong, %d refused\n", g.cases,
               g.wrong, g.refused);

    cg_hvd_core_destroy(g.core);
    cg_ctx_destroy(g.ctx);
    if (g.device >= 0) {
        cuda_or_die(cudaFree(g.dev_in), "cudaFree");
        cuda_or_die(cudaFree(g.dev_out), "cudaFree");
    } else {
        free(g.dev_in);
        free(g.dev_out);
    }
    free(g.h_in);
    free(g.h_out);
    free(g.c_in);
    free(g.c_out);
    return g.wrong ? 1 : 0;
}
