/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The collectives over a communicator: AllReduce (through shared memory
 * when every rank is on this host, see coll_shm.c; else ring
 * reduce-scatter + all-gather pipelined in governor-sized chunks, or
 * recursive doubling for small messages) and Broadcast (pipelined chain,
 * or binomial tree for small messages); CG_ALGO overrides the choice. Blocking; every
 * rank calls the same collectives in the same order with the same count,
 * dtype, op and root. Results are bit-identical on every rank and from run
 * to run for a given rank count, whatever chunk sizes the governor picks.
 * A failed transfer or a dead peer fails the operation on every live rank
 * within CG_TIMEOUT, with the peer rank and the cause in cg_last_error();
 * the communicator is unusable afterwards. Layer: core/coll.
 */
#ifndef CG_CORE_COLL_H
#define CG_CORE_COLL_H

#include <stddef.h>

#include "collguard/status.h"
#include "collguard/types.h"
#include "core/base/enum.h"
#include "core/coll/comm.h"

/* recvbuf[i] = postscale * (op over ranks of prescale * sendbuf[i]) for
 * i < count (average: the sum divided by the rank count, by
 * cg_reduce_post's rules). sendbuf == recvbuf is in place; otherwise the
 * two must not overlap and sendbuf is left untouched. count 0: no-op.
 * Buffer memory beyond the caller's (CG_MEM_CAT_RING): at most two chunks,
 * plus 64 KiB for recursive doubling with more than two ranks, kept by
 * the communicator for its next collectives (cg_comm_scratch). */
cg_status_t cg_allreduce(cg_comm_t *comm, const void *sendbuf, void *recvbuf,
                         size_t count, cg_dtype_t dt, cg_redop_t op,
                         double prescale, double postscale);

/* A buffer whose bytes the caller supplies as the collective first needs
 * them and takes back as soon as they are final, so data moves between the
 * caller's scattered memory and the collective while it is still in cache
 * (the shim's fused tensors). Offsets are into the buffer's byte range;
 * the collective says where the bytes go or come from, which is the
 * buffer itself (at off) or memory of its own (a shared-memory slot):
 * fill(arg, off, len, dst) writes the input bytes [off, off + len) to dst;
 * drain(arg, off, len, src) takes the result bytes [off, off + len) from
 * src. On success every byte is filled exactly once (or reduced from, see
 * reduce_in), before anything reads it, and drained exactly once, after it
 * holds the result; ranges come in pieces, in no set order. On failure
 * some ranges may never be filled or drained. */
typedef struct cg_coll_stage {
    void (*fill)(void *arg, size_t off, size_t len, void *dst);
    void (*drain)(void *arg, size_t off, size_t len, const void *src);
    void *arg;
    /* NULL, or the element count of each of the rank count's ring
     * segments (summing to count, the same on every rank): with more than
     * two ranks the ring then runs whatever the size, on these segments.
     * An element's reduction order depends only on its segment's index,
     * so a caller that lays out several tensors segment by segment (each
     * tensor cut as cg_allreduce would cut it alone) gets, for each
     * tensor, the bits of the ring on that tensor alone, whatever shares
     * the buffer. */
    const size_t *segs;
    /* NULL, or dst[0, len) = (this rank's input at [off, off + len)) op
     * piece, in the call's dtype and op, with the bits of cg_reduce3(dst,
     * input, piece): the collective then reads the input once where it
     * reduces instead of filling the range first (used when prescale is
     * 1). dst does not overlap piece. */
    void (*reduce_in)(void *arg, size_t off, size_t len, const void *piece,
                      void *dst);
} cg_coll_stage_t;

/* Segment s of the ring over n ranks, in elements: count/n, the first
 * count%n one more (how cg_allreduce cuts a buffer); or segs[s] when segs
 * is not NULL, offsets summed. */
void cg_ring_seg(const size_t *segs, size_t count, int n, int s,
                 size_t *off, size_t *cnt);

/* cg_allreduce in place on buf, whose contents come from stage->fill and
 * go to stage->drain (see cg_coll_stage_t); the same results, bit for bit,
 * as cg_allreduce(comm, buf, buf, ...) on the filled buffer. */
cg_status_t cg_allreduce_staged(cg_comm_t *comm, void *buf, size_t count,
                                cg_dtype_t dt, cg_redop_t op,
                                double prescale, double postscale,
                                const cg_coll_stage_t *stage);

/* buf (count elements of dt) from root to every rank. No extra memory. */
cg_status_t cg_broadcast(cg_comm_t *comm, void *buf, size_t count,
                         cg_dtype_t dt, int root);

/* Every rank's block, back to back in rank order, into recvbuf on every
 * rank: bytes[r] is rank r's block (0 allowed; the same array on every
 * rank), recvbuf holds their sum. sendbuf (bytes[rank] bytes) may be
 * recvbuf plus this rank's offset (in place); otherwise it must not
 * overlap recvbuf. A ring, pieces forwarded as they land; no extra
 * memory. Byte-level: no dtype. */
cg_status_t cg_allgatherv(cg_comm_t *comm, const void *sendbuf,
                          void *recvbuf, const size_t *bytes);

/* Alltoall: this rank's send_bytes[r] bytes for rank r lie back to back
 * in rank order in sendbuf; recvbuf gets, back to back in rank order,
 * recv_bytes[r] bytes from rank r (which must be what rank r sends here;
 * 0 allowed). sendbuf and recvbuf must not overlap. Pairwise exchange:
 * at step k = 1 .. size-1 each rank sends to rank+k and receives from
 * rank-k, in pieces with several in flight; its own block is copied. No
 * extra memory. Byte-level: no dtype. */
cg_status_t cg_alltoallv(cg_comm_t *comm, const void *sendbuf,
                         const size_t *send_bytes, void *recvbuf,
                         const size_t *recv_bytes);
/* Reduce-scatter: counts[r] elements of dt per rank r (the same array on
 * every rank; 0 allowed); sendbuf holds their sum, rank r's block at the
 * sum of counts[0..r). recvbuf (counts[rank] elements) gets this rank's
 * block of postscale * op over ranks of (prescale * sendbuf), average by
 * cg_reduce_post's rules. recvbuf is either sendbuf plus this rank's
 * block offset (in place: only that block is written) or disjoint from
 * sendbuf, which is then left untouched. A ring over rank-1 -> rank ->
 * rank+1 (the first half of the ring AllReduce), every block cut into
 * pieces (the largest block's eighth within 64..128 KiB, at most the
 * smallest CG_CHUNK_MIN of all ranks: the same cut on every rank whatever
 * its governor's chunk), up to four rounds of pieces in flight so that
 * transfers overlap reductions; block b's elements are reduced in ring
 * order starting at rank b+1 (each rank's prescaled input op the partial
 * it receives), so every run gives the same bits for a given rank count,
 * whatever the pieces, the rounds in flight or the pressure. Ranks that
 * disagree on counts fail (CG_ERR_MISMATCH for a short piece, the
 * transport's truncation for a long one). Memory beyond the caller's
 * (CG_MEM_CAT_RING, kept by the communicator): per round in flight a
 * receive slot of one piece, plus one or two partials where a send is not
 * the input itself (more than two ranks, or a prescale); at most two
 * governor chunks in all, and under pressure fewer rounds, down to one
 * slot and one partial. */
cg_status_t cg_reduce_scatterv(cg_comm_t *comm, const void *sendbuf,
                               void *recvbuf, const size_t *counts,
                               cg_dtype_t dt, cg_redop_t op, double prescale,
                               double postscale);

/* Broadcast's algorithms: a pipelined chain (large) or a binomial tree. */
#define CG_BCAST_ALGO_MAP(X)      \
    X(CG_BCAST_CHAIN, "chain")    \
    X(CG_BCAST_TREE, "tree")
typedef enum { CG_BCAST_ALGO_MAP(CG_ENUM_ITEM) } cg_bcast_algo_t;
CG_ENUM_NAME_FN(cg_bcast_algo_name, cg_bcast_algo_t, CG_BCAST_ALGO_MAP)

/* The algorithm the ranks will use for this many bytes, the same on every
 * rank: AllReduce CG_COLL_ALGO_SHM, _RING or _RD (SHM above 64 KiB until
 * the first such AllReduce measured it, see CG_SHM_CALIBRATE); Broadcast
 * chain or tree. */
cg_coll_algo_t cg_allreduce_algo(const cg_comm_t *comm, size_t bytes);
cg_bcast_algo_t cg_broadcast_algo(const cg_comm_t *comm, size_t bytes);

#endif
