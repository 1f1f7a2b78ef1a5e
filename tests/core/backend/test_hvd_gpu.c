/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The shim's CUDA data path where no GPU is present (CI): a CUDA tensor
 * fails at enqueue with a message naming the tensor and why, the core
 * (HOROVOD_GPU_OPERATIONS=NCCL where NCCL is built) keeps serving host
 * tensors, and the governor accounts a second raw allocator (as the CUDA
 * fusion buffer's cudaMalloc) in its categories, with shrink-and-retry.
 * Also which scalings the NCCL backend folds into NCCL. The GPU itself is
 * exercised by integration/gpu/hvd_gpu_smoke.c and gpu_check.c.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "cg_build.h"
#include "core/backend/hvd_gpu.h"
#include "core/governor/probe.h"
#include "tests/core/util/gov_fake.h"
#include "tests/core/util/test_hvd_util.h"

/* A second raw allocator standing in for cudaMalloc: fails above cap. */
typedef struct {
    size_t cap, live, allocs, frees;
} dev_fake_t;

static void *dev_alloc(void *arg, size_t size)
{
    dev_fake_t *d = arg;
    void *p;

    if (size > d->cap)
        return NULL;
    p = malloc(size);
    d->live += size;
    d->allocs++;
    return p;
}

static void dev_free(void *arg, void *ptr, size_t size)
{
    dev_fake_t *d = arg;
    d->live -= size;
    d->frees++;
    free(ptr);
}

static int body_cuda_refused(hj_rank_t *self)
{
    float dev[4] = {0}, host[4] = {1, 2, 3, 4};
    cg_hvd_tensor_t t = {.field_mask = CG_HVD_TENSOR_FIELD_DEVICE,
                         .name = "layer1.grad", .dtype = CG_DTYPE_F32,
                         .ndim = 1, .shape = {4}, .input = dev,
                         .output = dev, .device = 0};
    cg_status_t want = CG_HAVE_CUDA ? CG_ERR_NO_DEVICE : CG_ERR_UNSUPPORTED;
    const char *why = CG_HAVE_CUDA ? "no usable CUDA device"
                                   : "built without CUDA";
    cg_hvd_req_h req = NULL;
    cg_status_t st;

    st = cg_hvd_enqueue_allreduce(self->core, &t, CG_OP_SUM, 1, 1, &req);
    HJ_CHECK(self, st == want && req == NULL, "status %s, want %s",
             cg_status_name(st), cg_status_name(want));
    HJ_CHECK(self, strstr(cg_last_error(), "layer1.grad") &&
                       strstr(cg_last_error(), "CUDA device 0") &&
                       strstr(cg_last_error(), why), "message: %s",
             cg_last_error());
    t.field_mask = 0; /* the same tensor on the host still works */
    t.input = t.output = host;
    st = cg_hvd_enqueue_allreduce(self->core, &t, CG_OP_SUM, 1, 1, &req);
    HJ_CHECK(self, st == CG_OK, "host enqueue: %s", cg_last_error());
    st = cg_hvd_wait(req);
    HJ_CHECK(self, st == CG_OK, "host allreduce: %s", cg_hvd_error(req));
    cg_hvd_release(req);
    HJ_CHECK(self, host[3] == 4.0f * self->size, "host[3] = %g", host[3]);
    return 0;
}

Test(hvd_gpu, cuda_tensor_without_gpu_fails_at_enqueue, .timeout = 60)
{
    const char *env[] = {CG_HAVE_NCCL ? "HOROVOD_GPU_OPERATIONS=NCCL"
                                      : "HOROVOD_GPU_OPERATIONS=COLLGUARD",
                         NULL};
    hj_rank_t *rep;

    if (cg_cuda_device_count() > 0)
        cr_skip_test("a CUDA device is present: integration/gpu covers it");
    rep = hj_run(2, env, body_cuda_refused, NULL);
    hj_assert_passed(rep, 2);
    cr_assert_eq(rep[0].stats.allreduce_tensors, 1, "tensors %llu",
                 (unsigned long long)rep[0].stats.allreduce_tensors);
    hj_free(rep, 2);
}

Test(hvd_gpu_governor, second_allocator_accounted_and_shrunk,
     .init = gov_fake_init, .fini = gov_fake_fini, .timeout = 10)
{
    dev_fake_t d = {.cap = 3 * MiB};
    cg_mem_backend_t be = {dev_alloc, dev_free, &d, 1};
    cg_governor_snapshot_t s;
    cg_config_t cfg;
    cg_governor_t *gov;
    void *p = NULL;
    size_t got = 0;
    cg_status_t st;

    uint64_t own;

    fake_config(&cfg);
    gov = fake_governor(&cfg);
    own = fake.live; /* the governor's own state */
    st = cg_governor_alloc_shrink_on(gov, &be, CG_MEM_CAT_FUSION, 8 * MiB,
                                     1 * MiB, 256, "CG_FUSION_MIN", &p, &got);
    cr_assert_eq(st, CG_OK, "%s", cg_last_error());
    cr_assert_eq(got, 2 * MiB, "got %zu (8 MiB, 4 MiB fail at cap 3 MiB)",
                 got);
    cr_assert_eq(fake.live, own, "the governor's own backend was used: %llu",
                 (unsigned long long)(fake.live - own));
    cg_governor_snapshot(gov, &s);
    cr_assert_eq(s.current_bytes[CG_MEM_CAT_FUSION], 2 * MiB, "current %llu",
                 (unsigned long long)s.current_bytes[CG_MEM_CAT_FUSION]);
    cr_assert_eq(s.alloc_failures, 2, "failures %llu",
                 (unsigned long long)s.alloc_failures);
    cg_governor_free_on(gov, &be, CG_MEM_CAT_FUSION, p, got);
    cr_assert_eq(d.live, 0, "device bytes live %zu", d.live);
    cr_assert_eq(d.frees, 1, "frees %zu", d.frees);
    cg_governor_snapshot(gov, &s);
    cr_assert_eq(s.peak_bytes[CG_MEM_CAT_FUSION], 2 * MiB, "peak %llu",
                 (unsigned long long)s.peak_bytes[CG_MEM_CAT_FUSION]);
    fake_destroy(gov);
}

Test(hvd_gpu_governor, second_allocator_floor_failure_names_the_variable,
     .init = gov_fake_init, .fini = gov_fake_fini, .timeout = 10)
{
    dev_fake_t d = {.cap = 512 * KiB};
    cg_mem_backend_t be = {dev_alloc, dev_free, &d, 1};
    cg_config_t cfg;
    cg_governor_t *gov;
    void *p = NULL;
    size_t got = 0;
    cg_status_t st;

    fake_config(&cfg);
    gov = fake_governor(&cfg);
    st = cg_governor_alloc_shrink_on(gov, &be, CG_MEM_CAT_FUSION, 4 * MiB,
                                     1 * MiB, 256, "CG_FUSION_MIN", &p, &got);
    cr_assert_eq(st, CG_ERR_NO_MEMORY, "status %s", cg_status_name(st));
    cr_assert(strstr(cg_last_error(), "CG_FUSION_MIN") != NULL, "message: %s",
              cg_last_error());
    cr_assert_eq(d.allocs, 0, "allocs %zu", d.allocs);
    cr_assert_eq(p, NULL);
    fake_destroy(gov);
}

/* Which (dtype, op, ranks) the NCCL backend scales itself: floats with sum
 * or average on more than one rank; never on one rank (NCCL 2.28's
 * one-rank pre-multiply-sum left the last elements unscaled on an H200),
 * never integers or min/max/product. */
Test(hvd_gpu, nccl_scales_floats_sum_avg_on_several_ranks_only)
{
    const cg_dtype_t fl[] = {CG_DTYPE_F16, CG_DTYPE_BF16, CG_DTYPE_F32,
                             CG_DTYPE_F64};
    for (size_t i = 0; i < sizeof(fl) / sizeof(fl[0]); i++) {
        cr_assert(cg_backend_nccl_scales(fl[i], CG_OP_SUM, 2));
        cr_assert(cg_backend_nccl_scales(fl[i], CG_OP_AVG, 8));
        cr_assert_not(cg_backend_nccl_scales(fl[i], CG_OP_SUM, 1));
        cr_assert_not(cg_backend_nccl_scales(fl[i], CG_OP_AVG, 1));
        cr_assert_not(cg_backend_nccl_scales(fl[i], CG_OP_MAX, 2));
        cr_assert_not(cg_backend_nccl_scales(fl[i], CG_OP_PROD, 2));
    }
    cr_assert_not(cg_backend_nccl_scales(CG_DTYPE_I32, CG_OP_SUM, 2));
    cr_assert_not(cg_backend_nccl_scales(CG_DTYPE_I64, CG_OP_AVG, 2));
}

#if CG_HAVE_NCCL
/* NCCL has no 16-bit integers: the NCCL backend refuses i16 and u16 with
 * a message naming the dtype, before it creates a communicator or touches
 * the (here fake) device buffers, as Horovod's NCCL operations throw
 * "Type int16 is not supported in NCCL mode". */
Test(hvd_gpu_governor, nccl_backend_refuses_16_bit_integers,
     .init = gov_fake_init, .fini = gov_fake_fini, .timeout = 10)
{
    cg_config_t cfg;
    cg_governor_t *gov;
    cg_backend_t *be = NULL;
    char buf[16] = {0};

    fake_config(&cfg);
    gov = fake_governor(&cfg);
    cg_backend_params_t p = {.gov = gov, .cfg = &cfg, .rank = 0, .size = 2,
                             .mem = CG_BACKEND_MEM_CUDA,
                             .var = "HOROVOD_GPU_OPERATIONS"};
    cr_assert_eq(cg_backend_nccl_create(&p, &be), CG_OK, "%s",
                 cg_last_error());
    const cg_dtype_t dts[] = {CG_DTYPE_I16, CG_DTYPE_U16};
    for (size_t i = 0; i < 2; i++) {
        cg_status_t st = be->ops->allreduce(be, buf, buf, 4, dts[i],
                                            CG_OP_SUM, 1.0, 1.0,
                                            CG_BACKEND_MEM_CUDA);
        cr_assert_eq(st, CG_ERR_UNSUPPORTED, "%s allreduce: %s",
                     cg_dtype_name(dts[i]), cg_status_name(st));
        cr_assert(strstr(cg_last_error(), cg_dtype_name(dts[i])) != NULL &&
                      strstr(cg_last_error(), "not supported") != NULL,
                  "message: %s", cg_last_error());
        st = be->ops->broadcast(be, buf, 4, dts[i], 0, CG_BACKEND_MEM_CUDA);
        cr_assert_eq(st, CG_ERR_UNSUPPORTED, "%s broadcast: %s",
                     cg_dtype_name(dts[i]), cg_status_name(st));
    }
    be->ops->destroy(be);
    fake_destroy(gov);
}
#endif
