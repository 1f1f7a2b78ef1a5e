/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The CUDA probe (core/governor/probe_cuda.c): which device a rank's
 * probe reads (the first CUDA tensor's, else local rank % devices), and
 * that without a GPU it fails cleanly and silently. On a GPU machine the
 * probe reads a plausible free/total; that it creates no CUDA context is
 * checked there by integration/gpu/cuda_context_check.c.
 */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <string.h>

#include "core/base/error.h"
#include "core/governor/probe.h"

Test(probe_cuda, the_rank_reads_its_local_gpu_until_a_tensor_names_one)
{
    /* Before any CUDA tensor: local rank i reads GPU i (mod visible). */
    cr_assert_eq(cg_cuda_probe_pick(-1, 0, 4), 0);
    cr_assert_eq(cg_cuda_probe_pick(-1, 3, 4), 3);
    cr_assert_eq(cg_cuda_probe_pick(-1, 5, 4), 1);
    cr_assert_eq(cg_cuda_probe_pick(-1, -1, 4), 0); /* unknown: 0 */
    /* One visible GPU (CUDA_VISIBLE_DEVICES=<i> per rank): always 0. */
    cr_assert_eq(cg_cuda_probe_pick(-1, 7, 1), 0);
    /* The first CUDA tensor's device wins over the local rank. */
    cr_assert_eq(cg_cuda_probe_pick(2, 0, 4), 2);
    cr_assert_eq(cg_cuda_probe_pick(0, 3, 4), 0);
    /* A device past the visible ones, or no GPU at all: none. */
    cr_assert_eq(cg_cuda_probe_pick(4, 0, 4), -1);
    cr_assert_eq(cg_cuda_probe_pick(-1, 0, 0), -1);
}

Test(probe_cuda, setters_accept_no_probe)
{
    cg_cuda_probe_set_device(NULL, 1);
    cg_cuda_probe_set_local_rank(NULL, 1);
    cg_cuda_probe_destroy(NULL);
    cr_assert_str_eq(cg_cuda_probe_source(NULL), "none");
}

Test(probe_cuda, fails_cleanly_without_a_gpu, .init = cr_redirect_stderr)
{
    cg_mem_probe_t probe;
    cg_cuda_probe_t *cp = NULL;
    uint64_t f = 0, t = 0;
    cg_status_t st = cg_cuda_probe_create(&cp, &probe);
    int n = cg_cuda_device_count();

    if (!cg_cuda_probe_built()) {
        cr_assert_eq(st, CG_ERR_UNSUPPORTED, "got %s", cg_status_name(st));
        cr_assert_eq(n, 0);
        cr_assert_null(cp);
    } else if (n == 0) {
        cr_assert_null(cp);
        cr_assert_eq(st, CG_ERR_NO_DEVICE, "got %s", cg_status_name(st));
        cr_assert(strstr(cg_last_error(), "CG_MEM_PROBE=host") != NULL, "%s",
                  cg_last_error());
    } else { /* a machine with a GPU: the probe works */
        cr_assert_eq(st, CG_OK, "%s", cg_last_error());
        cr_assert_eq(probe.kind, CG_MEM_KIND_DEVICE);
        cr_assert_eq(probe.read(probe.arg, &f, &t), CG_OK, "%s",
                     cg_last_error());
        cr_assert(f > 0 && f <= t, "free %llu total %llu",
                  (unsigned long long)f, (unsigned long long)t);
        cg_cuda_probe_destroy(cp);
    }
    fflush(stderr);
    cr_assert_stderr_eq_str("", "the probe wrote to stderr");
}
