/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Agreement for the Horovod shim's collective calls (horovod_init's rank
 * list and process sets, add and remove): every launched rank states its
 * request through the bootstrap, and all of them reach the same verdict,
 * so a disagreement fails the call on every rank instead of hanging one.
 * Also the local check of a rank list. Layer: plugin; calls
 * transport/bootstrap and core/base.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/error.h"
#include "plugin/hvd_impl.h"

/* One rank's request on the wire (host order: one host or MPI's ints). */
typedef struct cg__hvd_hdr {
    int32_t what, arg, n, valid;
} cg__hvd_hdr_t;

static const char *cg__hvd_req_name(int what)
{
    switch (what) {
    case CG_HVD_REQ_INIT:
        return "horovod_init";
    case CG_HVD_REQ_INIT_SET:
        return "horovod_init (process set)";
    case CG_HVD_REQ_ADD:
        return "horovod_add_process_set";
    case CG_HVD_REQ_REMOVE:
        return "horovod_remove_process_set";
    }
    return "?";
}

static int cg__hvd_cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;

    return (x > y) - (x < y);
}

bool cg__hvd_ranks_sorted(const int *ranks, int n, int size, int *sorted_out,
                          char *why, size_t why_len)
{
    if (n < 0) {
        snprintf(why, why_len, "nranks %d is negative", n);
        return false;
    }
    if (n > 0 && ranks == NULL) {
        snprintf(why, why_len, "ranks is NULL but nranks is %d", n);
        return false;
    }
    if (n > size) {
        snprintf(why, why_len, "%d ranks given but the world has only %d",
                 n, size);
        return false;
    }
    for (int i = 0; i < n; i++) {
        if (ranks[i] < 0 || ranks[i] >= size) {
            snprintf(why, why_len, "rank %d (entry %d) is outside 0..%d",
                     ranks[i], i, size - 1);
            return false;
        }
        sorted_out[i] = ranks[i];
    }
    qsort(sorted_out, (size_t)n, sizeof(int), cg__hvd_cmp_int);
    for (int i = 1; i < n; i++) {
        if (sorted_out[i] == sorted_out[i - 1]) {
            snprintf(why, why_len, "rank %d is listed twice", sorted_out[i]);
            return false;
        }
    }
    return true;
}

/* The first rank whose header differs from rank 0's or is invalid, with
 * the reason in why; -1 when all agree. */
static int cg__hvd_first_odd(const cg__hvd_hdr_t *all, int nprocs,
                             char *why, size_t why_len)
{
    const cg__hvd_hdr_t *z = &all[0];

    for (int r = 0; r < nprocs; r++) {
        const cg__hvd_hdr_t *o = &all[r];

        if (!o->valid) {
            snprintf(why, why_len, "job rank %d passed invalid arguments "
                     "to %s (its log says which)", r,
                     cg__hvd_req_name(o->what));
            return r;
        }
        if (o->what != z->what || o->arg != z->arg || o->n != z->n) {
            snprintf(why, why_len, "job rank %d called %s (argument %d, %d "
                     "ranks) while job rank 0 called %s (argument %d, %d "
                     "ranks)", r, cg__hvd_req_name(o->what), o->arg, o->n,
                     cg__hvd_req_name(z->what), z->arg, z->n);
            return r;
        }
    }
    return -1;
}

/* Rank 0's list goes to everyone; each compares it with its own and the
 * verdicts are gathered, so every rank names the same first odd one. */
static cg_status_t cg__hvd_agree_list(cg__hvd_t *h, const cg__hvd_req_t *req,
                                      int nprocs, bool *same_p, char *why,
                                      size_t why_len)
{
    size_t list_len = (size_t)req->n * sizeof(int32_t);
    size_t flags_len = (size_t)nprocs * sizeof(int32_t);
    int32_t *list, *flags, mine = 1;
    cg_status_t st;

    list = cg_mem_alloc(&h->mem, CG_MEM_CAT_CONTROL, list_len);
    if (list == NULL)
        return CG_ERR_NO_MEMORY;
    flags = cg_mem_alloc(&h->mem, CG_MEM_CAT_CONTROL, flags_len);
    if (flags == NULL) {
        st = CG_ERR_NO_MEMORY;
        goto out_list;
    }
    for (int i = 0; i < req->n; i++)
        list[i] = req->list[i];
    st = cg_bootstrap_bcast(h->bs, list, list_len, 0);
    if (st != CG_OK)
        goto out_flags;
    for (int i = 0; i < req->n && mine; i++)
        mine = (list[i] == req->list[i]);
    st = cg_bootstrap_allgather(h->bs, &mine, flags, sizeof(mine));
    if (st != CG_OK)
        goto out_flags;
    *same_p = true;
    for (int r = 0; r < nprocs && *same_p; r++) {
        if (!flags[r]) {
            snprintf(why, why_len, "job rank %d passed ranks to %s that "
                     "differ from job rank 0's", r,
                     cg__hvd_req_name(req->what));
            *same_p = false;
        }
    }
out_flags:
    cg_mem_free(&h->mem, CG_MEM_CAT_CONTROL, flags, flags_len);
out_list:
    cg_mem_free(&h->mem, CG_MEM_CAT_CONTROL, list, list_len);
    return st;
}

cg_status_t cg__hvd_agree(cg__hvd_t *h, const cg__hvd_req_t *req, bool *same_p,
                          char *why, size_t why_len)
{
    cg__hvd_hdr_t mine = {req->what, req->arg, req->n, req->valid ? 1 : 0};
    int nprocs = cg_bootstrap_size(h->bs);
    size_t all_len = (size_t)nprocs * sizeof(mine);
    cg__hvd_hdr_t *all;
    cg_status_t st;
    bool same;

    all = cg_mem_alloc(&h->mem, CG_MEM_CAT_CONTROL, all_len);
    if (all == NULL)
        return CG_ERR_NO_MEMORY;
    st = cg_bootstrap_allgather(h->bs, &mine, all, sizeof(mine));
    if (st != CG_OK)
        goto out;
    same = (cg__hvd_first_odd(all, nprocs, why, why_len) < 0);
    if (same && req->n > 0)
        st = cg__hvd_agree_list(h, req, nprocs, &same, why, why_len);
    if (st == CG_OK)
        *same_p = same;
out:
    cg_mem_free(&h->mem, CG_MEM_CAT_CONTROL, all, all_len);
    return st;
}
