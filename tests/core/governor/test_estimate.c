/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/governor/estimate.c against hand-computed cases: bytes per
 * parameter for each optimizer and precision mode (fp32 Adam 16, mixed
 * Adam 2+2+4+8), NCCL's buffers and fixed cost, host staging for the
 * other backends, the reserve, the largest sizes that fit (NCCL_BUFFSIZE
 * first with the fusion floor kept, then the fusion threshold), and bad
 * arguments.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "collguard/estimate.h"

#define MiB (1ull << 20)
#define GiB (1ull << 30)

static cg_estimate_params_t base(void)
{
    return (cg_estimate_params_t){
        .params = 1000000000ull, .dtype = CG_DTYPE_F32,
        .optimizer = CG_EST_ADAM, .mixed = CG_EST_MIXED_NONE, .ranks = 1,
        .backend = CG_EST_BACKEND_NCCL, .free_bytes = 64 * GiB,
        .total_bytes = 64 * GiB, .reserve_bytes = 0,
        .fusion_threshold = 128 * MiB, .fusion_min = 1 * MiB,
        .nccl_buffsize = 4 * MiB, .nccl_buffsize_min = 256 << 10};
}

static cg_estimate_t est(const cg_estimate_params_t *p)
{
    cg_estimate_t e;
    cr_assert_eq(cg_estimate(p, &e), CG_OK, "%s", cg_last_error());
    return e;
}

Test(estimate, fp32_adam_is_16_bytes_per_parameter_plus_nccl)
{
    cg_estimate_params_t p = base();
    cg_estimate_t e = est(&p);

    cr_assert_eq(e.param_bytes, 4000000000ull);
    cr_assert_eq(e.grad_bytes, 4000000000ull);
    cr_assert_eq(e.master_bytes, 0);
    cr_assert_eq(e.optimizer_bytes, 8000000000ull);
    cr_assert_eq(e.model_bytes, 16000000000ull);
    cr_assert_eq(e.fusion_bytes, 128 * MiB);
    cr_assert_eq(e.nccl_buffer_bytes, 0, "one rank has no NCCL peers");
    cr_assert_eq(e.nccl_fixed_bytes, 580 * MiB);
    cr_assert_eq(e.device_bytes, 16000000000ull + 128 * MiB + 580 * MiB);
    cr_assert_eq(e.headroom_bytes,
                 (int64_t)(64 * GiB) - (int64_t)e.device_bytes);
    cr_assert(e.fits);
    cr_assert_eq(e.fusion_fit, 128 * MiB);
    cr_assert_eq(e.nccl_buffsize_fit, 4 * MiB);
    p.ranks = 8;
    e = est(&p);
    cr_assert_eq(e.nccl_buffer_bytes, 64 * 4 * MiB);
    cr_assert_eq(e.device_bytes,
                 16000000000ull + 128 * MiB + 256 * MiB + 580 * MiB);
}

Test(estimate, bytes_per_parameter_by_optimizer_and_precision)
{
    /* {optimizer, mixed, dtype, bytes per parameter} */
    static const struct { int opt, mixed, dtype; uint64_t per; } cases[] = {
        {CG_EST_SGD, CG_EST_MIXED_NONE, CG_DTYPE_F32, 8},
        {CG_EST_MOMENTUM, CG_EST_MIXED_NONE, CG_DTYPE_F32, 12},
        {CG_EST_ADAMW, CG_EST_MIXED_NONE, CG_DTYPE_F32, 16},
        {CG_EST_ADAM, CG_EST_MIXED_NONE, CG_DTYPE_F64, 32},
        {CG_EST_SGD, CG_EST_MIXED_NONE, CG_DTYPE_F16, 4},
        {CG_EST_ADAM, CG_EST_MIXED_NONE, CG_DTYPE_BF16, 8},
        {CG_EST_SGD, CG_EST_MIXED_FP16, CG_DTYPE_F32, 8},      /* 2+2+4 */
        {CG_EST_MOMENTUM, CG_EST_MIXED_BF16, CG_DTYPE_F32, 12}, /* +4 */
        {CG_EST_ADAM, CG_EST_MIXED_BF16, CG_DTYPE_F32, 16}};   /* +8 */
    cg_estimate_params_t p = base();

    p.params = 1000;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        p.optimizer = cases[i].opt;
        p.mixed = cases[i].mixed;
        p.dtype = cases[i].dtype;
        cg_estimate_t e = est(&p);
        cr_assert_eq(e.model_bytes, 1000 * cases[i].per,
                     "case %zu: %llu bytes, want %llu", i,
                     (unsigned long long)e.model_bytes,
                     (unsigned long long)(1000 * cases[i].per));
        if (cases[i].mixed != CG_EST_MIXED_NONE) {
            cr_assert_eq(e.param_bytes, 2000);
            cr_assert_eq(e.master_bytes, 4000);
        }
    }
}

Test(estimate, tight_memory_fits_the_largest_sizes_beside_the_model)
{
    cg_estimate_params_t p = base();
    uint64_t model = 8000000000ull; /* 1e9 fp32 parameters, sgd */
    cg_estimate_t e;

    p.optimizer = CG_EST_SGD;
    p.ranks = 2;
    p.reserve_bytes = 1 * GiB;
    /* 73 MiB left beside model, NCCL's fixed cost and the reserve: NCCL
     * gets pow2floor((73 - 1) MiB / 64) = 1 MiB, fusion pow2floor(9 MiB). */
    p.free_bytes = model + 580 * MiB + 73 * MiB + p.reserve_bytes;
    e = est(&p);
    cr_assert_eq(e.nccl_buffsize_fit, 1 * MiB);
    cr_assert_eq(e.fusion_fit, 8 * MiB);
    cr_assert(!e.fits, "the configured 128 MiB + 64 x 4 MiB do not fit");
    cr_assert_eq(e.headroom_bytes, (int64_t)(73 * MiB) -
                                       (int64_t)(128 * MiB + 256 * MiB));
    /* Below the NCCL floor: nothing fits. */
    p.free_bytes = model + 580 * MiB + 8 * MiB + p.reserve_bytes;
    e = est(&p);
    cr_assert_eq(e.nccl_buffsize_fit, 0);
    cr_assert_eq(e.fusion_fit, 0);
    /* Less free than the model: nothing, and the shortfall said. */
    p.free_bytes = model / 2;
    e = est(&p);
    cr_assert(!e.fits);
    cr_assert_eq(e.fusion_fit, 0);
    cr_assert_eq(e.headroom_bytes, (int64_t)(model / 2 - GiB) -
                                       (int64_t)e.device_bytes);
}

Test(estimate, host_staged_backends_have_no_nccl_cost)
{
    cg_estimate_params_t p = base();
    cg_estimate_t e;

    p.backend = CG_EST_BACKEND_COLLGUARD;
    p.ranks = 4;
    p.free_bytes = 16000000000ull + 20 * MiB; /* 20 MiB beside the model */
    e = est(&p);
    cr_assert_eq(e.nccl_buffer_bytes + e.nccl_fixed_bytes, 0);
    cr_assert_eq(e.staging_host_bytes, 128 * MiB);
    cr_assert_eq(e.device_bytes, 16000000000ull + 128 * MiB,
                 "host staging is not device memory");
    cr_assert_eq(e.fusion_fit, 16 * MiB);
    cr_assert_eq(e.nccl_buffsize_fit, 0);
}

Test(estimate, bad_arguments_are_clear_errors)
{
    cg_estimate_params_t p = base();
    cg_estimate_t e;

    p.params = 0;
    cr_assert_eq(cg_estimate(&p, &e), CG_ERR_INVALID_PARAM);
    cr_assert(strstr(cg_last_error(), "parameter count must be > 0"));
    p = base();
    p.ranks = 0;
    cr_assert_eq(cg_estimate(&p, &e), CG_ERR_INVALID_PARAM);
    cr_assert(strstr(cg_last_error(), "ranks must be >= 1 (got 0)"));
    p = base();
    p.dtype = CG_DTYPE_I32;
    cr_assert_eq(cg_estimate(&p, &e), CG_ERR_INVALID_PARAM);
    cr_assert(strstr(cg_last_error(), "dtype must be f16, bf16, f32 or f64"));
    p = base();
    p.dtype = CG_DTYPE_F16;
    p.mixed = CG_EST_MIXED_FP16;
    cr_assert_eq(cg_estimate(&p, &e), CG_ERR_INVALID_PARAM);
    cr_assert(strstr(cg_last_error(), "keeps fp32 master weights"));
    p = base();
    p.optimizer = (cg_est_optimizer_t)9;
    cr_assert_eq(cg_estimate(&p, &e), CG_ERR_INVALID_PARAM);
    cr_assert_eq(cg_estimate(NULL, &e), CG_ERR_INVALID_PARAM);
    cr_assert_eq(cg_est_optimizer_parse("adamw"), CG_EST_ADAMW);
    cr_assert_eq(cg_est_optimizer_parse("lion"), -1);
    cr_assert_eq(cg_est_mixed_parse("bf16"), CG_EST_MIXED_BF16);
    cr_assert_eq(cg_est_backend_parse("mpi"), CG_EST_BACKEND_MPI);
    cr_assert_eq(cg_est_backend_parse("NCCL"), -1);
}
