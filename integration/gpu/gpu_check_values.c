/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpu_check's host reference (integration/gpu/gpu_check.c): the value every
 * output element must hold, whether a reference is exact in its dtype, the
 * poison written around every tensor before a step, and the hash of the
 * outputs (a case's digest). Calls nothing of the suite's other files; the
 * per-element inputs themselves are inline in gpu_check_impl.h.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "integration/gpu/gpu_check_impl.h"

/* Element i of the reduced tensor (base: rank_base of every rank), by
 * docs/collectives.md "Reductions": post * op(pre * x_r); average: floats
 * sum * post / size, integers the sum / size truncated toward zero, then
 * post. */
double gc_ref_reduce(const spec_t *s, const uint32_t *base, int size,
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

/* True when v is exactly a value of dt (so the comparison is exact). */
int gc_representable(cg_dtype_t dt, double v)
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
void gc_poison(cg_dtype_t dt, void *buf, size_t n)
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
int gc_poisoned(cg_dtype_t dt, const void *buf, size_t n)
{
    char ref[GUARD];
    size_t el = cg_dtype_size(dt);

    for (size_t i = 0; i < n; i += GUARD / el) {
        size_t k = n - i < GUARD / el ? n - i : GUARD / el;
        gc_poison(dt, ref, k);
        if (memcmp((const char *)buf + i * el, ref, k * el) != 0)
            return 0;
    }
    return 1;
}

uint64_t gc_hash_bytes(uint64_t h, const void *buf, size_t n)
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
