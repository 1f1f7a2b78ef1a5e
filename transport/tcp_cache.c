/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Reuse caches of the TCP transport: request objects, and the STAGING
 * buffers that unexpected messages are read into. Without them every
 * message cost an allocation through params.mem, and every unexpected one
 * a fresh buffer: glibc hands free blocks of 128 KiB and up back to the
 * kernel (heap trim, or munmap above the mmap threshold), so each staged
 * byte paid a page fault and the kernel's page clearing on top of the
 * copy. Staging buffers of up to CG_TCP_STAGE_BIG come in power-of-two
 * classes from CG_TCP_STAGE_MIN; free ones stay allocated (and accounted
 * as STAGING) up to CG_TCP_STAGE_CACHE bytes per transport, and up to
 * CG_TCP_REQ_CACHE request objects; destroy frees them.
 * Layer: transport; internal to the tcp_*.c files.
 */
#include "transport/tcp_impl.h"

/* Class of a staging buffer of len bytes (1..CG_TCP_STAGE_BIG), and the
 * bytes such a buffer has. */
static int cg__tcp_stage_class(size_t len, size_t *cap_p)
{
    size_t cap = CG_TCP_STAGE_MIN;
    int c = 0;

    while (cap < len) {
        cap <<= 1;
        c++;
    }
    *cap_p = cap;
    return c;
}

void *cg__tcp_stage_get(cg__tcp_tp_t *tp, size_t len)
{
    size_t cap;
    int c;
    void *buf;

    if (len > CG_TCP_STAGE_BIG)
        return cg__tcp_alloc(tp, CG_MEM_CAT_STAGING, len);
    c = cg__tcp_stage_class(len, &cap);
    buf = tp->stage_free[c];
    if (buf != NULL) {
        tp->stage_free[c] = *(void **)buf;
        tp->stage_cached -= cap;
        return buf;
    }
    return cg__tcp_alloc(tp, CG_MEM_CAT_STAGING, cap);
}

void cg__tcp_stage_put(cg__tcp_tp_t *tp, void *buf, size_t len)
{
    size_t cap;
    int c;

    if (buf == NULL)
        return;
    if (len > CG_TCP_STAGE_BIG) {
        cg__tcp_free(tp, CG_MEM_CAT_STAGING, buf, len);
        return;
    }
    c = cg__tcp_stage_class(len, &cap);
    if (tp->stage_cached + cap > CG_TCP_STAGE_CACHE) {
        cg__tcp_free(tp, CG_MEM_CAT_STAGING, buf, cap);
        return;
    }
    *(void **)buf = tp->stage_free[c];
    tp->stage_free[c] = buf;
    tp->stage_cached += cap;
}

void *cg__tcp_req_get(cg__tcp_tp_t *tp, size_t size)
{
    if (size == tp->req_size && !cg_list_empty(&tp->req_cache)) {
        cg_list_t *l = tp->req_cache.next;
        cg_list_del(l);
        tp->nreq_cached--;
        return cg_list_entry(l, cg__tcp_req_t, link);
    }
    return cg__tcp_alloc(tp, CG_MEM_CAT_CONTROL, size);
}

void cg__tcp_req_put(cg__tcp_tp_t *tp, cg__tcp_req_t *req)
{
    if (req->alloc_size == tp->req_size &&
        tp->nreq_cached < CG_TCP_REQ_CACHE) {
        cg_list_push(&tp->req_cache, &req->link);
        tp->nreq_cached++;
        return;
    }
    cg__tcp_free(tp, CG_MEM_CAT_CONTROL, req, req->alloc_size);
}

void cg__tcp_cache_drain(cg__tcp_tp_t *tp)
{
    for (int c = 0; c < CG_TCP_STAGE_CLASSES; c++) {
        size_t cap = (size_t)CG_TCP_STAGE_MIN << c;
        while (tp->stage_free[c] != NULL) {
            void *buf = tp->stage_free[c];
            tp->stage_free[c] = *(void **)buf;
            cg__tcp_free(tp, CG_MEM_CAT_STAGING, buf, cap);
        }
    }
    tp->stage_cached = 0;
    while (!cg_list_empty(&tp->req_cache)) {
        cg_list_t *l = tp->req_cache.next;
        cg_list_del(l);
        cg__tcp_free(tp, CG_MEM_CAT_CONTROL,
                     cg_list_entry(l, cg__tcp_req_t, link), tp->req_size);
    }
    tp->nreq_cached = 0;
}
