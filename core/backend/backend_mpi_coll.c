/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The collectives of the Horovod shim's MPI backend (backend_mpi.c makes
 * and frees it): MPI_Allreduce, MPI_Bcast, MPI_Reduce_scatter and
 * MPI_Alltoallv on host buffers over the backend's communicator, with
 * the engine's rules (prescale and postscale by core/reduce/reduce.h's
 * kernels, average as a sum finished by cg_reduce_post, the user ops
 * create made where MPI has no type or other NaN/-0 rules), counts beyond
 * INT_MAX in pieces, and the MPI error that breaks the backend. Calls
 * nothing of backend_mpi.c. Layer: core/backend; calls MPI,
 * core/reduce/reduce.h, governor.
 */
#include <math.h>
#include <mpi.h>
#include <string.h>

#include "core/base/error.h"
#include "core/backend/backend_mpi_impl.h"
#include "core/reduce/reduce.h"

/* Largest piece of one MPI call: elements (allreduce), bytes (bcast).
 * Tests build a copy with a small CG_MPI_PIECE_MAX to cover the split. */
#ifdef CG_MPI_PIECE_MAX
#define CG__MPI_PIECE_MAX ((size_t)(CG_MPI_PIECE_MAX))
#else
#define CG__MPI_PIECE_MAX ((size_t)1 << 30)
#endif

/* MPI handles are not constant expressions in Open MPI: a switch. */
static MPI_Datatype cg__mpi_type(cg_dtype_t dt)
{
    switch (dt) {
    case CG_DTYPE_I8:
        return MPI_INT8_T;
    case CG_DTYPE_U8:
        return MPI_UINT8_T;
    case CG_DTYPE_I16:
        return MPI_INT16_T;
    case CG_DTYPE_U16:
        return MPI_UINT16_T;
    case CG_DTYPE_I32:
        return MPI_INT32_T;
    case CG_DTYPE_U32:
        return MPI_UINT32_T;
    case CG_DTYPE_I64:
        return MPI_INT64_T;
    case CG_DTYPE_U64:
        return MPI_UINT64_T;
    case CG_DTYPE_F32:
        return MPI_FLOAT;
    case CG_DTYPE_F64:
        return MPI_DOUBLE;
    default: /* f16, bf16: 2-byte words reduced by the user ops */
        return MPI_UINT16_T;
    }
}

static MPI_Op cg__mpi_op(const cg__be_mpi_t *be, cg_dtype_t dt,
                         cg_redop_t op)
{
    if (op == CG_OP_AVG)
        op = CG_OP_SUM; /* cg_reduce_post divides afterwards */
    if (be->uops[dt][op] != MPI_OP_NULL)
        return be->uops[dt][op];
    switch (op) {
    case CG_OP_PROD:
        return MPI_PROD;
    case CG_OP_MIN:
        return MPI_MIN;
    case CG_OP_MAX:
        return MPI_MAX;
    default:
        return MPI_SUM;
    }
}

/* MPI's text for rc. */
const char *cg__mpi_text(int rc, char text[MPI_MAX_ERROR_STRING])
{
    int len = 0;

    text[0] = '\0';
    MPI_Error_string(rc, text, &len);
    return text;
}

static cg_status_t cg__mpi_fail(cg__be_mpi_t *be, int rc, const char *call,
                                size_t count, cg_dtype_t dt)
{
    char text[MPI_MAX_ERROR_STRING];

    cg__mpi_text(rc, text);
    be->super.broken = true;
    return cg_error_set(CG_ERR_IO, "%s of %zu %s failed: %s (MPI error %d); "
                        "the MPI backend is unusable from now on", call,
                        count, cg_dtype_name(dt), text, rc);
}

static cg_status_t cg__mpi_usable(const cg__be_mpi_t *be,
                                  cg_backend_mem_t mem, const char *what)
{
    if (be->super.broken)
        return cg_error_set(CG_ERR_PEER_RESET, "mpi backend: %s after an "
                            "earlier MPI error broke the backend", what);
    if (mem != CG_BACKEND_MEM_HOST)
        return cg_error_set(CG_ERR_UNSUPPORTED, "mpi backend: %s of CUDA "
                            "memory needs host staging", what);
    return CG_OK;
}

cg_status_t cg__mpibe_allreduce(cg_backend_t *super, const void *send,
                                void *recv, size_t count,
                                cg_dtype_t dt, cg_redop_t op,
                                double prescale, double postscale,
                                cg_backend_mem_t mem)
{
    cg__be_mpi_t *be = (cg__be_mpi_t *)super;
    size_t el = cg_dtype_size(dt);
    cg_status_t st = cg__mpi_usable(be, mem, "allreduce");

    if (st == CG_OK)
        st = cg_reduce_check(dt, op);
    if (st == CG_OK && (!isfinite(prescale) || !isfinite(postscale)))
        st = cg_error_set(CG_ERR_INVALID_PARAM, "mpi backend: prescale %g "
                          "and postscale %g must be finite", prescale,
                          postscale);
    if (st != CG_OK || count == 0)
        return st;
    if (prescale != 1.0) {
        if (send == recv)
            cg_scale(recv, count, dt, prescale);
        else
            cg_scale_copy(recv, send, count, dt, prescale);
        send = recv;
    }
    for (size_t off = 0; off < count; off += CG__MPI_PIECE_MAX) {
        size_t n = count - off < CG__MPI_PIECE_MAX ? count - off
                                                   : CG__MPI_PIECE_MAX;
        const void *s = send == recv ? MPI_IN_PLACE
                                     : (const char *)send + off * el;
        int rc = MPI_Allreduce(s, (char *)recv + off * el, (int)n,
                               cg__mpi_type(dt), cg__mpi_op(be, dt, op),
                               be->comm);
        if (rc != MPI_SUCCESS)
            return cg__mpi_fail(be, rc, "MPI_Allreduce", count, dt);
    }
    return cg_reduce_post(recv, count, dt, op, be->size, postscale);
}

cg_status_t cg__mpibe_broadcast(cg_backend_t *super, void *buf,
                                size_t count, cg_dtype_t dt, int root,
                                cg_backend_mem_t mem)
{
    cg__be_mpi_t *be = (cg__be_mpi_t *)super;
    size_t bytes = count * cg_dtype_size(dt);
    cg_status_t st = cg__mpi_usable(be, mem, "broadcast");

    if (st != CG_OK)
        return st;
    if (root < 0 || root >= be->size)
        return cg_error_set(CG_ERR_INVALID_PARAM, "mpi backend: broadcast "
                            "root %d outside 0..%d", root, be->size - 1);
    for (size_t off = 0; off < bytes; off += CG__MPI_PIECE_MAX) {
        size_t n = bytes - off < CG__MPI_PIECE_MAX ? bytes - off
                                                   : CG__MPI_PIECE_MAX;
        int rc = MPI_Bcast((char *)buf + off, (int)n, MPI_BYTE, root,
                           be->comm);
        if (rc != MPI_SUCCESS)
            return cg__mpi_fail(be, rc, "MPI_Bcast", count, dt);
    }
    return CG_OK;
}

/* Blocks whose counts exceed one MPI call, or whose sum does: one
 * MPI_Reduce per block and piece, rooted at the block's rank. send is
 * this rank's (prescaled) input; in place when recv is its own block. */
static int cg__mpi_rs_pieces(cg__be_mpi_t *be, const char *send, char *recv,
                             const size_t *counts, cg_dtype_t dt,
                             cg_redop_t op, int me)
{
    size_t el = cg_dtype_size(dt), displ = 0;
    int rc = MPI_SUCCESS;

    for (int r = 0; r < be->size && rc == MPI_SUCCESS; r++) {
        const char *blk = send + displ * el;
        for (size_t off = 0; off < counts[r] && rc == MPI_SUCCESS;
             off += CG__MPI_PIECE_MAX) {
            size_t n = counts[r] - off < CG__MPI_PIECE_MAX ? counts[r] - off
                                                          : CG__MPI_PIECE_MAX;
            const void *s = blk + off * el;
            if (r == me && blk == recv)
                s = MPI_IN_PLACE;
            rc = MPI_Reduce(s, r == me ? recv + off * el : NULL, (int)n,
                            cg__mpi_type(dt), cg__mpi_op(be, dt, op), r,
                            be->comm);
        }
        displ += counts[r];
    }
    return rc;
}

/* Every rank's verdict on its own memory for the prescaled copy: all or
 * none go on (a rank that stopped alone would leave the others in MPI). */
static cg_status_t cg__mpi_rs_agree(cg__be_mpi_t *be, cg_status_t mine)
{
    int ok = mine == CG_OK, all = 0;
    int rc = MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, be->comm);

    if (rc != MPI_SUCCESS)
        return cg__mpi_fail(be, rc, "MPI_Allreduce", 1, CG_DTYPE_I32);
    if (all)
        return CG_OK;
    return mine != CG_OK ? mine
                         : cg_error_set(CG_ERR_NO_MEMORY, "mpi backend: "
                                        "reduce-scatter: another rank has no "
                                        "memory for its prescaled input");
}

cg_status_t cg__mpibe_reducescatter(cg_backend_t *super,
                                    const void *send, void *recv,
                                    const size_t *counts,
                                    cg_dtype_t dt, cg_redop_t op,
                                    double prescale, double postscale)
{
    cg__be_mpi_t *be = (cg__be_mpi_t *)super;
    size_t el = cg_dtype_size(dt), total = 0, mine_at = 0, tbytes = 0;
    int me = 0, rc, small = 1;
    void *tmp = NULL;
    cg_status_t st = cg__mpi_usable(be, CG_BACKEND_MEM_HOST,
                                    "reduce-scatter");

    if (st == CG_OK)
        st = cg_reduce_check(dt, op);
    if (st != CG_OK)
        return st;
    MPI_Comm_rank(be->comm, &me);
    for (int r = 0; r < be->size; r++) {
        mine_at += r < me ? counts[r] : 0;
        total += counts[r];
        small &= counts[r] <= CG__MPI_PIECE_MAX;
    }
    small &= total <= CG__MPI_PIECE_MAX;
    if (prescale != 1.0) { /* a scaled copy of the whole input */
        tbytes = total * el;
        st = cg__mpi_rs_agree(be, cg_governor_alloc(be->gov,
                                                    CG_MEM_CAT_STAGING,
                                                    tbytes, &tmp));
        if (st != CG_OK) {
            cg_governor_free(be->gov, CG_MEM_CAT_STAGING, tmp, tbytes);
            return st;
        }
        cg_scale_copy(tmp, send, total, dt, prescale);
        send = tmp;
    }
    if (small) {
        bool inplace = (const char *)send + mine_at * el == (char *)recv;
        for (int r = 0; r < be->size; r++)
            be->rcounts[r] = (int)counts[r];
        /* MPI_IN_PLACE: the input in recvbuf, the result at its start. */
        rc = MPI_Reduce_scatter(inplace ? MPI_IN_PLACE : send,
                                inplace ? (void *)send : recv, be->rcounts,
                                cg__mpi_type(dt), cg__mpi_op(be, dt, op),
                                be->comm);
        if (rc == MPI_SUCCESS && inplace && mine_at > 0)
            memmove(recv, send, counts[me] * el);
    } else {
        rc = cg__mpi_rs_pieces(be, send, recv, counts, dt, op, me);
    }
    cg_governor_free(be->gov, CG_MEM_CAT_STAGING, tmp, tbytes);
    if (rc != MPI_SUCCESS)
        return cg__mpi_fail(be, rc, small ? "MPI_Reduce_scatter"
                                          : "MPI_Reduce", total, dt);
    return cg_reduce_post(recv, counts[me], dt, op, be->size, postscale);
}

/* Alltoall beyond one MPI_Alltoallv (a row or a rank's total past the
 * piece limit): per step k, send to rank+k and receive from rank-k in
 * byte pieces, a window of them at a time; a posted piece's peer posts
 * its match in the same window, so no rank waits for ever. */
#define CG__MPI_A2A_WIN 8
static int cg__mpi_a2a_pieces(cg__be_mpi_t *be, const char *send, char *recv,
                              const int64_t *rows, size_t row, int me)
{
    int n = be->size, rc = MPI_SUCCESS;
    MPI_Request rq[2 * CG__MPI_A2A_WIN];

    for (int k = 0; k < n && rc == MPI_SUCCESS; k++) {
        int dst = (me + k) % n, src = (me - k + n) % n;
        size_t so = 0, ro = 0, slen, rlen, sp = 0, rp = 0;
        for (int q = 0; q < dst; q++)
            so += (size_t)rows[me * n + q] * row;
        for (int q = 0; q < src; q++)
            ro += (size_t)rows[q * n + me] * row;
        slen = (size_t)rows[me * n + dst] * row;
        rlen = (size_t)rows[src * n + me] * row;
        if (k == 0) {
            memcpy(recv + ro, send + so, slen);
            continue;
        }
        while (rc == MPI_SUCCESS && (sp < slen || rp < rlen)) {
            int nr = 0;
            for (int w = 0; w < CG__MPI_A2A_WIN && rp < rlen; w++) {
                size_t l = rlen - rp < CG__MPI_PIECE_MAX ? rlen - rp
                                                         : CG__MPI_PIECE_MAX;
                if (rc == MPI_SUCCESS)
                    rc = MPI_Irecv(recv + ro + rp, (int)l, MPI_BYTE, src, k,
                                   be->comm, &rq[nr++]);
                rp += l;
            }
            for (int w = 0; w < CG__MPI_A2A_WIN && sp < slen; w++) {
                size_t l = slen - sp < CG__MPI_PIECE_MAX ? slen - sp
                                                         : CG__MPI_PIECE_MAX;
                if (rc == MPI_SUCCESS)
                    rc = MPI_Isend(send + so + sp, (int)l, MPI_BYTE, dst, k,
                                   be->comm, &rq[nr++]);
                sp += l;
            }
            if (rc == MPI_SUCCESS)
                rc = MPI_Waitall(nr, rq, MPI_STATUSES_IGNORE);
        }
    }
    return rc;
}

cg_status_t cg__mpibe_alltoallv(cg_backend_t *super, const void *send,
                                void *recv, const int64_t *rows,
                                size_t row)
{
    cg__be_mpi_t *be = (cg__be_mpi_t *)super;
    int n = be->size, me = 0, rc = MPI_SUCCESS, one;
    int *sc = be->a2a, *sd = sc + n, *rcn = sd + n, *rd = rcn + n;
    size_t most = 0;
    MPI_Datatype t;
    cg_status_t st = cg__mpi_usable(be, CG_BACKEND_MEM_HOST, "alltoall");

    if (st != CG_OK || row == 0)
        return st;
    MPI_Comm_rank(be->comm, &me);
    /* One verdict for every rank, from the matrix they share. */
    for (int a = 0; a < n; a++) {
        size_t out = 0, in = 0;
        for (int b = 0; b < n; b++) {
            out += (size_t)rows[a * n + b];
            in += (size_t)rows[b * n + a];
        }
        most = out > most ? out : most;
        most = in > most ? in : most;
    }
    one = row <= CG__MPI_PIECE_MAX && most <= CG__MPI_PIECE_MAX;
    if (!one) {
        rc = cg__mpi_a2a_pieces(be, send, recv, rows, row, me);
    } else {
        for (int r = 0, s = 0, d = 0; r < n; r++) {
            sc[r] = (int)rows[me * n + r];
            rcn[r] = (int)rows[r * n + me];
            sd[r] = s;
            rd[r] = d;
            s += sc[r];
            d += rcn[r];
        }
        rc = MPI_Type_contiguous((int)row, MPI_BYTE, &t);
        if (rc == MPI_SUCCESS && (rc = MPI_Type_commit(&t)) == MPI_SUCCESS) {
            rc = MPI_Alltoallv(send, sc, sd, t, recv, rcn, rd, t, be->comm);
            MPI_Type_free(&t);
        }
    }
    if (rc != MPI_SUCCESS)
        return cg__mpi_fail(be, rc, one ? "MPI_Alltoallv" : "MPI_Sendrecv",
                            most * row, CG_DTYPE_U8);
    return CG_OK;
}
