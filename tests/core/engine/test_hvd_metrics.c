/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The Horovod shim core's metrics file across forked ranks: rewritten by
 * the background thread while the core runs, a last time at destroy with
 * the final counters, one file per rank (%r); a directory it cannot write
 * fails core creation on every rank at once.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/core/util/test_hvd_util.h"

static char dir[] = "/tmp/cg_hvd_metrics_XXXXXX";

/* The value of the series that starts with `series` in rank's file, or
 * -1 when the file or the series is missing. */
static long long series_value(int rank, const char *series)
{
    char path[128], line[512];
    long long v = -1;
    FILE *f;

    snprintf(path, sizeof(path), "%s/m.%d.prom", dir, rank);
    f = fopen(path, "r");
    if (f == NULL)
        return -1;
    while (fgets(line, sizeof(line), f) != NULL)
        if (strncmp(line, series, strlen(series)) == 0)
            v = atoll(line + strlen(series));
    fclose(f);
    return v;
}

static int body_counts(hj_rank_t *self)
{
    char series[96];
    float x[16] = {1};

    snprintf(series, sizeof(series), "collguard_hvd_cycles_total{rank=\"%d\"}",
             self->rank);
    /* The background thread writes while the core runs (period 20 ms). */
    for (int i = 0; i < 200 && series_value(self->rank, series) <= 0; i++)
        usleep(5000);
    HJ_CHECK(self, series_value(self->rank, series) > 0,
             "no periodic write with cycles > 0 in 1 s");
    for (int i = 0; i < 3; i++) {
        cg_hvd_tensor_t t = {.name = i == 0 ? "a" : i == 1 ? "b" : "c",
                             .dtype = CG_DTYPE_F32, .ndim = 1, .shape = {16},
                             .input = x, .output = x, .device = -1};
        cg_hvd_req_h req;
        HJ_CHECK(self, cg_hvd_enqueue_allreduce(self->core, &t, CG_OP_SUM,
                                                1.0, 1.0, &req) == CG_OK,
                 "enqueue: %s", cg_last_error());
        HJ_CHECK(self, cg_hvd_wait(req) == CG_OK, "%s", cg_hvd_error(req));
        cg_hvd_release(req);
    }
    {
        cg_hvd_tensor_t g = {.name = "g", .dtype = CG_DTYPE_F32, .ndim = 1,
                             .shape = {2}, .input = x, .device = -1};
        cg_hvd_req_h req;
        HJ_CHECK(self, cg_hvd_enqueue_allgather(self->core, &g, &req) ==
                           CG_OK, "allgather: %s", cg_last_error());
        HJ_CHECK(self, cg_hvd_wait(req) == CG_OK, "%s", cg_hvd_error(req));
        cg_hvd_release(req);
    }
    cg_hvd_core_stats(self->core, &self->stats);
    HJ_CHECK(self, self->stats.negotiate_ns > 0 && self->stats.execute_ns > 0,
             "thread time: negotiation %llu ns, execution %llu ns",
             (unsigned long long)self->stats.negotiate_ns,
             (unsigned long long)self->stats.execute_ns);
    cg_hvd_core_destroy(self->core); /* the last write */
    self->destroyed = 1;
    snprintf(series, sizeof(series),
             "collguard_hvd_allreduce_tensors_total{rank=\"%d\"}", self->rank);
    HJ_CHECK(self, series_value(self->rank, series) == 3,
             "final file says %lld tensors, want 3",
             series_value(self->rank, series));
    snprintf(series, sizeof(series),
             "collguard_hvd_allgather_tensors_total{rank=\"%d\"}", self->rank);
    HJ_CHECK(self, series_value(self->rank, series) == 1,
             "final file says %lld allgathered tensors, want 1",
             series_value(self->rank, series));
    return 0;
}

Test(hvd_metrics, file_per_rank_periodic_and_final, .timeout = 60)
{
    char file[128];
    const char *env[] = {file, "CG_METRICS_PERIOD=20ms", NULL};

    cr_assert_not_null(mkdtemp(dir));
    snprintf(file, sizeof(file), "CG_METRICS_FILE=%s/m.%%r.prom", dir);
    hj_rank_t *rep = hj_run(2, env, body_counts, NULL);
    hj_assert_passed(rep, 2);
    for (int r = 0; r < 2; r++) {
        char p[160];
        snprintf(p, sizeof(p), "%s/m.%d.prom", dir, r);
        cr_assert_eq(unlink(p), 0, "rank %d's file %s missing", r, p);
    }
    hj_free(rep, 2);
    cr_assert_eq(rmdir(dir), 0, "%s not empty (a .tmp left?)", dir);
}

static int body_never(hj_rank_t *self)
{
    HJ_CHECK(self, 0, "the core was created");
    return 0;
}

Test(hvd_metrics, unwritable_directory_fails_create_on_every_rank,
     .timeout = 60)
{
    const char *env[] = {"CG_METRICS_FILE=/nonexistent/cg/m.%r.prom", NULL};
    hj_rank_t *rep = hj_run(2, env, body_never, NULL);

    for (int r = 0; r < 2; r++) {
        cr_assert_neq(rep[r].failed_line, 0, "rank %d created its core", r);
        cr_assert(strstr(rep[r].msg, "core: CG_METRICS_FILE: cannot create "
                                     "/nonexistent/cg/m.") != NULL,
                  "rank %d: %s", r, rep[r].msg);
    }
    hj_free(rep, 2);
}
