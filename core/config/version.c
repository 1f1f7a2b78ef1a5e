/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The library's identity: version string and the features compiled in.
 * Layer: core/config; calls nothing.
 */
#include "collguard/collguard.h"

#include "cg_build.h"

const char *cg_version(void)
{
    return CG_VERSION_STRING;
}

unsigned cg_build_features(void)
{
    return (CG_HAVE_CUDA ? CG_FEATURE_CUDA : 0u) |
           (CG_HAVE_NCCL ? CG_FEATURE_NCCL : 0u) |
           (CG_HAVE_MPI ? CG_FEATURE_MPI : 0u) |
           (CG_HAVE_UCX ? CG_FEATURE_UCX : 0u);
}
