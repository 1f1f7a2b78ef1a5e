/* SPDX-License-Identifier: Apache-2.0 */
/*
 * reduce_bench: throughput of the host reduction kernels (cg_reduce,
 * inout op= in) per dtype and size, next to memcpy on the same buffers in
 * the same run, with the ratio. GB/s is buffer bytes per second (like
 * nccl-tests' algbw): a reduction moves 3x the buffer (2 reads, 1 write),
 * memcpy 2x, so 0.67 is the ratio where both are bound by memory bandwidth.
 * Usage: reduce_bench [-b 4K] [-e 256M] [-f 4] [-d f32,f16,bf16,i32]
 *                     [-o sum] [-t ms per point]
 */
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "collguard/types.h"
#include "core/base/parse.h"
#include "core/reduce/reduce.h"

#define MAX_DTYPES CG_DTYPE_COUNT

typedef struct {
    uint64_t min, max, factor;
    int64_t ms;
    cg_redop_t op;
    cg_dtype_t dts[MAX_DTYPES];
    int ndts;
} opts_t;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Mean seconds per call: one warm-up, then repeat for ms (at least 3). */
static double time_op(const opts_t *o, void *dst, const void *src,
                      size_t bytes, int dt)
{
    size_t count = dt < 0 ? 0 : bytes / cg_dtype_size((cg_dtype_t)dt);
    long iters = 0;
    double t0 = 0, t;
    for (;;) {
        if (dt < 0)
            memcpy(dst, src, bytes);
        else
            cg_reduce(dst, src, count, (cg_dtype_t)dt, o->op);
        if (iters++ == 0)
            t0 = now_s(); /* first call was the warm-up */
        t = now_s();
        if (iters > 3 && (t - t0) * 1e3 >= (double)o->ms)
            return (t - t0) / (double)(iters - 1);
    }
}

static int parse_dtypes(opts_t *o, char *list)
{
    o->ndts = 0;
    for (char *tok = strtok(list, ","); tok != NULL; tok = strtok(NULL, ",")) {
        if (o->ndts == MAX_DTYPES ||
            cg_dtype_by_name(tok, &o->dts[o->ndts]) != CG_OK) {
            fprintf(stderr, "reduce_bench: -d: %s\n", cg_last_error());
            return -1;
        }
        o->ndts++;
    }
    return o->ndts > 0 ? 0 : -1;
}

static int parse_args(opts_t *o, int argc, char **argv)
{
    char dlist[] = "f32,f16,bf16,i32";
    int c;
    *o = (opts_t){4096, 256ull << 20, 4, 100, CG_OP_SUM, {0}, 0};
    if (parse_dtypes(o, dlist) != 0)
        return -1;
    while ((c = getopt(argc, argv, "b:e:f:d:o:t:")) != -1) {
        int ok = 1;
        switch (c) {
        case 'b': ok = cg_parse_size(optarg, &o->min) && o->min > 0; break;
        case 'e': ok = cg_parse_size(optarg, &o->max); break;
        case 'f': ok = cg_parse_size(optarg, &o->factor) && o->factor > 1;
                  break;
        case 'd': if (parse_dtypes(o, optarg) != 0) return -1; break;
        case 'o': ok = cg_redop_by_name(optarg, &o->op) == CG_OK &&
                       cg_reduce_check(CG_DTYPE_F32, o->op) == CG_OK;
                  break;
        case 't': ok = cg_parse_int(optarg, 1, 60000, &o->ms); break;
        default: ok = 0;
        }
        if (!ok) {
            fprintf(stderr, "reduce_bench: bad -%c '%s'; usage: reduce_bench "
                    "[-b 4K] [-e 256M] [-f 4] [-d f32,f16,bf16,i32] [-o sum] "
                    "[-t 100 (ms per point, 1..60000)]\n", optopt ? optopt : c,
                    optarg ? optarg : "");
            return -1;
        }
    }
    return o->min <= o->max ? 0 : -1;
}

int main(int argc, char **argv)
{
    opts_t o;
    char sz[32];
    if (parse_args(&o, argc, argv) != 0)
        return 2;
    unsigned char *dst = malloc(o.max), *src = malloc(o.max);
    if (dst == NULL || src == NULL) {
        fprintf(stderr, "reduce_bench: cannot allocate 2 x %llu bytes\n",
                (unsigned long long)o.max);
        return 1;
    }
    for (uint64_t i = 0; i < o.max; i++) /* small normal values, no NaN */
        dst[i] = 0, src[i] = (unsigned char)(i % 7 == 0 ? 0x3c : i % 5);
    printf("# reduce_bench: cg_reduce(inout, in) op %s vs memcpy(dst, src) "
           "on the same buffers; GB/s = buffer bytes / s; ratio = op / "
           "memcpy (0.67 = both memory bound: op moves 3x, memcpy 2x)\n",
           cg_redop_name(o.op));
    printf("%10s %11s", "size", "memcpy GB/s");
    for (int d = 0; d < o.ndts; d++)
        printf(" %6s GB/s  ratio", cg_dtype_name(o.dts[d]));
    printf("\n");
    for (uint64_t b = o.min; b <= o.max; b *= o.factor) {
        double mc = (double)b / time_op(&o, dst, src, b, -1) / 1e9;
        printf("%10s %11.2f", cg_format_size(b, sz, sizeof(sz)), mc);
        for (int d = 0; d < o.ndts; d++) {
            double g = (double)b / time_op(&o, dst, src, b, o.dts[d]) / 1e9;
            printf(" %11.2f %6.2f", g, g / mc);
        }
        printf("\n");
        fflush(stdout);
    }
    free(dst);
    free(src);
    return 0;
}
