/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Whether a CUDA driver can run this build's CUDA runtime, from the two
 * versions as CUDA reports them (1000 * major + 10 * minor): collguard-info's
 * warning. Since CUDA 11 a driver of the runtime's major version runs it
 * under minor-version compatibility (features that need a newer driver
 * fail with cudaErrorCallRequiresNewerDriver, PTX from a newer toolkit does
 * not JIT); an older major version fails every call with
 * cudaErrorInsufficientDriver. Header-only so it is tested without CUDA.
 * Layer: plugin (a command).
 */
#ifndef CG_PLUGIN_CLI_CUDA_COMPAT_H
#define CG_PLUGIN_CLI_CUDA_COMPAT_H

typedef enum {
    CG_CUDA_COMPAT_UNKNOWN, /* a version could not be read */
    CG_CUDA_COMPAT_OK,      /* the driver is as new as the runtime or newer */
    CG_CUDA_COMPAT_MINOR,   /* same major, older minor: runs, limited */
    CG_CUDA_COMPAT_FAIL     /* the driver cannot run this runtime */
} cg_cuda_compat_t;

static inline cg_cuda_compat_t cg_cuda_compat(int driver, int runtime)
{
    if (driver <= 0 || runtime <= 0)
        return CG_CUDA_COMPAT_UNKNOWN;
    if (driver >= runtime)
        return CG_CUDA_COMPAT_OK;
    if (runtime / 1000 >= 11 && driver / 1000 == runtime / 1000)
        return CG_CUDA_COMPAT_MINOR;
    return CG_CUDA_COMPAT_FAIL;
}

#endif
