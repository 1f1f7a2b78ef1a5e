/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The staging chunk of CUDA tensors on host backends, agreed in
 * negotiation (core/engine/hvd_negotiate.c) from what each rank's staging
 * slots hold (core/backend/hvd_gpu_slots.c), across forked ranks. No GPU
 * here: CG_GPU_STAGE_EMULATE makes a rank size and offer its slots (in
 * host memory) as a rank with CUDA tensors on COLLGUARD does. Ranks whose
 * governors give different chunks (CG_CHUNK_SIZE, a memory squeeze through
 * the probe) all see the least; it follows a squeeze and its release; a
 * rank without a slot makes it 0 everywhere; a rank that stages nothing
 * adds no constraint. Also the header check of the chunk offer.
 */
#include <criterion/criterion.h>
#include <string.h>
#include <time.h>

#include "core/engine/hvd_core.h"
#include "tests/core/util/test_hvd_util.h"

#define KiB (1ull << 10)
#define MiB (1ull << 20)
#define GiB (1ull << 30)

static void nap_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Polls this rank's stats until the agreed chunk is `want` (about 8 s at
 * most); the stats of that cycle are left in self->stats. */
static int wait_chunk(hj_rank_t *self, uint64_t want)
{
    for (int i = 0; i < 1600; i++) {
        cg_hvd_core_stats(self->core, &self->stats);
        if (self->stats.stage_chunk_bytes == want)
            return 1;
        nap_ms(5);
    }
    return 0;
}

/* A host allreduce every rank joins: the phases' barrier. */
static int barrier(hj_rank_t *self, const char *name)
{
    float x = 1.0f;
    cg_hvd_tensor_t t = {.name = name, .dtype = CG_DTYPE_F32, .ndim = 1,
                         .shape = {1}, .input = &x, .output = &x};
    cg_hvd_req_h req;
    char msg[256];

    return hj_settle(cg_hvd_enqueue_allreduce(self->core, &t, CG_OP_SUM, 1,
                                              1, &req),
                     &req, msg, sizeof(msg)) == CG_OK &&
           x == (float)self->size;
}

/* Rank 0 caps its chunk at 1 MiB, rank 1 at 256 KiB; rank 2 does not
 * stage: every rank agrees on 256 KiB, each holding its own slots. */
static int body_caps(hj_rank_t *self)
{
    static const uint64_t slot[3] = {1 * MiB, 256 * KiB, 0};

    HJ_CHECK(self, wait_chunk(self, 256 * KiB), "agreed chunk %llu, want "
             "256 KiB (the least slot)",
             (unsigned long long)self->stats.stage_chunk_bytes);
    HJ_CHECK(self, self->stats.stage_slot_bytes == slot[self->rank],
             "this rank's slots hold %llu, want %llu",
             (unsigned long long)self->stats.stage_slot_bytes,
             (unsigned long long)slot[self->rank]);
    HJ_CHECK(self, barrier(self, "caps.done"), "barrier failed");
    return 0;
}

Test(hvd_stage_chunk, ranks_agree_on_the_least_slot, .timeout = 60)
{
    const char *env[] = {"@0:CG_GPU_STAGE_EMULATE=1",
                         "@1:CG_GPU_STAGE_EMULATE=1", "@0:CG_CHUNK_SIZE=1MiB",
                         "@1:CG_CHUNK_SIZE=256KiB", NULL};
    hj_rank_t *rep = hj_run(3, env, body_caps, NULL);

    hj_assert_passed(rep, 3);
    hj_free(rep, 3);
}

/* Nobody stages: nothing agreed (0), no slot anywhere. */
static int body_none(hj_rank_t *self)
{
    HJ_CHECK(self, barrier(self, "none.a") && barrier(self, "none.b"),
             "barrier failed");
    cg_hvd_core_stats(self->core, &self->stats);
    HJ_CHECK(self, self->stats.stage_chunk_bytes == 0 &&
                       self->stats.stage_slot_bytes == 0,
             "chunk %llu, slot %llu without staging",
             (unsigned long long)self->stats.stage_chunk_bytes,
             (unsigned long long)self->stats.stage_slot_bytes);
    return 0;
}

Test(hvd_stage_chunk, no_rank_staging_agrees_nothing, .timeout = 60)
{
    hj_rank_t *rep = hj_run(2, NULL, body_none, NULL);

    hj_assert_passed(rep, 2);
    hj_free(rep, 2);
}

/* Three ranks, 16 GiB each: chunks 1 MiB, 512 KiB and 4 MiB (the caps),
 * agreed 512 KiB. Rank 2's memory drops to 2 MiB (budget 512 KiB, chunk
 * 32 KiB): every rank follows to 32 KiB; it comes back: every rank
 * climbs with rank 2's chunk (one doubling a sample) to 512 KiB again. */
static int body_squeeze(hj_rank_t *self)
{
    uint64_t seen[16];
    int nseen = 0;

    HJ_CHECK(self, wait_chunk(self, 512 * KiB), "agreed %llu before the "
             "squeeze, want 512 KiB",
             (unsigned long long)self->stats.stage_chunk_bytes);
    HJ_CHECK(self, barrier(self, "squeeze.before"), "barrier failed");
    if (self->rank == 2)
        atomic_store(&self->mem_bytes, 2 * MiB);
    HJ_CHECK(self, wait_chunk(self, 32 * KiB), "agreed %llu under rank 2's "
             "squeeze, want 32 KiB",
             (unsigned long long)self->stats.stage_chunk_bytes);
    if (self->rank == 2)
        HJ_CHECK(self, self->stats.stage_slot_bytes == 32 * KiB,
                 "rank 2's slots hold %llu under the squeeze, want 32 KiB",
                 (unsigned long long)self->stats.stage_slot_bytes);
    else
        HJ_CHECK(self, self->stats.stage_slot_bytes ==
                           (self->rank == 0 ? 1 * MiB : 512 * KiB),
                 "rank %d's slots hold %llu", self->rank,
                 (unsigned long long)self->stats.stage_slot_bytes);
    HJ_CHECK(self, barrier(self, "squeeze.during"), "barrier failed");
    if (self->rank == 2)
        atomic_store(&self->mem_bytes, 16 * GiB);
    /* Record the climb: each agreed value at most once, in order. */
    for (int i = 0; i < 1600 && nseen < 16; i++) {
        cg_hvd_core_stats(self->core, &self->stats);
        uint64_t c = self->stats.stage_chunk_bytes;
        if (nseen == 0 || seen[nseen - 1] != c)
            seen[nseen++] = c;
        if (c == 512 * KiB)
            break;
        nap_ms(5);
    }
    HJ_CHECK(self, nseen > 0 && seen[nseen - 1] == 512 * KiB, "agreed %llu "
             "after the release, want 512 KiB again",
             (unsigned long long)(nseen > 0 ? seen[nseen - 1] : 0));
    for (int i = 1; i < nseen; i++)
        HJ_CHECK(self, seen[i] > seen[i - 1] && seen[i] <= 512 * KiB,
                 "the agreed chunk went %llu -> %llu while rank 2's grew",
                 (unsigned long long)seen[i - 1],
                 (unsigned long long)seen[i]);
    HJ_CHECK(self, barrier(self, "squeeze.after"), "barrier failed");
    return 0;
}

Test(hvd_stage_chunk, follows_a_squeeze_and_its_release, .timeout = 90)
{
    /* Pressure levels off: the chunk follows the budget alone; the fusion
     * buffer stays 1 MiB, so only the chunk offer makes a full round. */
    const char *env[] = {"CG_GPU_STAGE_EMULATE=1", "CG_CHUNK_MIN=16KiB",
                         "CG_PRESSURE_WARN=0", "CG_PRESSURE_CRITICAL=0",
                         "CG_PROBE_INTERVAL=5ms", "CG_FUSION_THRESHOLD=1MiB",
                         "CG_FUSION_MIN=1MiB", "@0:CG_CHUNK_SIZE=1MiB",
                         "@1:CG_CHUNK_SIZE=512KiB", NULL};
    hj_rank_t *rep = hj_run_mem(3, env, body_squeeze, NULL, 16 * GiB);

    hj_assert_passed(rep, 3);
    hj_free(rep, 3);
}

/* Rank 1's slots are refused (CG_FAULT_STAGING): 0 agreed on every rank,
 * and the ranks go on (host collectives run). */
static int body_no_slot(hj_rank_t *self)
{
    /* Some cycles in (the stats are 0 before the first). */
    for (int i = 0; i < 1600 && self->stats.cycles < 20; i++) {
        nap_ms(5);
        cg_hvd_core_stats(self->core, &self->stats);
    }
    HJ_CHECK(self, self->stats.cycles >= 20 &&
                       self->stats.stage_chunk_bytes == 0,
             "agreed %llu after %llu cycles with rank 1 slotless, want 0",
             (unsigned long long)self->stats.stage_chunk_bytes,
             (unsigned long long)self->stats.cycles);
    HJ_CHECK(self, (self->stats.stage_slot_bytes == 0) == (self->rank == 1),
             "rank %d's slots hold %llu", self->rank,
             (unsigned long long)self->stats.stage_slot_bytes);
    HJ_CHECK(self, barrier(self, "no_slot.host"), "host allreduce failed");
    cg_hvd_core_stats(self->core, &self->stats);
    HJ_CHECK(self, self->stats.stage_chunk_bytes == 0,
             "agreed %llu after the allreduce",
             (unsigned long long)self->stats.stage_chunk_bytes);
    return 0;
}

Test(hvd_stage_chunk, a_rank_without_a_slot_makes_it_zero, .timeout = 60)
{
    const char *env[] = {"CG_GPU_STAGE_EMULATE=1", "@1:CG_FAULT_STAGING=1",
                         NULL};
    hj_rank_t *rep = hj_run(2, env, body_no_slot, NULL);

    hj_assert_passed(rep, 2);
    hj_free(rep, 2);
}

Test(hvd_stage_chunk, header_check_refuses_a_negative_offer)
{
    int64_t hdr[2 * CG_HVD_NHDR] = {0, 0, 1 << 20, 8, INT64_MAX,
                                    0, 0, 1 << 20, 8, 256 << 10};

    cr_assert_eq(cg_hvd_nhdr_check(hdr, 2), CG_OK, "%s", cg_last_error());
    hdr[CG_HVD_NHDR + 4] = 0; /* no slot: a valid offer */
    cr_assert_eq(cg_hvd_nhdr_check(hdr, 2), CG_OK, "%s", cg_last_error());
    hdr[CG_HVD_NHDR + 4] = -256;
    cr_assert_eq(cg_hvd_nhdr_check(hdr, 2), CG_ERR_MISMATCH);
    cr_assert(strstr(cg_last_error(), "rank 1") != NULL &&
                  strstr(cg_last_error(), "staging chunk offer -256") != NULL,
              "%s", cg_last_error());
}
