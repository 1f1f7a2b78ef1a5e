/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for what the engine's negotiation reads from other
 * ranks (core/engine/hvd_wire.c): a full round's header (size x
 * CG_HVD_NHDR int64: records, stop, fusion offer, cache capacity, staging
 * chunk offer) and the records after it, as cg__records walks them, each
 * checked before the table would use it. What the checks accept must be
 * safe to read the way the table does: a terminated name, dimensions in
 * range, a root inside the job, offers negotiation takes the least of.
 * Input: byte 0 picks the job size (1-4); then the header; then the
 * records (each sizeof(cg_hvd_wire_t) bytes).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/engine/hvd_core.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Reads an accepted record the way the table and its messages do. */
static void cg__fz_use(const cg_hvd_wire_t *w, int size)
{
    size_t len = strlen(w->name), count = 1;
    uint64_t h = 1469598103934665603ull;

    if (len == 0 || len >= CG_HVD_NAME_MAX || w->root < 0 || w->root >= size
        || w->ndim < 0 || w->ndim > CG_HVD_NDIM_MAX ||
        cg_dtype_size((cg_dtype_t)w->dtype) == 0 ||
        strcmp(cg_redop_name((cg_redop_t)w->op), "unknown") == 0)
        abort();
    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)w->name[i]) * 1099511628211ull;
    for (int d = 0; d < w->ndim; d++) {
        if (w->shape[d] < 0)
            abort();
        count *= (size_t)w->shape[d];
    }
    (void)h;
    (void)count;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const size_t ws = sizeof(cg_hvd_wire_t);
    int64_t hdr[CG_HVD_NHDR * 4] = {0};
    int nranks;
    size_t hlen, at;
    cg_hvd_wire_t w;

    if (size < 1)
        return 0;
    nranks = 1 + data[0] % 4;
    hlen = (size_t)nranks * CG_HVD_NHDR * sizeof(int64_t);
    memcpy(hdr, data + 1, size - 1 < hlen ? size - 1 : hlen);
    if (cg_hvd_nhdr_check(hdr, nranks) != CG_OK)
        return 0;
    at = 1 + hlen;
    for (int r = 0; r < nranks; r++) {
        const int64_t *h = hdr + CG_HVD_NHDR * r;
        /* What negotiation then reads without a check of its own. */
        if (h[0] < 0 || h[0] > CG_HVD_RECORDS_MAX || h[2] < 0 || h[4] < 0)
            abort(); /* the header check let one through */
        for (int64_t i = 0; i < h[0] && at < size; i++, at += ws) {
            /* Bytes past the input are zero, as the allreduce leaves a
             * slot no rank wrote. */
            memset(&w, 0, ws);
            memcpy(&w, data + at, size - at < ws ? size - at : ws);
            if (cg_hvd_wire_check(&w, nranks, r) == CG_OK)
                cg__fz_use(&w, nranks);
        }
    }
    return 0;
}
