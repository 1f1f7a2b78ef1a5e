/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Row 6 of the fault matrix, the gaps the other suites leave: bad input
 * through the shim's C face (NULL and malformed tensors, bad ops and
 * roots, NULL requests, calls after shutdown, shutdown twice or before
 * init, a malformed variable at init), misaligned buffers that must
 * simply work, and NCCL net plugin calls with a closed, foreign or
 * wrong-kind comm. Each gives a code and a message, never a crash.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "tests/plugin/hvd_test_util.h"
#include "tests/plugin/nccl/np_drv.h"

/* enqueue_allreduce of t must fail with want and a message naming why. */
#define HVD_REFUSED(self, core, t, op, want, why)                            \
    do {                                                                     \
        cg_hvd_req_h r_ = NULL;                                              \
        cg_status_t st_ = cg_hvd_enqueue_allreduce(core, t, op, 1.0, 1.0,    \
                                                   &r_);                     \
        HVD_CHECK(self, st_ == (want) && r_ == NULL &&                       \
                  strstr(cg_last_error(), why) != NULL,                      \
                  "status %d, error '%s', expected %d and '%s'", (int)st_,   \
                  cg_last_error(), (int)(want), why);                        \
    } while (0)

static int malformed_tensors(hvd_rank_t *self)
{
    float buf[4] = {0};
    cg_hvd_tensor_t ok = {.name = "t", .dtype = CG_DTYPE_F32, .ndim = 1,
                          .shape = {4}, .input = buf, .output = buf}, t;
    char longname[CG_HVD_NAME_MAX + 8];
    cg_hvd_core_h core;
    cg_hvd_req_h req = NULL;

    horovod_shutdown(); /* before init: nothing to do, no crash */
    HVD_CHECK(self, horovod_init(NULL, 0, NULL, NULL, 0), "init failed");
    core = cg_hvd_global_core();
    HVD_REFUSED(self, core, NULL, CG_OP_SUM, CG_ERR_INVALID_PARAM, "NULL");
    t = ok, t.name = NULL;
    HVD_REFUSED(self, core, &t, CG_OP_SUM, CG_ERR_INVALID_PARAM, "NULL");
    t = ok, t.name = "";
    HVD_REFUSED(self, core, &t, CG_OP_SUM, CG_ERR_INVALID_PARAM, "length 0");
    memset(longname, 'n', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = '\0';
    t = ok, t.name = longname;
    HVD_REFUSED(self, core, &t, CG_OP_SUM, CG_ERR_INVALID_PARAM, "allowed");
    t = ok, t.dtype = (cg_dtype_t)77;
    HVD_REFUSED(self, core, &t, CG_OP_SUM, CG_ERR_INVALID_PARAM, "dtype 77");
    t = ok, t.ndim = CG_HVD_NDIM_MAX + 1;
    HVD_REFUSED(self, core, &t, CG_OP_SUM, CG_ERR_INVALID_PARAM, "ndim 9");
    t = ok, t.shape[0] = -4;
    HVD_REFUSED(self, core, &t, CG_OP_SUM, CG_ERR_INVALID_PARAM, "-4");
    t = ok, t.input = NULL;
    HVD_REFUSED(self, core, &t, CG_OP_SUM, CG_ERR_INVALID_PARAM, "NULL");
    t = ok, t.output = NULL;
    HVD_REFUSED(self, core, &t, CG_OP_SUM, CG_ERR_INVALID_PARAM, "NULL");
    HVD_REFUSED(self, core, &ok, (cg_redop_t)99, CG_ERR_INVALID_PARAM,
                "not supported");
    HVD_REFUSED(self, core, &ok, CG_OP_ADASUM, CG_ERR_INVALID_PARAM,
                "not supported");
    HVD_CHECK_EQ(self, cg_hvd_enqueue_broadcast(core, &ok, 1, &req),
                 CG_ERR_INVALID_PARAM);
    HVD_CHECK(self, strstr(cg_last_error(), "root rank 1") != NULL, "'%s'",
              cg_last_error());
    t = ok, t.ndim = 0;
    HVD_CHECK_EQ(self, cg_hvd_enqueue_allgather(core, &t, &req),
                 CG_ERR_INVALID_PARAM);
    /* A NULL request (a failed enqueue's) is done, with an error. */
    HVD_CHECK(self, cg_hvd_poll(NULL) != 0, "poll(NULL) pending");
    HVD_CHECK_EQ(self, cg_hvd_wait(NULL), CG_ERR_INVALID_PARAM);
    HVD_CHECK(self, strstr(cg_hvd_error(NULL), "NULL") != NULL, "'%s'",
              cg_hvd_error(NULL));
    cg_hvd_release(NULL);
    horovod_shutdown();
    horovod_shutdown(); /* twice: no crash */
    /* After shutdown: no core, and the enqueue says so. */
    HVD_CHECK(self, cg_hvd_global_core() == NULL, "a core after shutdown");
    HVD_REFUSED(self, cg_hvd_global_core(), &ok, CG_OP_SUM,
                CG_ERR_NOT_INITIALIZED, "NULL");
    HVD_CHECK_EQ(self, horovod_start_timeline("t.json", false), -1);
    return 0;
}

Test(bad_input, shim_refuses_malformed_tensors_and_null_requests,
     .timeout = 30)
{
    hvd_job_t job;

    hvd_job_init(&job, 1, HVD_LAUNCH_NONE);
    hvd_assert_all_passed(&job, hvd_job_run(&job, malformed_tensors));
    hvd_job_fini(&job);
}

static int malformed_variable(hvd_rank_t *self)
{
    HVD_CHECK(self, !horovod_init(NULL, 0, NULL, NULL, 0),
              "init accepted HOROVOD_FUSION_THRESHOLD=lots");
    HVD_CHECK_EQ(self, horovod_is_initialized(), 0);
    HVD_CHECK_EQ(self, horovod_rank(), -1);
    horovod_shutdown();
    return 0;
}

Test(bad_input, malformed_variable_fails_init_on_every_rank, .timeout = 30)
{
    hvd_job_t job;

    hvd_job_init(&job, 2, HVD_LAUNCH_CG_RUN);
    job.env[0] = "HOROVOD_FUSION_THRESHOLD=lots";
    hvd_assert_all_passed(&job, hvd_job_run(&job, malformed_variable));
    hvd_job_fini(&job);
}

/* f64 and i16-sized offsets: buffers at odd addresses, in and out of place. */
static int misaligned_buffers(hvd_rank_t *self)
{
    char *in = malloc(8 * 1000 + 16), *out = malloc(8 * 1000 + 16);
    cg_hvd_tensor_t t = {.name = "odd", .dtype = CG_DTYPE_F64, .ndim = 1,
                         .shape = {1000}, .input = in + 1, .output = out + 3};
    cg_hvd_req_h req;
    double v, want;

    HVD_CHECK(self, in != NULL && out != NULL, "no memory");
    HVD_CHECK(self, horovod_init(NULL, 0, NULL, NULL, 0), "init failed");
    for (int i = 0; i < 1000; i++) {
        v = self->rank + i * 0.5;
        memcpy(in + 1 + 8 * i, &v, 8);
    }
    HVD_CHECK_EQ(self, cg_hvd_enqueue_allreduce(cg_hvd_global_core(), &t,
                                                CG_OP_SUM, 1.0, 1.0, &req),
                 CG_OK);
    HVD_CHECK(self, cg_hvd_wait(req) == CG_OK, "%s", cg_hvd_error(req));
    cg_hvd_release(req);
    for (int i = 0; i < 1000; i++) {
        memcpy(&v, out + 3 + 8 * i, 8);
        want = self->size * (self->size - 1) / 2.0 + self->size * i * 0.5;
        HVD_CHECK(self, v == want, "element %d: %g, expected %g", i, v, want);
    }
    t.name = "odd_in_place", t.output = in + 1;
    HVD_CHECK_EQ(self, cg_hvd_enqueue_broadcast(cg_hvd_global_core(), &t, 0,
                                                &req), CG_OK);
    HVD_CHECK(self, cg_hvd_wait(req) == CG_OK, "%s", cg_hvd_error(req));
    cg_hvd_release(req);
    memcpy(&v, in + 1 + 8 * 999, 8);
    HVD_CHECK(self, v == 999 * 0.5, "broadcast: %g", v);
    horovod_shutdown();
    free(in);
    free(out);
    return 0;
}

Test(bad_input, misaligned_buffers_reduce_exactly, .timeout = 30)
{
    hvd_job_t job;

    hvd_job_init(&job, 2, HVD_LAUNCH_CG_RUN);
    hvd_assert_all_passed(&job, hvd_job_run(&job, misaligned_buffers));
    hvd_job_fini(&job);
}

/* The net plugin with comms it never made or already closed. */
Test(bad_input, nccl_net_plugin_refuses_closed_and_foreign_comms,
     .timeout = 60)
{
    unsigned char h[NCCL_NET_HANDLE_MAXSIZE];
    void *l = NULL, *s = NULL, *r = NULL, *req = NULL, *out, *junk = &h[3];
    char msg[8] = "m";
    int done = 0, size = 0, tag = 1;
    size_t sz = sizeof(msg);
    void *p = msg;
    np_drv_t d;

    setenv("CG_TRANSPORT", "socket", 1);
    setenv("CG_SOCKET_IFNAME", "lo", 1);
    cr_assert_eq(np_drv_open(&d, CG_NP_LIB, 11), 0);
    cr_assert_eq(np_init(&d), ncclSuccess);
    cr_assert_eq(np_listen(&d, 0, h, &l), ncclSuccess);
    for (long i = 0; i < 100000000L && (s == NULL || r == NULL); i++) {
        if (s == NULL)
            cr_assert_eq(np_connect(&d, 0, h, &s), ncclSuccess);
        if (r == NULL)
            cr_assert_eq(np_accept(&d, l, &r), ncclSuccess);
    }
    /* Wrong kind: a recv comm to isend, a send comm to irecv or accept. */
    cr_expect_eq(np_isend(&d, r, msg, 8, 1, NULL, &req), ncclInvalidArgument);
    cr_expect_eq(np_irecv(&d, s, 1, &p, &sz, &tag, NULL, &req),
                 ncclInvalidArgument);
    cr_expect_eq(np_accept(&d, s, &out), ncclInvalidArgument);
    /* Foreign pointers: inside our own memory, never the plugin's. */
    cr_expect_eq(np_isend(&d, junk, msg, 8, 1, NULL, &req),
                 ncclInvalidArgument);
    cr_expect_eq(np_test(&d, junk, &done, &size), ncclInvalidArgument);
    cr_expect_eq(np_close_recv(&d, junk), ncclInvalidArgument);
    /* Closed: every call on it and a second close. */
    cr_assert_eq(np_close_send(&d, s), ncclSuccess);
    cr_assert_eq(np_close_recv(&d, r), ncclSuccess);
    cr_assert_eq(np_close_listen(&d, l), ncclSuccess);
    cr_expect_eq(np_close_send(&d, s), ncclInvalidArgument);
    cr_expect_eq(np_close_recv(&d, r), ncclInvalidArgument);
    cr_expect_eq(np_accept(&d, l, &out), ncclInvalidArgument);
    cr_expect_eq(np_irecv(&d, r, 1, &p, &sz, &tag, NULL, &req),
                 ncclInvalidArgument);
    cr_expect_eq(np_close_listen(&d, l), ncclInvalidArgument);
    cr_assert_eq(np_finalize(&d), ncclSuccess);
    np_drv_close(&d);
}
