/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The staging slots of the shim's CUDA path (core/backend/hvd_gpu_slots.c)
 * over a scripted governor, no GPU (CG_GPU_STAGE_EMULATE: slots from the
 * governor's own allocator): sized to the governor's chunk and made anew
 * when it moves (down under pressure, up as it eases), both slots the same
 * size, shrunk to what can be had down to CG_CHUNK_MIN, an offer of 0 when
 * even that fails (tried again only once the chunk moves), no constraint
 * from a rank that stages nothing; and a staged collective with no agreed
 * chunk failing before it touches its backend, naming the slotless rank.
 */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

#include "core/backend/hvd_gpu.h"
#include "tests/core/util/gov_fake.h"

static uint64_t staging_bytes(cg_governor_t *gov)
{
    cg_governor_snapshot_t s;

    cg_governor_snapshot(gov, &s);
    return s.current_bytes[CG_MEM_CAT_STAGING];
}

static cg_hvd_gpu_t *emulated(cg_governor_t *gov, cg_config_t *cfg, int rank)
{
    cg_hvd_gpu_t *gpu = NULL;

    cfg->gpu_stage_emulate = true;
    cr_assert_eq(cg_hvd_gpu_create(gov, NULL, rank, cfg, &gpu), CG_OK, "%s",
                 cg_last_error());
    return gpu;
}

Test(hvd_gpu_slots, follow_the_governors_chunk_down_and_up,
     .init = gov_fake_init, .fini = gov_fake_fini, .timeout = 10)
{
    cg_config_t cfg;
    cg_governor_t *gov;
    cg_hvd_gpu_t *gpu;
    size_t offer, low;

    fake_config(&cfg);
    gov = fake_governor(&cfg);
    gpu = emulated(gov, &cfg, 0);
    offer = cg_hvd_gpu_stage_prepare(gpu, false);
    cr_assert_eq(offer, 4 * MiB, "offer %zu (the governor's chunk, capped "
                 "by CG_CHUNK_SIZE)", offer);
    cr_assert_eq(cg_hvd_gpu_stage_slot(gpu), offer);
    cr_assert_eq(staging_bytes(gov), 2 * offer, "two slots of one size: %llu",
                 (unsigned long long)staging_bytes(gov));
    cr_assert_eq(cg_hvd_gpu_stage_prepare(gpu, false), offer, "kept");

    fake_step(gov, 1 * GiB + 32 * MiB, 200 * MS); /* budget 8 MiB, WARN */
    low = (size_t)cg_governor_chunk_size(gov);
    cr_assert_lt(low, offer, "the squeeze did not shrink the chunk");
    offer = cg_hvd_gpu_stage_prepare(gpu, false);
    cr_assert_eq(offer, low, "offer %zu under pressure, chunk %zu", offer,
                 low);
    cr_assert_eq(staging_bytes(gov), 2 * low, "pinned memory given back: "
                 "%llu", (unsigned long long)staging_bytes(gov));

    for (int i = 0; i < 40 && offer < 4 * MiB; i++) {
        size_t before = offer;
        fake_step(gov, 8 * GiB, 2000 * MS); /* past the dwell: eases */
        offer = cg_hvd_gpu_stage_prepare(gpu, false);
        cr_assert_eq(offer, (size_t)cg_governor_chunk_size(gov),
                     "step %d: offer %zu, chunk %llu", i, offer,
                     (unsigned long long)cg_governor_chunk_size(gov));
        cr_assert_geq(offer, before, "step %d: shrank while easing", i);
        cr_assert_eq(staging_bytes(gov), 2 * offer);
    }
    cr_assert_eq(offer, 4 * MiB, "regrew to %zu only", offer);
    cg_hvd_gpu_destroy(gpu);
    fake_destroy(gov);
}

Test(hvd_gpu_slots, one_slot_without_the_pipeline, .init = gov_fake_init,
     .fini = gov_fake_fini, .timeout = 10)
{
    cg_config_t cfg;
    cg_governor_t *gov;
    cg_hvd_gpu_t *gpu;

    fake_config(&cfg);
    cfg.gpu_stage_pipeline = false;
    gov = fake_governor(&cfg);
    gpu = emulated(gov, &cfg, 0);
    cr_assert_eq(cg_hvd_gpu_stage_prepare(gpu, false), 4 * MiB);
    cr_assert_eq(staging_bytes(gov), 4 * MiB, "%llu",
                 (unsigned long long)staging_bytes(gov));
    cg_hvd_gpu_destroy(gpu);
    fake_destroy(gov);
}

Test(hvd_gpu_slots, shrink_to_what_can_be_had_then_offer_zero,
     .init = gov_fake_init, .fini = gov_fake_fini, .timeout = 10)
{
    cg_config_t cfg;
    cg_governor_t *gov;
    cg_hvd_gpu_t *gpu;
    size_t offer;
    uint64_t fails;

    fake_config(&cfg);
    gov = fake_governor(&cfg);
    gpu = emulated(gov, &cfg, 0);
    /* Room for 1.5 MiB: 4 and 2 MiB fail, 1 MiB fits, its twin not. */
    fake.capacity = fake.live + 3 * MiB / 2;
    offer = cg_hvd_gpu_stage_prepare(gpu, false);
    cr_assert_eq(offer, 1 * MiB, "offer %zu", offer);
    cr_assert_eq(staging_bytes(gov), 1 * MiB, "the second slot is the "
                 "first's size or none: %llu",
                 (unsigned long long)staging_bytes(gov));
    /* Each failure halved the governor's chunk: the next cycle follows
     * it with two slots, and then stays. */
    offer = cg_hvd_gpu_stage_prepare(gpu, false);
    cr_assert_eq(offer, (size_t)cg_governor_chunk_size(gov), "offer %zu",
                 offer);
    cr_assert_eq(staging_bytes(gov), 2 * offer, "%llu",
                 (unsigned long long)staging_bytes(gov));
    fails = fake.backend_fails;
    cr_assert_eq(cg_hvd_gpu_stage_prepare(gpu, false), offer);
    cr_assert_eq(fake.backend_fails, fails, "retried %llu times",
                 (unsigned long long)(fake.backend_fails - fails));
    cg_hvd_gpu_destroy(gpu);

    /* Not even CG_CHUNK_MIN: an offer of 0, tried again when the chunk
     * moves (the failures lower it to the floor), not every cycle. */
    fake.capacity = fake.live + 32 * KiB;
    gpu = emulated(gov, &cfg, 0);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(cg_hvd_gpu_stage_prepare(gpu, false), 0);
    cr_assert_eq(cg_hvd_gpu_stage_slot(gpu), 0);
    cr_assert_eq(cg_governor_chunk_size(gov), cfg.chunk_min);
    fails = fake.backend_fails;
    cr_assert_eq(cg_hvd_gpu_stage_prepare(gpu, false), 0);
    cr_assert_eq(fake.backend_fails, fails, "retried at the same chunk");
    fake.capacity = 0;
    for (int i = 0; i < 10 && cg_hvd_gpu_stage_slot(gpu) == 0; i++) {
        fake_step(gov, 8 * GiB, 200 * MS); /* the chunk regrows */
        (void)cg_hvd_gpu_stage_prepare(gpu, false);
    }
    cr_assert_eq(cg_hvd_gpu_stage_slot(gpu),
                 (size_t)cg_governor_chunk_size(gov), "slot %zu once memory "
                 "is back", cg_hvd_gpu_stage_slot(gpu));
    cg_hvd_gpu_destroy(gpu);
    fake_destroy(gov);
}

Test(hvd_gpu_slots, a_rank_staging_nothing_sets_no_constraint,
     .init = gov_fake_init, .fini = gov_fake_fini, .timeout = 10)
{
    cg_config_t cfg;
    cg_governor_t *gov;
    cg_hvd_gpu_t *gpu = NULL;

    fake_config(&cfg);
    gov = fake_governor(&cfg);
    cr_assert_eq(cg_hvd_gpu_create(gov, NULL, 0, &cfg, &gpu), CG_OK);
    /* No CUDA tensor enqueued: nothing staged, whatever the backend. */
    cr_assert_eq(cg_hvd_gpu_stage_prepare(gpu, true), SIZE_MAX);
    cr_assert_eq(cg_hvd_gpu_stage_prepare(gpu, false), SIZE_MAX);
    cr_assert_eq(staging_bytes(gov), 0);
    cg_hvd_gpu_destroy(gpu);
    fake_destroy(gov);
}

/* A host backend that must not be reached. */
static int fake_calls;

static cg_status_t fake_allreduce(cg_backend_t *be, const void *send,
                                  void *recv, size_t count, cg_dtype_t dt,
                                  cg_redop_t op, double prescale,
                                  double postscale, cg_backend_mem_t mem)
{
    (void)be, (void)send, (void)recv, (void)count, (void)dt, (void)op;
    (void)prescale, (void)postscale, (void)mem;
    fake_calls++;
    return CG_OK;
}

static cg_status_t fake_broadcast(cg_backend_t *be, void *buf, size_t count,
                                  cg_dtype_t dt, int root,
                                  cg_backend_mem_t mem)
{
    (void)be, (void)buf, (void)count, (void)dt, (void)root, (void)mem;
    fake_calls++;
    return CG_OK;
}

static const cg_backend_ops_t fake_ops = {
    .kind = CG_BACKEND_COLLGUARD, .allreduce = fake_allreduce,
    .broadcast = fake_broadcast};

Test(hvd_gpu_slots, staged_collectives_fail_alike_without_a_chunk,
     .init = gov_fake_init, .fini = gov_fake_fini, .timeout = 10)
{
    cg_backend_t be = {.ops = &fake_ops, .kind = CG_BACKEND_COLLGUARD,
                       .size = 2};
    float buf[64] = {0};
    cg_config_t cfg;
    cg_governor_t *gov;
    cg_hvd_gpu_t *gpu;
    cg_status_t st;

    fake_config(&cfg);
    cfg.fault_staging = true; /* rank 1 has no slot */
    gov = fake_governor(&cfg);
    gpu = emulated(gov, &cfg, 1);
    cr_assert_eq(cg_hvd_gpu_stage_prepare(gpu, false), 0);
    cg_hvd_gpu_stage_agree(gpu, 0, 1);
    st = cg_hvd_gpu_allreduce(gpu, &be, buf, buf, 64, CG_DTYPE_F32,
                              CG_OP_SUM, 1.0, 1.0);
    cr_assert_eq(st, CG_ERR_NO_MEMORY, "%s", cg_status_name(st));
    cr_assert(strstr(cg_last_error(), "allreduce") != NULL &&
                  strstr(cg_last_error(), "rank 1 has no staging slot") &&
                  strstr(cg_last_error(), "CG_FAULT_STAGING"),
              "%s", cg_last_error());
    /* Another rank names rank 1 without knowing its reason. */
    cg_hvd_gpu_destroy(gpu);
    cfg.fault_staging = false;
    gpu = emulated(gov, &cfg, 0);
    cg_hvd_gpu_stage_agree(gpu, 0, 1);
    st = cg_hvd_gpu_broadcast(gpu, &be, buf, 64, CG_DTYPE_F32, 0);
    cr_assert_eq(st, CG_ERR_NO_MEMORY, "%s", cg_status_name(st));
    cr_assert(strstr(cg_last_error(), "broadcast") != NULL &&
                  strstr(cg_last_error(), "rank 1 has no staging slot") &&
                  strstr(cg_last_error(), "its log says which"),
              "%s", cg_last_error());
    cg_hvd_gpu_stage_agree(gpu, SIZE_MAX, -1); /* a broken invariant */
    st = cg_hvd_gpu_allreduce(gpu, &be, buf, buf, 64, CG_DTYPE_F32,
                              CG_OP_SUM, 1.0, 1.0);
    cr_assert_eq(st, CG_ERR_INTERNAL, "%s", cg_status_name(st));
    cr_assert_eq(fake_calls, 0, "the backend ran %d times", fake_calls);
    cr_assert_eq(be.broken, false, "a refusal every rank makes alike does "
                 "not break the backend");
    cg_hvd_gpu_destroy(gpu);
    fake_destroy(gov);
}
