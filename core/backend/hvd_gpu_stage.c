/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Collectives on CUDA buffers in the Horovod shim's core: NCCL runs on
 * them directly; host backends (COLLGUARD, MPI) run chunk by chunk through
 * the staging slots (copy to host, the host collective, copy back), cut
 * at the chunk the ranks agreed on (hvd_gpu_slots.c) so every rank cuts
 * alike, pipelined over two slots where hvd_gpu_pipe.c can (the copies of
 * chunks i-1 and i+1 run while the host works on chunk i), else one chunk
 * at a time. Also the host-side scaling the NCCL backend uses where NCCL
 * has no exact op (this rank alone: cut at its own slot).
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

/* What the host does with one staged chunk of n elements (at element
 * offset off of the whole buffer). */
typedef cg_status_t (*cg__host_fn)(void *arg, void *host, size_t off,
                                   size_t n);

/* One chunk (step elements) at a time through slot 0: copy in, host,
 * copy out. */
static cg_status_t cg__staged_serial(cg_hvd_gpu_t *gpu, const char *src,
                                     char *dst, size_t count, size_t dsize,
                                     size_t step, cg__host_fn fn, void *arg)
{
    cg_status_t st = CG_OK;

    for (size_t off = 0; off < count && st == CG_OK; off += step) {
        size_t n = count - off < step ? count - off : step;
        if (src != NULL)
            st = cg__copy_sync(gpu, gpu->stage, src + off * dsize,
                               n * dsize);
        if (st == CG_OK)
            st = fn(arg, gpu->stage, off, n);
        if (st == CG_OK && dst != NULL)
            st = cg__copy_sync(gpu, dst + off * dsize, gpu->stage,
                               n * dsize);
    }
    return st;
}

/* The same over two slots: chunk i+1 comes in while the host works on
 * chunk i; chunk i goes out while the host works on chunk i+1. src NULL:
 * nothing comes in (a broadcast's receivers); dst NULL: nothing goes out
 * (its root). */
static cg_status_t cg__staged_pipe(cg_hvd_gpu_t *gpu, const char *src,
                                   char *dst, size_t count, size_t dsize,
                                   size_t step, cg__host_fn fn, void *arg)
{
    size_t chunks = (count + step - 1) / step;
    cg_status_t st, end;

    st = cg_hvd_gpu_sync(gpu); /* earlier copies on the stream are done */
    if (st == CG_OK && src != NULL)
        st = cg__gpu_pipe_in(gpu, 0, src,
                             (count < step ? count : step) * dsize);
    for (size_t i = 0; i < chunks && st == CG_OK; i++) {
        size_t off = i * step, n = count - off < step ? count - off : step;
        int slot = (int)(i & 1);
        if (src != NULL && i + 1 < chunks) {
            size_t o2 = off + step;
            size_t n2 = count - o2 < step ? count - o2 : step;
            st = cg__gpu_pipe_in(gpu, slot ^ 1, src + o2 * dsize,
                                 n2 * dsize);
        }
        if (st == CG_OK && src != NULL)
            st = cg__gpu_pipe_wait(gpu, slot, true);
        else if (st == CG_OK && i >= 2) /* the slot's last chunk is out */
            st = cg__gpu_pipe_wait(gpu, slot, false);
        if (st == CG_OK)
            st = fn(arg, cg__gpu_pipe_slot(gpu, slot), off, n);
        if (st == CG_OK && dst != NULL)
            st = cg__gpu_pipe_out(gpu, slot, dst + off * dsize, n * dsize);
    }
    /* Even after a failure: no copy may still use a slot. */
    end = cg__gpu_pipe_end(gpu);
    gpu->pipelined++;
    return st != CG_OK ? st : end;
}

/* Chunks of step elements (both slots hold them). */
static cg_status_t cg__staged(cg_hvd_gpu_t *gpu, const char *src, char *dst,
                              size_t count, size_t dsize, size_t step,
                              cg__host_fn fn, void *arg)
{
    if (count > step && cg__hvd_gpu_stage2_ensure(gpu) &&
        cg__gpu_pipe_ready(gpu))
        return cg__staged_pipe(gpu, src, dst, count, dsize, step, fn, arg);
    return cg__staged_serial(gpu, src, dst, count, dsize, step, fn, arg);
}

/* The agreed chunk of a staged collective every rank runs (*step_p
 * elements), once staging has started (*direct_p: straight on the
 * pinned fusion buffer). A rank without a slot fails it on every rank
 * alike: nothing may still copy into the buffers its caller frees. */
static cg_status_t cg__stage_agreed(cg_hvd_gpu_t *gpu, const void *a,
                                    const void *b, size_t dsize,
                                    const char *what, bool *direct_p,
                                    size_t *step_p)
{
    cg_status_t st = cg__hvd_gpu_stage_step(gpu, dsize, false, what, step_p);

    if (st != CG_OK) {
        char why[512];
        snprintf(why, sizeof(why), "%s", cg_last_error());
        (void)cg_hvd_gpu_sync(gpu);
        return cg_error_set(st, "%s", why);
    }
    st = cg__stage_start(gpu, a, b, direct_p);
    if (st == CG_OK && !*direct_p)
        st = cg__hvd_gpu_stage_step(gpu, dsize, true, what, step_p);
    return st;
}

/* Not on one rank: NCCL 2.28's one-rank path leaves the last elements of
 * a pre-multiply-sum unscaled or unwritten (seen on an H200 with NCCL
 * 2.28.3: 9 MiB + 3 elements of f16, f32 and f64, and 4099 of f64, by
 * integration/gpu/gpu_check), so one rank scales on the host. */
bool cg_backend_nccl_scales(cg_dtype_t dt, cg_redop_t op, int nranks)
{
    bool fl = dt == CG_DTYPE_F16 || dt == CG_DTYPE_BF16 ||
              dt == CG_DTYPE_F32 || dt == CG_DTYPE_F64;
    return fl && (op == CG_OP_SUM || op == CG_OP_AVG) && nranks > 1;
}

/* NCCL on the CUDA buffers. Where NCCL applies the factors itself the
 * allreduce is queued on the copies' stream, behind the copies into the
 * fusion buffer and ahead of those out of it, and waited for once with
 * them (cg_hvd_gpu_sync): no wait on the host between the three. Else on
 * NCCL's own stream, the copies waited for first, and the factors NCCL
 * cannot apply exactly applied here, on the host, before and after. */
static cg_status_t cg__nccl_allreduce(cg_hvd_gpu_t *gpu, cg_backend_t *be,
                                      const void *send, void *recv,
                                      size_t count, cg_dtype_t dt,
                                      cg_redop_t op, double prescale,
                                      double postscale)
{
    bool exact = cg_backend_nccl_scales(dt, op, be->size) ||
                 (prescale == 1.0 && postscale == 1.0);
    cg_status_t st = cg__hvd_gpu_start(gpu);

    if (st == CG_OK && exact && be->ops->allreduce_queued != NULL) {
        st = cg__hvd_gpu_flush(gpu);
        if (st == CG_OK)
            st = be->ops->allreduce_queued(be, send, recv, count, dt, op,
                                           prescale, postscale, gpu->stream);
        if (st == CG_OK && count > 0) {
            gpu->queued = be;
            gpu->queued_ops++;
        }
        return st;
    }
    if (st == CG_OK)
        st = cg_hvd_gpu_sync(gpu);
    if (st != CG_OK)
        return st;
    if (cg_backend_nccl_scales(dt, op, be->size))
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

typedef struct {
    cg_backend_t *be;
    cg_dtype_t dt;
    cg_redop_t op;
    double prescale, postscale;
} cg__ar_t;

static cg_status_t cg__ar_chunk(void *arg, void *host, size_t off, size_t n)
{
    cg__ar_t *a = arg;
    (void)off;
    return a->be->ops->allreduce(a->be, host, host, n, a->dt, a->op,
                                 a->prescale, a->postscale,
                                 CG_BACKEND_MEM_HOST);
}

cg_status_t cg_hvd_gpu_allreduce_queued(cg_hvd_gpu_t *gpu, cg_backend_t *be,
                                        const void *send, void *recv,
                                        size_t count, cg_dtype_t dt,
                                        cg_redop_t op, double prescale,
                                        double postscale)
{
    size_t dsize = cg_dtype_size(dt), step = 0;
    bool direct = false;
    cg_status_t st = cg__kept_failure(gpu, be);

    if (st != CG_OK)
        return st;
    if (be->kind == CG_BACKEND_NCCL)
        return cg__nccl_allreduce(gpu, be, send, recv, count, dt, op,
                                  prescale, postscale);
    st = cg__stage_agreed(gpu, send, recv, dsize, "allreduce", &direct,
                          &step);
    if (st != CG_OK || !direct) {
        cg__ar_t a = {be, dt, op, prescale, postscale};
        return st != CG_OK ? st
                           : cg__staged(gpu, send, recv, count, dsize, step,
                                        cg__ar_chunk, &a);
    }
    for (size_t off = 0; off < count && st == CG_OK; off += step) {
        size_t n = count - off < step ? count - off : step;
        st = be->ops->allreduce(be, (const char *)send + off * dsize,
                                (char *)recv + off * dsize, n, dt, op,
                                prescale, postscale, CG_BACKEND_MEM_HOST);
    }
    return st;
}

cg_status_t cg_hvd_gpu_allreduce(cg_hvd_gpu_t *gpu, cg_backend_t *be,
                                 const void *send, void *recv, size_t count,
                                 cg_dtype_t dt, cg_redop_t op,
                                 double prescale, double postscale)
{
    cg_status_t st = cg_hvd_gpu_allreduce_queued(gpu, be, send, recv, count,
                                                 dt, op, prescale, postscale);

    if (gpu->queued != NULL) { /* waited for even when it failed */
        cg_status_t w = cg_hvd_gpu_sync(gpu);
        if (st == CG_OK)
            st = w;
    }
    return st;
}

typedef struct {
    cg_backend_t *be;
    cg_dtype_t dt;
    int root;
} cg__bc_t;

static cg_status_t cg__bc_chunk(void *arg, void *host, size_t off, size_t n)
{
    cg__bc_t *a = arg;
    (void)off;
    return a->be->ops->broadcast(a->be, host, n, a->dt, a->root,
                                 CG_BACKEND_MEM_HOST);
}

cg_status_t cg_hvd_gpu_broadcast(cg_hvd_gpu_t *gpu, cg_backend_t *be,
                                 void *buf, size_t count, cg_dtype_t dt,
                                 int root)
{
    size_t dsize = cg_dtype_size(dt), step = 0;
    bool direct = false, is_root;
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
    st = cg__stage_agreed(gpu, buf, buf, dsize, "broadcast", &direct, &step);
    if (st != CG_OK || !direct) {
        cg__bc_t a = {be, dt, root};
        return st != CG_OK ? st
                           : cg__staged(gpu, is_root ? buf : NULL,
                                        is_root ? NULL : buf, count, dsize,
                                        step, cg__bc_chunk, &a);
    }
    for (size_t off = 0; off < count && st == CG_OK; off += step) {
        size_t n = count - off < step ? count - off : step;
        st = be->ops->broadcast(be, (char *)buf + off * dsize, n, dt, root,
                                CG_BACKEND_MEM_HOST);
    }
    return st;
}

typedef struct {
    cg_dtype_t dt;
    double factor;
} cg__sc_t;

static cg_status_t cg__sc_chunk(void *arg, void *host, size_t off, size_t n)
{
    cg__sc_t *a = arg;
    (void)off;
    cg_scale(host, n, a->dt, a->factor);
    return CG_OK;
}

cg_status_t cg_hvd_gpu_host_scale(cg_hvd_gpu_t *gpu, void *buf,
                                  size_t count, cg_dtype_t dt, double factor)
{
    size_t dsize = cg_dtype_size(dt);
    bool direct;
    cg_status_t st;

    if (factor == 1.0 || count == 0)
        return CG_OK;
    st = cg__stage_start(gpu, buf, buf, &direct);
    if (st != CG_OK || !direct) {
        cg__sc_t a = {dt, factor};
        size_t step = gpu->stage_len / dsize; /* this rank's own */
        return st != CG_OK ? st
                           : cg__staged(gpu, buf, buf, count, dsize,
                                        step > 0 ? step : 1, cg__sc_chunk,
                                        &a);
    }
    cg_scale(buf, count, dt, factor);
    return CG_OK;
}
