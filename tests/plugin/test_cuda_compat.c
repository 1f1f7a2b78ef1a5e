/* SPDX-License-Identifier: Apache-2.0 */
/* Units for plugin/cli/cuda_compat.h: which driver runs which CUDA runtime
 * (collguard-info's warning). */
#include <criterion/criterion.h>

#include "plugin/cli/cuda_compat.h"

Test(cuda_compat, newer_or_equal_driver_is_ok)
{
    cr_assert_eq(cg_cuda_compat(13000, 13000), CG_CUDA_COMPAT_OK);
    cr_assert_eq(cg_cuda_compat(13010, 13000), CG_CUDA_COMPAT_OK);
    cr_assert_eq(cg_cuda_compat(13000, 12090), CG_CUDA_COMPAT_OK);
}

Test(cuda_compat, same_major_older_minor_runs_limited)
{
    cr_assert_eq(cg_cuda_compat(12020, 12040), CG_CUDA_COMPAT_MINOR);
    cr_assert_eq(cg_cuda_compat(11000, 11080), CG_CUDA_COMPAT_MINOR);
}

Test(cuda_compat, older_major_or_pre_11_runtime_fails)
{
    cr_assert_eq(cg_cuda_compat(12090, 13000), CG_CUDA_COMPAT_FAIL);
    cr_assert_eq(cg_cuda_compat(11080, 12000), CG_CUDA_COMPAT_FAIL);
    /* no minor-version compatibility before CUDA 11 */
    cr_assert_eq(cg_cuda_compat(10000, 10020), CG_CUDA_COMPAT_FAIL);
}

Test(cuda_compat, unreadable_version_is_unknown)
{
    cr_assert_eq(cg_cuda_compat(0, 13000), CG_CUDA_COMPAT_UNKNOWN);
    cr_assert_eq(cg_cuda_compat(13000, 0), CG_CUDA_COMPAT_UNKNOWN);
    cr_assert_eq(cg_cuda_compat(-1, -1), CG_CUDA_COMPAT_UNKNOWN);
}
