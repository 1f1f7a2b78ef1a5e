/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Collectives on CUDA buffers in the Horovod shim's core: NCCL runs on
 * them directly; host backends (COLLGUARD, MPI) run chunk by chunk through
 * the pinned staging buffer (copy to host, the host collective, copy
 * back), with CG_CHUNK_SIZE chunks so every rank cuts alike. Also the
 * host-side scaling the NCCL backend uses where NCCL has no exact op.
 * Background thread only. Layer: core/backend; calls the backends, core/reduce/reduce.h
 * and hvd_gpu.c's copies.
 */
#include "core/backend/hvd_gpu_impl.h"

#include <stdio.h>

#include "core/base/error.h"
#include "core/reduce/reduce.h"

void cg_hvd_gpu_copy_in(cg_hvd_gpu_t *gpu, void *dst, const void *src,
                        size_t bytes)
{
    const char *d = dst, *f = gpu->fbuf;
    cg_status_t st;

    if (gpu->failed != CG_OK)
        return;
    st = cg_hvd_gpu_copy(gpu, dst, src, bytes);
    if (st == CG_OK && !(f != NULL && d >= f && d < f + gpu->fbuf_len))
        st = cg_hvd_gpu_sync(gpu);
    if (st != CG_OK) {
        gpu->failed = st;
        snprintf(gpu->failed_msg, sizeof(gpu->failed_msg), "%s",
                 cg_last_error());
    }
}

cg_status_t cg_hvd_gpu_copy_status(const cg_hvd_gpu_t *gpu)
{
    if (gpu->failed == CG_OK)
        return CG_OK;
    return cg_error_set(gpu->failed, "%s", gpu->failed_msg);
}

cg_status_t cg_hvd_gpu_copy_out(cg_hvd_gpu_t *gpu, void *dst,
                                const void *src, size_t bytes)
{
    cg_status_t st = gpu->failed;

    if (st != CG_OK)
        return cg_error_set(st, "%s", gpu->failed_msg);
    return cg_hvd_gpu_copy(gpu, dst, src, bytes);
}

/* A kept copy failure fails the collective and breaks its backend. */
static cg_status_t cg__kept_failure(cg_hvd_gpu_t *gpu, cg_backend_t *be)
{
    if (gpu->failed == CG_OK)
        return CG_OK;
    be->broken = true;
    return cg_error_set(gpu->failed, "%s", gpu->failed_msg);
}

/* Elements per staged chunk (at least one). */
static size_t cg__chunk_elems(const cg_hvd_gpu_t *gpu, size_t dsize)
{
    size_t n = gpu->chunk / dsize;
    return n > 0 ? n : 1;
}

/* Copies bytes and waits for them. */
static cg_status_t cg__copy_sync(cg_hvd_gpu_t *gpu, void *dst,
                                 const void *src, size_t bytes)
{
    cg_status_t st = cg_hvd_gpu_copy(gpu, dst, src, bytes);
    return st == CG_OK ? cg_hvd_gpu_sync(gpu) : st;
}

/* Staging applies when the buffers are not host memory already. */
static cg_status_t cg__stage_start(cg_hvd_gpu_t *gpu, const void *a,
                                   const void *b, bool *direct_p)
{
    cg_status_t st = cg__hvd_gpu_start(gpu);

    if (st != CG_OK)
        return st;
    *direct_p = cg__hvd_gpu_host_ptr(gpu, a) && cg__hvd_gpu_host_ptr(gpu, b);
    if (*direct_p)
        return cg_hvd_gpu_sync(gpu); /* copies into it are done */
    return cg__hvd_gpu_stage_ensure(gpu);
}

bool cg_backend_nccl_scales(cg_dtype_t dt, cg_redop_t op)
{
    bool fl = dt == CG_DTYPE_F16 || dt == CG_DTYPE_BF16 ||
              dt == CG_DTYPE_F32 || dt == CG_DTYPE_F64;
    return fl && (op == CG_OP_SUM || op == CG_OP_AVG);
}

/* NCCL on the CUDA buffers (its own stream: the copies are waited for
 * first). Factors NCCL cannot apply exactly are applied here, on the
 * host, before and after. */
static cg_status_t cg__nccl_allreduce(cg_hvd_gpu_t *gpu, cg_backend_t *be,
                                      const void *send, void *recv,
                                      size_t count, cg_dtype_t dt,
                                      cg_redop_t op, double prescale,
                                      double postscale)
{
    cg_status_t st = cg__hvd_gpu_start(gpu);

    if (st == CG_OK)
        st = cg_hvd_gpu_sync(gpu);
    if (st != CG_OK)
        return st;
    if (cg_backend_nccl_scales(dt, op))
        return be->ops->allreduce(be, send, recv, count, dt, op, prescale,
                                  postscale, CG_BACKEND_MEM_CUDA);
    if (prescale != 1.0 && send != recv)
        st = cg__copy_sync(gpu, recv, send, count * cg_dtype_size(dt));
    if (st == CG_OK && prescale != 1.0) {
        st = cg_hvd_gpu_host_scale(gpu, recv, count, dt, prescale);
        send = recv;
    }
    if (st == CG_OK)
        st = be->ops->allreduce(be, send, recv, count, dt, op, 1.0, 1.0,
                                CG_BACKEND_MEM_CUDA);
    if (st == CG_OK)
        st = cg_hvd_gpu_host_scale(gpu, recv, count, dt, postscale);
    return st;
}

cg_status_t cg_hvd_gpu_allreduce(cg_hvd_gpu_t *gpu, cg_backend_t *be,
                                 const void *send, void *recv, size_t count,
                                 cg_dtype_t dt, cg_redop_t op,
                                 double prescale, double postscale)
{
    size_t dsize = cg_dtype_size(dt), step = cg__chunk_elems(gpu, dsize);
    bool direct;
    cg_status_t st = cg__kept_failure(gpu, be);

    if (st != CG_OK)
        return st;
    if (be->kind == CG_BACKEND_NCCL)
        return cg__nccl_allreduce(gpu, be, send, recv, count, dt, op,
                                  prescale, postscale);
    st = cg__stage_start(gpu, send, recv, &direct);
    for (size_t off = 0; off < count && st == CG_OK; off += step) {
        size_t n = count - off < step ? count - off : step;
        const char *s = (const char *)send + off * dsize;
        char *r = (char *)recv + off * dsize;
        if (direct) {
            st = be->ops->allreduce(be, s, r, n, dt, op, prescale, postscale,
                                    CG_BACKEND_MEM_HOST);
            continue;
        }
        st = cg__copy_sync(gpu, gpu->stage, s, n * dsize);
        if (st == CG_OK)
            st = be->ops->allreduce(be, gpu->stage, gpu->stage, n, dt, op,
                                    prescale, postscale, CG_BACKEND_MEM_HOST);
        if (st == CG_OK)
            st = cg__copy_sync(gpu, r, gpu->stage, n * dsize);
    }
    return st;
}

cg_status_t cg_hvd_gpu_broadcast(cg_hvd_gpu_t *gpu, cg_backend_t *be,
                                 void *buf, size_t count, cg_dtype_t dt,
                                 int root)
{
    size_t dsize = cg_dtype_size(dt), step = cg__chunk_elems(gpu, dsize);
    bool direct, is_root;
    cg_status_t st = cg__kept_failure(gpu, be);

    if (st != CG_OK)
        return st;
    if (be->kind == CG_BACKEND_NCCL) {
        st = cg__hvd_gpu_start(gpu);
        if (st == CG_OK)
            st = cg_hvd_gpu_sync(gpu);
        return st != CG_OK ? st
                           : be->ops->broadcast(be, buf, count, dt, root,
                                                CG_BACKEND_MEM_CUDA);
    }
    is_root = gpu->rank == root;
    st = cg__stage_start(gpu, buf, buf, &direct);
    for (size_t off = 0; off < count && st == CG_OK; off += step) {
        size_t n = count - off < step ? count - off : step;
        char *b = (char *)buf + off * dsize;
        if (direct) {
            st = be->ops->broadcast(be, b, n, dt, root, CG_BACKEND_MEM_HOST);
            continue;
        }
        if (is_root)
            st = cg__copy_sync(gpu, gpu->stage, b, n * dsize);
        if (st == CG_OK)
            st = be->ops->broadcast(be, gpu->stage, n, dt, root,
                                    CG_BACKEND_MEM_HOST);
        if (st == CG_OK && !is_root)
            st = cg__copy_sync(gpu, b, gpu->stage, n * dsize);
    }
    return st;
}

cg_status_t cg_hvd_gpu_host_scale(cg_hvd_gpu_t *gpu, void *buf,
                                  size_t count, cg_dtype_t dt, double factor)
{
    size_t dsize = cg_dtype_size(dt), step = cg__chunk_elems(gpu, dsize);
    bool direct;
    cg_status_t st;

    if (factor == 1.0 || count == 0)
        return CG_OK;
    st = cg__stage_start(gpu, buf, buf, &direct);
    for (size_t off = 0; off < count && st == CG_OK; off += step) {
        size_t n = count - off < step ? count - off : step;
        char *b = (char *)buf + off * dsize;
        if (direct) {
            cg_scale(b, n, dt, factor);
            continue;
        }
        st = cg__copy_sync(gpu, gpu->stage, b, n * dsize);
        if (st == CG_OK) {
            cg_scale(gpu->stage, n, dt, factor);
            st = cg__copy_sync(gpu, b, gpu->stage, n * dsize);
        }
    }
    return st;
}
