/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A tensor the framework hands the Horovod shim's core, checked into the
 * record every rank compares (cg_hvd_check_tensor: name, dtype,
 * dimensions, buffers, placement; each op's own checks are hvd_ops.c's,
 * hvd_rscatter.c's, hvd_group.c's and hvd_alltoall.c's), and the small
 * helpers of that record the rest of the engine shares: the op type's
 * name, the shape as text, the element count, the name's hash. Holds no
 * state and takes no lock; calls nothing of the engine's other files.
 * Layer: core/engine; calls core/backend (a CUDA tensor's placement) and
 * the governor's CUDA probe.
 */
#include <stdio.h>
#include <string.h>

#include "core/base/error.h"
#include "core/engine/hvd_core.h"
#include "core/backend/hvd_gpu.h"

uint64_t cg_hvd_name_hash(const char *name)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *name != '\0'; name++)
        h = (h ^ (unsigned char)*name) * 1099511628211ull;
    return h;
}

const char *cg_hvd_type_name(int32_t type)
{
    if (type == CG_HVD_WIRE_JOIN)
        return "join";
    static const char *const names[] = {"allreduce", "broadcast",
                                        "allgather", "reducescatter",
                                        "alltoall"};

    return type >= 0 && type <= CG_HVD_ALLTOALL ? names[type] : "unknown";
}

void cg_hvd_shape_str(const cg_hvd_wire_t *w, char *buf, size_t len)
{
    size_t n = (size_t)snprintf(buf, len, "[");
    for (int d = 0; d < w->ndim && n < len; d++)
        n += (size_t)snprintf(buf + n, len - n, "%s%lld", d ? ", " : "",
                              (long long)w->shape[d]);
    if (n < len)
        snprintf(buf + n, len - n, "]");
}

size_t cg_hvd_wire_count(const cg_hvd_wire_t *w)
{
    size_t n = 1;
    for (int d = 0; d < w->ndim; d++)
        n *= (size_t)w->shape[d];
    return n;
}

cg_status_t cg_hvd_check_tensor(const cg_hvd_core_t *core,
                                const cg_hvd_tensor_t *t,
                                cg_hvd_op_type_t type, cg_hvd_wire_t *w)
{
    const char *what = cg_hvd_type_name(type);
    size_t len;

    if (core == NULL)
        return cg_error_set(CG_ERR_NOT_INITIALIZED, "%s: the collective core "
                            "is NULL (cg_hvd_core_create first)", what);
    if (t == NULL || t->name == NULL)
        return cg_error_set(CG_ERR_INVALID_PARAM, "%s: tensor or its name is "
                            "NULL", what);
    len = strlen(t->name);
    if (len == 0 || len >= CG_HVD_NAME_MAX)
        return cg_error_set(CG_ERR_INVALID_PARAM, "%s of tensor '%.40s...': "
                            "name length %zu, allowed 1 to %d", what, t->name,
                            len, CG_HVD_NAME_MAX - 1);
    if (cg_dtype_size(t->dtype) == 0)
        return cg_error_set(CG_ERR_INVALID_PARAM, "%s of tensor '%s': unknown "
                            "dtype %d", what, t->name, (int)t->dtype);
    if (t->ndim < 0 || t->ndim > CG_HVD_NDIM_MAX)
        return cg_error_set(CG_ERR_INVALID_PARAM, "%s of tensor '%s': ndim %d, "
                            "allowed 0 to %d", what, t->name, t->ndim,
                            CG_HVD_NDIM_MAX);
    memset(w, 0, sizeof(*w));
    w->device = (t->field_mask & CG_HVD_TENSOR_FIELD_DEVICE) ? t->device : -1;
    if (w->device >= 0) {
        cg_status_t st = cg_hvd_gpu_check(core->gpu, what, t->name,
                                          w->device);
        if (st != CG_OK)
            return st;
        /* The governor watches this rank's GPU from now on. */
        cg_cuda_probe_set_device(core->ctx->cuda_probe, w->device);
        /* Ranks compare placements, not device numbers: rank i of a
         * multi-GPU job has its tensors on its own GPU. */
        w->device = 0;
    }
    memcpy(w->name, t->name, len + 1);
    w->type = (int32_t)type;
    w->dtype = (int32_t)t->dtype;
    w->ndim = t->ndim;
    w->prescale = w->postscale = 1.0;
    for (int d = 0; d < t->ndim; d++) {
        if (t->shape[d] < 0)
            return cg_error_set(CG_ERR_INVALID_PARAM, "%s of tensor '%s': "
                                "dimension %d is %lld", what, t->name, d,
                                (long long)t->shape[d]);
        w->shape[d] = t->shape[d];
    }
    /* Allgather and alltoall have no output; a reducescatter's is
     * checked by its size. */
    if (cg_hvd_wire_count(w) > 0 &&
        (t->input == NULL || (type != CG_HVD_ALLGATHER &&
                              type != CG_HVD_REDUCESCATTER &&
                              type != CG_HVD_ALLTOALL && t->output == NULL)))
        return cg_error_set(CG_ERR_INVALID_PARAM, "%s of tensor '%s': input "
                            "or output buffer is NULL", what, t->name);
    return CG_OK;
}
