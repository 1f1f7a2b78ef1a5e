/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Element access for the perf tools' reference checks: load and store any
 * cg_dtype_t as double with plain scalar code (own f16/bf16 conversions,
 * round to nearest even; integers wrap), the deterministic per-rank
 * input patterns, and the expected result of a reduction over them.
 * Independent of the library's reduction kernels.
 */
#include <math.h>
#include <string.h>

#include "tests/collective/perf_common.h"

static float perf_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1f;
    uint32_t m = h & 0x3ff, x;
    float f;

    if (e == 0)
        return (sign ? -1.0f : 1.0f) * ldexpf((float)m, -24);
    if (e == 31)
        x = sign | 0x7f800000u | (m << 13);
    else
        x = sign | ((e - 15 + 127) << 23) | (m << 13);
    memcpy(&f, &x, sizeof(f));
    return f;
}

static uint16_t perf_f32_to_f16(float f)
{
    uint32_t x, sign, man, h, rem, half;
    int32_t exp;

    memcpy(&x, &f, sizeof(x));
    sign = (x >> 16) & 0x8000;
    exp = (int32_t)((x >> 23) & 0xff) - 127 + 15;
    man = x & 0x7fffff;
    if (((x >> 23) & 0xff) == 0xff)
        return (uint16_t)(sign | 0x7c00 | (man ? 0x200 : 0));
    if (exp >= 31)
        return (uint16_t)(sign | 0x7c00);
    if (exp <= 0) {
        int shift = 14 - exp;
        if (exp < -10)
            return (uint16_t)sign;
        man |= 0x800000;
        h = man >> shift;
        rem = man & ((1u << shift) - 1);
        half = 1u << (shift - 1);
    } else {
        h = ((uint32_t)exp << 10) | (man >> 13);
        rem = man & 0x1fff;
        half = 0x1000;
    }
    if (rem > half || (rem == half && (h & 1)))
        h++;
    return (uint16_t)(sign | h);
}

static float perf_bf16_to_f32(uint16_t b)
{
    uint32_t x = (uint32_t)b << 16;
    float f;
    memcpy(&f, &x, sizeof(f));
    return f;
}

static uint16_t perf_f32_to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof(x));
    if ((x & 0x7fffffff) > 0x7f800000)
        return (uint16_t)((x >> 16) | 0x40);
    return (uint16_t)((x + 0x7fff + ((x >> 16) & 1)) >> 16);
}

double perf_load(cg_dtype_t dt, const void *buf, size_t i)
{
    switch (dt) {
    case CG_DTYPE_I8: return ((const int8_t *)buf)[i];
    case CG_DTYPE_U8: return ((const uint8_t *)buf)[i];
    case CG_DTYPE_I16: return ((const int16_t *)buf)[i];
    case CG_DTYPE_U16: return ((const uint16_t *)buf)[i];
    case CG_DTYPE_I32: return ((const int32_t *)buf)[i];
    case CG_DTYPE_U32: return ((const uint32_t *)buf)[i];
    case CG_DTYPE_I64: return (double)((const int64_t *)buf)[i];
    case CG_DTYPE_U64: return (double)((const uint64_t *)buf)[i];
    case CG_DTYPE_F16: return perf_f16_to_f32(((const uint16_t *)buf)[i]);
    case CG_DTYPE_F32: return ((const float *)buf)[i];
    case CG_DTYPE_F64: return ((const double *)buf)[i];
    case CG_DTYPE_BF16: return perf_bf16_to_f32(((const uint16_t *)buf)[i]);
    default: return NAN;
    }
}

void perf_store(cg_dtype_t dt, void *buf, size_t i, double v)
{
    uint64_t w = (uint64_t)(int64_t)(isfinite(v) ? v : 0);

    switch (dt) {
    case CG_DTYPE_I8: ((int8_t *)buf)[i] = (int8_t)(uint8_t)w; break;
    case CG_DTYPE_U8: ((uint8_t *)buf)[i] = (uint8_t)w; break;
    case CG_DTYPE_I16: ((int16_t *)buf)[i] = (int16_t)(uint16_t)w; break;
    case CG_DTYPE_U16: ((uint16_t *)buf)[i] = (uint16_t)w; break;
    case CG_DTYPE_I32: ((int32_t *)buf)[i] = (int32_t)(uint32_t)w; break;
    case CG_DTYPE_U32: ((uint32_t *)buf)[i] = (uint32_t)w; break;
    case CG_DTYPE_I64: ((int64_t *)buf)[i] = (int64_t)w; break;
    case CG_DTYPE_U64: ((uint64_t *)buf)[i] = w; break;
    case CG_DTYPE_F16:
        ((uint16_t *)buf)[i] = perf_f32_to_f16((float)v);
        break;
    case CG_DTYPE_F32: ((float *)buf)[i] = (float)v; break;
    case CG_DTYPE_F64: ((double *)buf)[i] = v; break;
    case CG_DTYPE_BF16:
        ((uint16_t *)buf)[i] = perf_f32_to_bf16((float)v);
        break;
    default: break;
    }
}

double perf_as_type(cg_dtype_t dt, double v)
{
    uint64_t tmp = 0;
    perf_store(dt, &tmp, 0, v);
    return perf_load(dt, &tmp, 0);
}

static bool perf_unsigned(cg_dtype_t dt)
{
    return dt == CG_DTYPE_U8 || dt == CG_DTYPE_U16 || dt == CG_DTYPE_U32 ||
           dt == CG_DTYPE_U64;
}

double perf_pattern(const perf_opts_t *o, int r, size_t i)
{
    uint64_t x;

    if (o->random) {
        x = (uint64_t)i * 0x9e3779b97f4a7c15ull ^ ((uint64_t)r + 1) << 40;
        x ^= x >> 31;
        x *= 0xbf58476d1ce4e5b9ull;
        x ^= x >> 29;
        return ((double)(x >> 11) / 9007199254740992.0 - 0.5) * 4.0;
    }
    if (o->op == CG_OP_PROD)
        return (i + (size_t)r) % 3 == 0 ? 2 : 1;
    x = ((uint64_t)i * 7 + (uint64_t)r * 3) % 11;
    return perf_unsigned(o->dt) ? (double)x : (double)x - 5;
}

double perf_reduce_expect(const perf_job_t *job, const perf_opts_t *o,
                          size_t i)
{
    double acc = perf_as_type(o->dt, perf_pattern(o, 0, i));

    for (int r = 1; r < job->size; r++) {
        double v = perf_as_type(o->dt, perf_pattern(o, r, i));
        switch (o->op) {
        case CG_OP_PROD: acc *= v; break;
        case CG_OP_MIN: acc = v < acc ? v : acc; break;
        case CG_OP_MAX: acc = v > acc ? v : acc; break;
        default: acc += v; break;
        }
    }
    if (o->op == CG_OP_AVG) {
        if (o->dt == CG_DTYPE_F16 || o->dt == CG_DTYPE_BF16 ||
            o->dt == CG_DTYPE_F32 || o->dt == CG_DTYPE_F64)
            return acc / job->size; /* compared with a tolerance */
        acc = (double)((long long)acc / job->size);
    }
    return perf_as_type(o->dt, acc);
}

double perf_reduce_tolerance(const perf_opts_t *o, double want)
{
    double ulp = o->dt == CG_DTYPE_F16 ? 1.0 / 1024 : o->dt == CG_DTYPE_BF16
                 ? 1.0 / 128 : o->dt == CG_DTYPE_F32 ? 1.2e-7 : 2.3e-16;
    if (o->op != CG_OP_AVG)
        return 0;
    return 2 * ulp * (want < 0 ? -want : want) + 1e-300;
}
