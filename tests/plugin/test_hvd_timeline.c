/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The timeline through libcollguard_hvd.so with 2 forked ranks:
 * horovod_init starts the collective core (cg_hvd_global_core), 200 small
 * allreduces enqueued in one cycle fuse into ONE collective that the
 * timeline shows (HOROVOD_TIMELINE=path, read while the job runs and at
 * the end), and HOROVOD_TIMELINE=DYNAMIC records only between
 * horovod_start_timeline and horovod_stop_timeline. Files are checked by
 * tests/core/observe/timeline_check.py with /usr/bin/python3.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/plugin/hvd_test_util.h"

#define NT 200

typedef struct {
    char path[256];
    char env_tl[300];
} tl_job_arg_t;

static int tl_run_check(const char *args)
{
    char cmd[1024];

    snprintf(cmd, sizeof(cmd), "/usr/bin/python3 %s %s >&2", CG_TL_CHECK,
             args);
    return system(cmd);
}

/* One allreduce of 4 floats named name; 0 when it gave the sum. */
static int tl_allreduce(hvd_rank_t *self, cg_hvd_core_h core,
                        const char *name)
{
    float x[4] = {1, 2, 3, (float)self->rank};
    cg_hvd_tensor_t t = {.name = name, .dtype = CG_DTYPE_F32, .ndim = 1,
                         .shape = {4}, .input = x, .output = x};
    cg_hvd_req_h req;

    HVD_CHECK(self, cg_hvd_enqueue_allreduce(core, &t, CG_OP_SUM, 1.0, 1.0,
                                             &req) == CG_OK,
              "enqueue %s: %s", name, cg_last_error());
    HVD_CHECK(self, cg_hvd_wait(req) == CG_OK, "%s: %s", name,
              cg_hvd_error(req));
    cg_hvd_release(req);
    HVD_CHECK(self, x[0] == 2 && x[3] == 1, "%s: x = %g %g", name, x[0],
              x[3]);
    return 0;
}

static int fusion_rank(hvd_rank_t *self)
{
    const tl_job_arg_t *a = self->arg;
    static float x[NT][4];
    cg_hvd_req_h req[NT];
    cg_hvd_stats_t st;
    cg_hvd_core_h core;
    char name[32], args[512];

    HVD_CHECK(self, horovod_init(NULL, 0, NULL, NULL, 0), "init failed");
    core = cg_hvd_global_core();
    HVD_CHECK(self, core != NULL, "horovod_init started no core");
    /* Both ranks leave the same cycle here, so the 200 enqueues below
     * land in the next one (HOROVOD_CYCLE_TIME is 300 ms). */
    if (tl_allreduce(self, core, "warmup") != 0)
        return 1;
    for (int i = 0; i < NT; i++) {
        cg_hvd_tensor_t t = {.name = name, .dtype = CG_DTYPE_F32,
                             .ndim = 1, .shape = {4}, .input = x[i],
                             .output = x[i]};
        snprintf(name, sizeof(name), "grad.%03d", i);
        for (int k = 0; k < 4; k++)
            x[i][k] = (float)(i + k);
        HVD_CHECK(self, cg_hvd_enqueue_allreduce(core, &t, CG_OP_SUM, 1.0,
                                                 1.0, &req[i]) == CG_OK,
                  "enqueue %s: %s", name, cg_last_error());
    }
    for (int i = 0; i < NT; i++) {
        HVD_CHECK(self, cg_hvd_wait(req[i]) == CG_OK, "grad.%03d: %s", i,
                  cg_hvd_error(req[i]));
        HVD_CHECK(self, x[i][1] == 2.0f * (float)(i + 1), "grad.%03d = %g",
                  i, x[i][1]);
        cg_hvd_release(req[i]);
    }
    cg_hvd_core_stats(core, &st);
    HVD_CHECK(self, st.max_fused_tensors == NT, "max fused %llu, want %d",
              (unsigned long long)st.max_fused_tensors, NT);
    if (self->rank == 0) {
        /* Mid-run: the cycle that ran them has written its events. */
        usleep(50000);
        snprintf(args, sizeof(args), "fusion %s %d grad.", a->path, NT);
        HVD_CHECK(self, tl_run_check(args) == 0, "mid-run check failed");
    }
    horovod_shutdown();
    return 0;
}

Test(hvd_timeline, fusion_of_200_small_tensors_shows_one_collective,
     .timeout = 60)
{
    static tl_job_arg_t a;
    char args[512];
    hvd_job_t job;
    int passed;

    snprintf(a.path, sizeof(a.path), "/tmp/cg_hvd_tl_%d.json", (int)getpid());
    snprintf(a.env_tl, sizeof(a.env_tl), "HOROVOD_TIMELINE=%s", a.path);
    unlink(a.path);
    hvd_job_init(&job, 2, HVD_LAUNCH_CG_RUN);
    job.arg = &a;
    job.env[0] = a.env_tl;
    job.env[1] = "HOROVOD_CYCLE_TIME=300";
    job.env[2] = "CG_TIMELINE_COUNTER_PERIOD=0";
    passed = hvd_job_run(&job, fusion_rank);
    hvd_assert_all_passed(&job, passed);
    hvd_job_fini(&job);
    snprintf(args, sizeof(args), "fusion %s %d grad.", a.path, NT);
    cr_assert_eq(tl_run_check(args), 0, "final check of %s failed", a.path);
    unlink(a.path);
}

static int dynamic_rank(hvd_rank_t *self)
{
    const tl_job_arg_t *a = self->arg;
    cg_hvd_core_h core;

    HVD_CHECK(self, horovod_init(NULL, 0, NULL, NULL, 0), "init failed");
    core = cg_hvd_global_core();
    HVD_CHECK(self, core != NULL, "horovod_init started no core");
    HVD_CHECK_EQ(self, horovod_stop_timeline(), 1); /* none running */
    if (tl_allreduce(self, core, "before") != 0)
        return 1;
    HVD_CHECK(self, self->rank != 0 || access(a->path, F_OK) != 0,
              "the timeline file exists "
              "before horovod_start_timeline");
    HVD_CHECK_EQ(self, horovod_start_timeline(a->path, true), 1);
    if (tl_allreduce(self, core, "during.1") != 0 ||
        tl_allreduce(self, core, "during.2") != 0)
        return 1;
    HVD_CHECK_EQ(self, horovod_stop_timeline(), 1);
    if (tl_allreduce(self, core, "after") != 0)
        return 1;
    horovod_shutdown();
    HVD_CHECK_EQ(self, horovod_start_timeline(a->path, true), -1);
    HVD_CHECK_EQ(self, horovod_stop_timeline(), -1);
    return 0;
}

Test(hvd_timeline, dynamic_records_only_between_start_and_stop,
     .timeout = 60)
{
    static tl_job_arg_t a;
    char args[512];
    hvd_job_t job;
    int passed;

    snprintf(a.path, sizeof(a.path), "/tmp/cg_hvd_tl_dyn_%d.json",
             (int)getpid());
    unlink(a.path);
    hvd_job_init(&job, 2, HVD_LAUNCH_CG_RUN);
    job.arg = &a;
    job.env[0] = "HOROVOD_TIMELINE=DYNAMIC";
    passed = hvd_job_run(&job, dynamic_rank);
    hvd_assert_all_passed(&job, passed);
    hvd_job_fini(&job);
    snprintf(args, sizeof(args), "names %s during.1,during.2 -before,after "
             "+cycles", a.path);
    cr_assert_eq(tl_run_check(args), 0, "check of %s failed", a.path);
    unlink(a.path);
}

/* The same name three times (the response cache answers the later ones)
 * under injected allocation failures of the fusion buffer. */
static int retry_rank(hvd_rank_t *self)
{
    cg_hvd_core_h core;

    HVD_CHECK(self, horovod_init(NULL, 0, NULL, NULL, 0), "init failed");
    core = cg_hvd_global_core();
    HVD_CHECK(self, core != NULL, "horovod_init started no core");
    for (int i = 0; i < 3; i++)
        if (tl_allreduce(self, core, "w") != 0)
            return 1;
    horovod_shutdown();
    return 0;
}

Test(hvd_timeline, allocation_retries_are_instants_and_repeats_are_spans,
     .timeout = 60)
{
    static tl_job_arg_t a;
    char args[512];
    hvd_job_t job;
    int passed;

    snprintf(a.path, sizeof(a.path), "/tmp/cg_hvd_tl_retry_%d.json",
             (int)getpid());
    snprintf(a.env_tl, sizeof(a.env_tl), "HOROVOD_TIMELINE=%s", a.path);
    unlink(a.path);
    hvd_job_init(&job, 2, HVD_LAUNCH_CG_RUN);
    job.arg = &a;
    job.env[0] = a.env_tl;
    job.env[1] = "CG_FAULT_ALLOC=2";
    job.env[2] = "CG_FUSION_THRESHOLD=64KiB";
    job.env[3] = "CG_FUSION_MIN=4KiB";
    passed = hvd_job_run(&job, retry_rank);
    hvd_assert_all_passed(&job, passed);
    hvd_job_fini(&job);
    snprintf(args, sizeof(args), "spans %s w NEGOTIATE_ALLREDUCE 3", a.path);
    cr_assert_eq(tl_run_check(args), 0, "negotiations of w in %s", a.path);
    snprintf(args, sizeof(args), "spans %s w ALLREDUCE 3 ALLOC_RETRY",
             a.path);
    cr_assert_eq(tl_run_check(args), 0, "reductions of w in %s", a.path);
    unlink(a.path);
}
