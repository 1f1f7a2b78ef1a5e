/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The NCCL backend of the Horovod shim's core (HOROVOD_GPU_OPERATIONS=
 * NCCL): one communicator, made at the first CUDA collective (every rank
 * reaches it in the same cycle) on the thread's current device, after the
 * governor's NCCL_BUFFSIZE and, under pressure, a channel cap are
 * exported; the unique id travels over the core's own communicator.
 * ncclAllReduce / ncclBroadcast on a dedicated stream, polled with a
 * CG_TIMEOUT bound (the communicator is aborted rather than left hanging
 * on a dead peer); or an allreduce queued on the caller's stream behind
 * its fusion copies (allreduce_queued), waited for once with the copies
 * out (stream_wait, the same bound and abort). Built only with NCCL and
 * CUDA. Background thread only.
 * Layer: core/backend; calls NCCL, the CUDA runtime and core/coll/coll.h.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "core/base/clock.h"
#include "core/base/error.h"
#include "core/base/parse.h"
#include "core/coll/coll.h"
#include "core/reduce/half.h"
#include "core/backend/hvd_gpu.h"
#include "core/backend/nccl_env.h"

/* Polls without sleeping this long first: a sleep costs ~60 us. */
#define CG__SPIN_NS 200000ull

typedef struct cg__nccl {
    cg_backend_t hdr;    /* hdr.broken: aborted, every later call fails */
    cg_governor_t *gov;
    const cg_log_t *log;
    const cg_config_t *cfg;
    cg_comm_t *comm;     /* carries the unique id */
    int rank, size;
    ncclComm_t nc;       /* NULL until the first collective */
    bool aborted;        /* ncclCommAbort called on nc */
    cudaStream_t stream;
    int device;
} cg__nccl_t;

/* Gives up on the communicator; the core then fails every pending
 * request (hdr.broken), and the peers see this rank stop. */
static cg_status_t cg__fail(cg__nccl_t *nb, cg_status_t st, const char *what,
                            const char *why)
{
    if (nb->nc != NULL && !nb->aborted)
        (void)ncclCommAbort(nb->nc);
    nb->aborted = nb->nc != NULL;
    nb->hdr.broken = true;
    return cg_error_set(st, "nccl %s: %s", what, why);
}

static cg_status_t cg__status_of(ncclResult_t r)
{
    return r == ncclRemoteError || r == ncclSystemError ? CG_ERR_PEER_RESET
                                                        : CG_ERR_INTERNAL;
}

/* Polls until NCCL has issued the work (a non-blocking communicator may
 * answer ncclInProgress) and, when stream is not NULL, the stream drained;
 * at most CG_TIMEOUT. */
static cg_status_t cg__wait(cg__nccl_t *nb, const char *what,
                            cudaStream_t stream)
{
    uint64_t t0 = cg_now_ns(), limit = nb->cfg->timeout_ns;
    struct timespec nap = {0, 20000};
    ncclResult_t ar = ncclInProgress;
    cudaError_t ce;
    char why[320];

    for (;;) {
        if (ncclCommGetAsyncError(nb->nc, &ar) != ncclSuccess ||
            (ar != ncclSuccess && ar != ncclInProgress)) {
            snprintf(why, sizeof(why), "%s (%s)", ncclGetErrorString(ar),
                     ncclGetLastError(nb->nc));
            return cg__fail(nb, cg__status_of(ar), what, why);
        }
        if (ar == ncclSuccess) {
            if (stream == NULL)
                return CG_OK;
            ce = cudaStreamQuery(stream);
            if (ce == cudaSuccess)
                return CG_OK;
            if (ce != cudaErrorNotReady) {
                (void)cudaGetLastError();
                return cg__fail(nb, CG_ERR_INTERNAL, what,
                                cudaGetErrorString(ce));
            }
        }
        if (cg_now_ns() - t0 > CG__SPIN_NS)
            nanosleep(&nap, NULL); /* long collectives: stop spinning */
        if (cg_now_ns() - t0 > limit) {
            snprintf(why, sizeof(why), "not done within CG_TIMEOUT (%.1f "
                     "s): a peer died or stopped; communicator aborted",
                     limit / 1e9);
            return cg__fail(nb, CG_ERR_TIMEOUT, what, why);
        }
    }
}

/* The stream and the communicator, at the first CUDA collective (every
 * rank reaches it in the same cycle), on the thread's current device. */
static cg_status_t cg__comm(cg__nccl_t *nb)
{
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    ncclUniqueId id;
    ncclResult_t r = ncclSuccess;
    cudaError_t ce;
    cg_status_t st;

    if (nb->hdr.broken)
        return cg_error_set(CG_ERR_PEER_RESET, "nccl: the communicator was "
                            "aborted after an earlier failure");
    if (nb->nc != NULL)
        return CG_OK;
    ce = cudaGetDevice(&nb->device);
    if (ce == cudaSuccess && nb->stream == NULL)
        ce = cudaStreamCreateWithFlags(&nb->stream, cudaStreamNonBlocking);
    if (ce != cudaSuccess) {
        (void)cudaGetLastError();
        return cg_error_set(CG_ERR_NO_DEVICE, "nccl: no stream on the "
                            "current CUDA device: %s",
                            cudaGetErrorString(ce));
    }
    {
        cg_nccl_env_item_t items[CG_NCCL_ENV_MAX];
        (void)cg_nccl_env_export(nb->gov, nb->cfg, nb->log, NULL, items);
    }
    memset(&id, 0, sizeof(id));
    if (nb->rank == 0 && (r = ncclGetUniqueId(&id)) != ncclSuccess)
        memset(&id, 0xff, sizeof(id)); /* tells the others it failed */
    st = cg_broadcast(nb->comm, &id, sizeof(id), CG_DTYPE_U8, 0);
    if (st != CG_OK) {
        nb->hdr.broken = cg_comm_broken(nb->comm);
        return cg_error_set(st, "nccl: sharing the unique id: %s",
                            cg_last_error());
    }
    if (id.internal[0] == (char)0xff && id.internal[1] == (char)0xff)
        return cg__fail(nb, CG_ERR_INTERNAL, "ncclGetUniqueId",
                        nb->rank == 0 ? ncclGetErrorString(r)
                                      : "failed on rank 0 (see its log)");
    cfg.blocking = 0; /* bounded by CG_TIMEOUT below */
    r = ncclCommInitRankConfig(&nb->nc, nb->size, id, nb->rank, &cfg);
    if (r != ncclSuccess && r != ncclInProgress) {
        char why[320];
        snprintf(why, sizeof(why), "%s (%s)", ncclGetErrorString(r),
                 ncclGetLastError(NULL));
        nb->nc = NULL;
        return cg__fail(nb, cg__status_of(r), "ncclCommInitRankConfig", why);
    }
    st = cg__wait(nb, "ncclCommInitRankConfig", NULL);
    if (st == CG_OK)
        cg_info(nb->log, "nccl communicator ready: %d ranks, device %d",
                nb->size, nb->device);
    return st;
}

/* The scalar of a pre-multiply-sum in the buffer's own type. */
static void cg__scalar(cg_dtype_t dt, double f, void *out)
{
    uint16_t h;
    float s = (float)f;

    switch (dt) {
    case CG_DTYPE_F16:
        h = cg_f32_to_f16(s);
        memcpy(out, &h, 2);
        break;
    case CG_DTYPE_BF16:
        h = cg_f32_to_bf16(s);
        memcpy(out, &h, 2);
        break;
    case CG_DTYPE_F32:
        memcpy(out, &s, 4);
        break;
    default:
        memcpy(out, &f, 8);
        break;
    }
}

/* Floats with sum/average: every factor folds into one NCCL op (ncclAvg,
 * or a pre-multiply-sum by prescale * postscale [/ size]). Other pairs
 * reduce natively; their factors must be 1 (hvd_gpu_stage.c applies them
 * on the host by the engine's rules: cg_backend_nccl_scales). */
/* This backend serves CUDA buffers only. */
static cg_status_t cg__device_only(cg_backend_mem_t mem)
{
    if (mem == CG_BACKEND_MEM_CUDA)
        return CG_OK;
    return cg_error_set(CG_ERR_UNSUPPORTED, "nccl backend: host buffers are "
                        "not served (HOROVOD_CPU_OPERATIONS picks the host "
                        "backend)");
}

/* NCCL has no 16-bit integers (cg_dtype_t's values past ncclBfloat16 are
 * collguard's own): refused, as Horovod's GetNCCLDataType throws "Type
 * int16 is not supported in NCCL mode". */
static cg_status_t cg__nccl_dtype(cg_dtype_t dt, const char *what)
{
    if ((int)dt <= (int)CG_DTYPE_BF16)
        return CG_OK;
    return cg_error_set(CG_ERR_UNSUPPORTED, "nccl backend: %s of dtype %s is "
                        "not supported (NCCL has no 16-bit integer type; "
                        "HOROVOD_GPU_OPERATIONS=COLLGUARD or MPI reduces it "
                        "through host staging)", what, cg_dtype_name(dt));
}

/* Issues the allreduce on stream s (NULL: the backend's own), after
 * whatever is queued there, and returns once NCCL has taken it (a
 * non-blocking communicator's ncclInProgress waited out); the stream is
 * not waited for. */
static cg_status_t cg__allreduce_issue(cg__nccl_t *nb, const void *send,
                                       void *recv, size_t count,
                                       cg_dtype_t dt, cg_redop_t op,
                                       double prescale, double postscale,
                                       cudaStream_t s)
{
    bool fold = cg_backend_nccl_scales(dt, op, nb->size);
    double f = prescale * postscale / (op == CG_OP_AVG ? nb->size : 1);
    ncclRedOp_t nop = (ncclRedOp_t)op; /* the same numbering */
    bool custom = false;
    char scalar[8];
    ncclResult_t r;
    cg_status_t st = cg__nccl_dtype(dt, "allreduce");

    if (st != CG_OK)
        return st;
    if (!fold && (prescale != 1.0 || postscale != 1.0))
        return cg_error_set(CG_ERR_UNSUPPORTED, "nccl backend: %s %s with "
                            "prescale %g, postscale %g has no exact NCCL op "
                            "(the caller scales on the host)",
                            cg_dtype_name(dt), cg_redop_name(op), prescale,
                            postscale);
    st = cg__comm(nb);
    if (st != CG_OK || count == 0)
        return st;
    if (s == NULL)
        s = nb->stream;
    if ((fold && f == 1.0) || (nb->size == 1 && op == CG_OP_AVG)) {
        /* sum, or average with prescale*postscale == size, or the average
         * of one rank (ncclAvg is a pre-multiply-sum: see
         * cg_backend_nccl_scales) */
        nop = ncclSum;
    } else if (fold && !(op == CG_OP_AVG && prescale == 1.0 &&
                         postscale == 1.0)) {
        cg__scalar(dt, f, scalar);
        r = ncclRedOpCreatePreMulSum(&nop, scalar, (ncclDataType_t)dt,
                                     ncclScalarHostImmediate, nb->nc);
        if (r != ncclSuccess)
            return cg__fail(nb, cg__status_of(r), "ncclRedOpCreatePreMulSum",
                            ncclGetErrorString(r));
        custom = true;
    }
    r = ncclAllReduce(send, recv, count, (ncclDataType_t)dt, nop, nb->nc, s);
    if (r != ncclSuccess && r != ncclInProgress)
        st = cg__fail(nb, cg__status_of(r), "ncclAllReduce",
                      ncclGetErrorString(r));
    else if (r == ncclInProgress)
        st = cg__wait(nb, "ncclAllReduce", NULL);
    /* NCCL allows destroying an op once the call given it has returned,
     * its kernel still queued. */
    if (custom && !nb->hdr.broken)
        (void)ncclRedOpDestroy(nop, nb->nc);
    return st;
}

static cg_status_t cg__allreduce(cg_backend_t *be, const void *send,
                                 void *recv, size_t count, cg_dtype_t dt,
                                 cg_redop_t op, double prescale,
                                 double postscale, cg_backend_mem_t mem)
{
    cg__nccl_t *nb = (cg__nccl_t *)be;
    cg_status_t st = cg__device_only(mem);

    if (st == CG_OK)
        st = cg__allreduce_issue(nb, send, recv, count, dt, op, prescale,
                                 postscale, NULL);
    if (st != CG_OK || count == 0)
        return st;
    return cg__wait(nb, "ncclAllReduce", nb->stream);
}

static cg_status_t cg__allreduce_queued(cg_backend_t *be, const void *send,
                                        void *recv, size_t count,
                                        cg_dtype_t dt, cg_redop_t op,
                                        double prescale, double postscale,
                                        void *stream)
{
    return cg__allreduce_issue((cg__nccl_t *)be, send, recv, count, dt, op,
                               prescale, postscale, (cudaStream_t)stream);
}

static cg_status_t cg__stream_wait(cg_backend_t *be, void *stream,
                                   const char *what)
{
    cg__nccl_t *nb = (cg__nccl_t *)be;

    if (nb->hdr.broken || nb->nc == NULL)
        return cg_error_set(CG_ERR_PEER_RESET, "nccl %s: the communicator "
                            "was aborted after an earlier failure", what);
    return cg__wait(nb, what, (cudaStream_t)stream);
}

static cg_status_t cg__broadcast(cg_backend_t *be, void *buf, size_t count,
                                 cg_dtype_t dt, int root, cg_backend_mem_t mem)
{
    cg__nccl_t *nb = (cg__nccl_t *)be;
    ncclResult_t r;
    cg_status_t st = cg__device_only(mem);

    if (st == CG_OK)
        st = cg__nccl_dtype(dt, "broadcast");
    if (st != CG_OK)
        return st;
    st = cg__comm(nb);
    if (st != CG_OK || count == 0)
        return st;
    r = ncclBroadcast(buf, buf, count, (ncclDataType_t)dt, root, nb->nc,
                      nb->stream);
    if (r != ncclSuccess && r != ncclInProgress)
        return cg__fail(nb, cg__status_of(r), "ncclBroadcast",
                        ncclGetErrorString(r));
    return cg__wait(nb, "ncclBroadcast", nb->stream);
}

/* The communicator now, and a one-element allreduce through it (NCCL
 * connects a communicator's channels at their first use): what NCCL
 * needs of device memory is taken here or not at all by the first
 * collectives (other algorithms connect later). A failure for memory
 * (NCCL's text of a CUDA allocation) is CG_ERR_NO_MEMORY. */
cg_status_t cg_backend_nccl_start(cg_backend_t *be, uint64_t *took_p)
{
    cg__nccl_t *nb = (cg__nccl_t *)be;
    size_t free0 = 0, free1 = 0, total = 0;
    float *one = NULL;
    cg_status_t st;
    char why[512];

    *took_p = 0;
    if (cudaMemGetInfo(&free0, &total) != cudaSuccess)
        (void)cudaGetLastError();
    st = cg__comm(nb);
    if (st == CG_OK && cudaMalloc((void **)&one, sizeof(*one)) != cudaSuccess) {
        (void)cudaGetLastError();
        st = cg__fail(nb, CG_ERR_NO_MEMORY, "first allreduce",
                      "cudaMalloc of 4 bytes: out of memory");
    }
    if (st == CG_OK && cudaMemsetAsync(one, 0, sizeof(*one), nb->stream) !=
                           cudaSuccess) {
        (void)cudaGetLastError();
        st = cg__fail(nb, CG_ERR_INTERNAL, "first allreduce", "cudaMemset");
    }
    if (st == CG_OK)
        st = cg__allreduce(be, one, one, 1, CG_DTYPE_F32, CG_OP_SUM, 1.0, 1.0,
                           CG_BACKEND_MEM_CUDA);
    if (one != NULL && cudaFree(one) != cudaSuccess)
        (void)cudaGetLastError();
    if (st == CG_OK && nb->cfg->fault_nccl_init)
        st = cg__fail(nb, CG_ERR_NO_MEMORY, "communicator creation",
                      "out of memory (CG_FAULT_NCCL_INIT=1)");
    if (st == CG_OK) {
        if (cudaMemGetInfo(&free1, &total) != cudaSuccess)
            (void)cudaGetLastError();
        *took_p = free0 > free1 ? free0 - free1 : 0;
        return CG_OK;
    }
    snprintf(why, sizeof(why), "%s", cg_last_error());
    if (st != CG_ERR_NO_MEMORY && strstr(why, "out of memory") != NULL)
        st = cg_error_set(CG_ERR_NO_MEMORY, "%s", why);
    return st;
}

/* Finalize (bounded by CG_TIMEOUT) then destroy; abort when it fails,
 * or at once when the backend was marked broken from outside (a fault
 * injected, AUTO dropping NCCL after another rank's failure). */
static void cg__destroy(cg_backend_t *be)
{
    cg__nccl_t *nb = (cg__nccl_t *)be;
    uint64_t t0 = cg_now_ns(), limit = nb->cfg->timeout_ns;
    struct timespec nap = {0, 20000};
    ncclResult_t r, ar = ncclInProgress;

    if (nb->nc != NULL && !nb->hdr.broken) {
        r = ncclCommFinalize(nb->nc);
        while ((r == ncclSuccess || r == ncclInProgress) &&
               ncclCommGetAsyncError(nb->nc, &ar) == ncclSuccess &&
               ar == ncclInProgress && cg_now_ns() - t0 < limit)
            nanosleep(&nap, NULL);
        if (ar == ncclSuccess) {
            (void)ncclCommDestroy(nb->nc);
        } else {
            cg_warn(nb->log, "nccl communicator did not finalize (%s); "
                    "aborted", ncclGetErrorString(ar));
            (void)ncclCommAbort(nb->nc);
        }
    } else if (nb->nc != NULL && !nb->aborted) {
        (void)ncclCommAbort(nb->nc);
    }
    if (nb->stream != NULL)
        (void)cudaStreamDestroy(nb->stream);
    cg_governor_free(nb->gov, CG_MEM_CAT_CONTROL, nb, sizeof(*nb));
}

static const cg_backend_ops_t cg__nccl_ops = {
    .kind = CG_BACKEND_NCCL,
    .allreduce_activity = "NCCL_ALLREDUCE",
    .broadcast_activity = "NCCL_BCAST",
    .allreduce = cg__allreduce,
    .broadcast = cg__broadcast,
    .allreduce_queued = cg__allreduce_queued,
    .stream_wait = cg__stream_wait,
    .destroy = cg__destroy,
};

cg_status_t cg_backend_nccl_create(const cg_backend_params_t *params,
                                   cg_backend_t **be_p)
{
    cg__nccl_t *nb;
    cg_status_t st;

    st = cg_governor_alloc(params->gov, CG_MEM_CAT_CONTROL, sizeof(*nb),
                           (void **)&nb);
    if (st != CG_OK)
        return st;
    memset(nb, 0, sizeof(*nb));
    nb->hdr.ops = &cg__nccl_ops;
    nb->hdr.kind = CG_BACKEND_NCCL;
    nb->gov = params->gov;
    nb->log = params->log;
    nb->cfg = params->cfg;
    nb->comm = params->comm;
    nb->rank = params->rank;
    nb->size = params->size;
    nb->device = -1;
    *be_p = &nb->hdr;
    return CG_OK;
}
