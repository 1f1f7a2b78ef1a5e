/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The stall inspector of the Horovod shim core across forked ranks: rank
 * 0 warns about a tensor one rank has not enqueued, naming it and the
 * missing rank (also when the name was cached), the late rank then
 * completes it; past the shutdown time every rank stops and every pending
 * request fails with the stalled tensor and the missing rank. The
 * HOROVOD_STALL_* and HOROVOD_CACHE_CAPACITY variables are read.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/config/config.h"
#include "tests/core/util/config_env.h"
#include "tests/core/util/test_hvd_util.h"

static double mult(void)
{
    const char *m = getenv("CG_TEST_TIMEOUT_MULTIPLIER");
    return m != NULL && atof(m) > 0 ? atof(m) : 1.0;
}

static void sleep_s(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

/* This rank's stderr (the log's default sink) goes to a fresh file. */
static int capture_stderr(char *path, size_t len)
{
    int fd;

    snprintf(path, len, "/tmp/cg_test_stall_XXXXXX");
    fd = mkstemp(path);
    if (fd < 0 || dup2(fd, STDERR_FILENO) < 0)
        return -1;
    close(fd);
    return 0;
}

static void read_file(const char *path, char *buf, size_t len)
{
    int fd = open(path, O_RDONLY);
    ssize_t n = fd >= 0 ? read(fd, buf, len - 1) : -1;

    buf[n > 0 ? n : 0] = '\0';
    if (fd >= 0)
        close(fd);
    unlink(path);
}

/* Allreduce of 't' (i32, 4 elements); rank 2 enqueues it `late` seconds
 * after the others. */
static int allreduce_t(hj_rank_t *self, double late)
{
    int32_t in[4] = {1, 2, 3, 4}, out[4];
    cg_hvd_tensor_t t = {.name = "t", .dtype = CG_DTYPE_I32, .ndim = 1,
                         .shape = {4}, .input = in, .output = out};
    cg_hvd_req_h req;

    if (self->rank == 2 && late > 0)
        sleep_s(late * mult());
    HJ_CHECK(self, cg_hvd_enqueue_allreduce(self->core, &t, CG_OP_SUM, 1.0,
                                            1.0, &req) == CG_OK,
             "enqueue: %s", cg_last_error());
    HJ_CHECK(self, cg_hvd_wait(req) == CG_OK, "wait: %s", cg_hvd_error(req));
    HJ_CHECK(self, out[3] == 4 * self->size, "t[3] = %d", out[3]);
    cg_hvd_release(req);
    return 0;
}

/* `cached`: 't' runs once on time first, so the late round is a cache
 * hit on ranks 0 and 1. */
static int body_warn(hj_rank_t *self, bool cached)
{
    char path[64], log[8192];

    HJ_CHECK(self, capture_stderr(path, sizeof(path)) == 0, "stderr: %m");
    if (cached && allreduce_t(self, 0) != 0)
        return 1;
    /* A cached 't' waits on its bit half the check time before it is
     * announced, so rank 2 comes later there. */
    if (allreduce_t(self, cached ? 3.5 : 2.5) != 0)
        return 1;
    cg_hvd_core_stats(self->core, &self->stats);
    read_file(path, log, sizeof(log));
    if (self->rank != 0) {
        HJ_CHECK(self, strstr(log, "stalled") == NULL, "rank %d logged: %s",
                 self->rank, log);
        return 0;
    }
    HJ_CHECK(self, self->stats.stalls_warned >= 1, "stalls_warned %llu",
             (unsigned long long)self->stats.stalls_warned);
    HJ_CHECK(self, strstr(log, "tensor 't' (allreduce) is waiting for rank "
                               "2; ranks 0, 1 are ready") != NULL,
             "rank 0's log: %s", log);
    return 0;
}

static int body_warn_new(hj_rank_t *self)
{
    return body_warn(self, false);
}

static int body_warn_cached(hj_rank_t *self)
{
    return body_warn(self, true);
}

static const char *const warn_env[] = {"HOROVOD_STALL_CHECK_TIME_SECONDS=1",
                                       "CG_LOG_LEVEL=warn", NULL};

Test(hvd_stall, rank0_names_the_tensor_and_the_missing_rank, .timeout = 60)
{
    hj_rank_t *rep = hj_run(3, warn_env, body_warn_new, NULL);
    hj_assert_passed(rep, 3);
    hj_free(rep, 3);
}

Test(hvd_stall, a_stalled_cached_tensor_is_reported_too, .timeout = 60)
{
    hj_rank_t *rep = hj_run(3, warn_env, body_warn_cached, NULL);
    hj_assert_passed(rep, 3);
    hj_free(rep, 3);
}

/* Ranks 0 and 1 wait on 't'; rank 2 enqueues it only after the core
 * stopped: everyone fails with the stall, naming 't' and rank 2. */
static int body_shutdown(hj_rank_t *self)
{
    int32_t in[4] = {1, 2, 3, 4}, out[4];
    cg_hvd_tensor_t t = {.name = "t", .dtype = CG_DTYPE_I32, .ndim = 1,
                         .shape = {4}, .input = in, .output = out};
    const char *err;
    cg_hvd_req_h req;
    cg_status_t st;

    if (self->rank == 2) {
        sleep_s(3.0 * mult());
        st = cg_hvd_enqueue_allreduce(self->core, &t, CG_OP_SUM, 1.0, 1.0,
                                      &req);
        err = cg_last_error();
        HJ_CHECK(self, st == CG_ERR_TIMEOUT, "late enqueue: %s (%s)",
                 cg_status_string(st), err);
    } else {
        HJ_CHECK(self, cg_hvd_enqueue_allreduce(self->core, &t, CG_OP_SUM,
                                                1.0, 1.0, &req) == CG_OK,
                 "enqueue: %s", cg_last_error());
        st = cg_hvd_wait(req);
        err = cg_hvd_error(req);
        HJ_CHECK(self, st == CG_ERR_TIMEOUT, "wait: %s (%s)",
                 cg_status_string(st), err);
    }
    HJ_CHECK(self, strstr(err, "stall shutdown") != NULL &&
                       strstr(err, "tensor 't' (allreduce) is waiting for "
                                   "rank 2") != NULL,
             "message: %s", err);
    if (self->rank != 2)
        cg_hvd_release(req);
    return 0;
}

Test(hvd_stall, shutdown_fails_every_rank_with_the_stall, .timeout = 60)
{
    static const char *const env[] = {
        "HOROVOD_STALL_CHECK_TIME_SECONDS=1",
        "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS=1", NULL};
    hj_rank_t *rep = hj_run(3, env, body_shutdown, NULL);
    hj_assert_passed(rep, 3);
    hj_free(rep, 3);
}

Test(hvd_stall, horovod_variables_set_the_inspector_and_the_cache)
{
    static const char *const env[] = {
        "HOROVOD_STALL_CHECK_TIME_SECONDS=5",
        "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS=30",
        "HOROVOD_STALL_CHECK_DISABLE=true", "HOROVOD_CACHE_CAPACITY=0",
        NULL};
    static const char *const bad[] = {"HOROVOD_STALL_CHECK_DISABLE=maybe",
                                      NULL};
    cg_config_t cfg;

    cg_config_defaults(&cfg);
    cr_assert_eq(cfg.stall_check_ns, 60000000000ull, "default %llu",
                 (unsigned long long)cfg.stall_check_ns);
    cr_assert_eq(cfg.cache_capacity, 1024, "default %d", cfg.cache_capacity);
    cr_assert_eq(tc_config_load(&cfg, env),
                 CG_OK, "%s", cg_last_error());
    cr_assert_eq(cfg.stall_check_ns, 5000000000ull, "got %llu",
                 (unsigned long long)cfg.stall_check_ns);
    cr_assert_eq(cfg.stall_shutdown_ns, 30000000000ull, "got %llu",
                 (unsigned long long)cfg.stall_shutdown_ns);
    cr_assert(cfg.stall_check_disable, "CHECK_DISABLE=true not read");
    cr_assert_eq(cfg.cache_capacity, 0, "got %d", cfg.cache_capacity);
    cr_assert_eq(tc_config_load(&cfg, bad),
                 CG_ERR_CONFIG, "a bad boolean was accepted");
    cr_assert(strstr(cg_last_error(), "HOROVOD_STALL_CHECK_DISABLE") != NULL,
              "%s", cg_last_error());
}
