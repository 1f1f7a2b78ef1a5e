/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One step of gpu_check (integration/gpu/gpu_check.c): the tensors' shapes
 * on this rank, the arenas and the copies in and out of them (cudaMemcpy,
 * or memcpy in host mode), filling and poisoning the inputs, enqueueing
 * every tensor of the step through the shim, waiting for all, and checking
 * every element of every output against the host reference
 * (gpu_check_values.c).
 */
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "integration/gpu/gpu_check_impl.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- shapes ----------------------------------------------------------- */

static int64_t dim0_of(const spec_t *s, int rank)
{
    return s->dim0 + (int64_t)rank * s->step;
}

static size_t in_elems(const spec_t *s, int rank)
{
    return (size_t)(dim0_of(s, rank) * s->row);
}

/* Whether the tensor's output is a region of its own in dev_out. */
static int has_out(const spec_t *s)
{
    return s->type == CG_HVD_REDUCESCATTER ||
           (s->oop && s->type != CG_HVD_ALLGATHER);
}

/* This rank's output elements and, for reducescatter, its first. */
static size_t out_elems(const gc_t *g, const spec_t *s, size_t *first_p)
{
    int64_t start = 0, rows = 0;

    *first_p = 0;
    if (s->type == CG_HVD_ALLGATHER)
        return 0;
    if (s->type != CG_HVD_REDUCESCATTER)
        return in_elems(s, g->rank);
    cg_hvd_reducescatter_rows(s->dim0, g->size, g->rank, &start, &rows);
    *first_p = (size_t)(start * s->row);
    return (size_t)(rows * s->row);
}

/* ---- moving bytes ----------------------------------------------------- */

/* The arena copies: cudaMemcpy (waited for: the engine's stream does not
 * order behind the default stream) or, in host mode, memcpy. */
static void to_dev(const gc_t *g, void *dst, const void *src, size_t n)
{
    if (n == 0)
        return;
    if (g->device < 0) {
        memcpy(dst, src, n);
        return;
    }
    gc_cuda_or_die(cudaMemcpy(dst, src, n, cudaMemcpyHostToDevice),
                   "cudaMemcpy H2D");
    gc_cuda_or_die(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
}

static void from_dev(const gc_t *g, void *dst, const void *src, size_t n)
{
    if (n == 0)
        return;
    if (g->device < 0) {
        memcpy(dst, src, n);
        return;
    }
    gc_cuda_or_die(cudaMemcpy(dst, src, n, cudaMemcpyDeviceToHost),
                   "cudaMemcpy D2H");
}

void *gc_arena(const gc_t *g)
{
    void *p = NULL;

    if (g->device >= 0)
        gc_cuda_or_die(cudaMalloc(&p, ARENA), "cudaMalloc (arena)");
    else if ((p = malloc(ARENA)) == NULL)
        gc_fatal("out of host memory");
    return p;
}

/* ---- one step ---------------------------------------------------------- */

/* The checks of one done tensor (in: its input region as it came back,
 * out: its output region). */
static void check_tensor(gc_t *g, const spec_t *s, const char *name,
                         cg_hvd_req_h req, size_t ioff, size_t ooff,
                         outcome_t *o)
{
    size_t el = cg_dtype_size(s->dt), ni = in_elems(s, g->rank), first;
    size_t no = out_elems(g, s, &first);
    const char *in = g->c_in + ioff;
    const char *out = has_out(s) ? g->c_out + ooff : in;
    const void *data = NULL;
    int64_t dim0 = 0, want_dim0 = 0;
    uint32_t base[MAX_RANKS];
    size_t k = 0;

    for (int r = 0; r < g->size; r++)
        base[r] = rank_base(s, r);

    if (s->type == CG_HVD_ALLGATHER) {
        for (int r = 0; r < g->size; r++)
            want_dim0 += dim0_of(s, r);
        if (cg_hvd_allgather_result(req, &data, &dim0) != CG_OK) {
            gc_note(o, V_WRONG, "%s: no allgather result: %s", name,
                    cg_last_error());
            return;
        }
        if (dim0 != want_dim0 || (data == NULL && want_dim0 > 0)) {
            gc_note(o, V_WRONG, "%s: gathered %lld rows at %p, want %lld",
                    name, (long long)dim0, data, (long long)want_dim0);
            return;
        }
        if (g->device >= 0) { /* hvd.h, docs/horovod.md: a host result */
            struct cudaPointerAttributes a;
            if (cudaPointerGetAttributes(&a, data) == cudaSuccess &&
                a.type == cudaMemoryTypeDevice) {
                gc_note(o, V_WRONG, "%s: the allgather result is device "
                        "memory, documented as host memory", name);
                return;
            }
            (void)cudaGetLastError();
        }
        for (int r = 0; r < g->size; r++)
            for (size_t i = 0; i < in_elems(s, r); i++, k++) {
                double want = in_val(s, base[r], i);
                double got = get_val(s->dt, data, k);
                if (got != want)
                    gc_mismatch(g, o, name, s, k, got, want);
            }
        o->hash = gc_hash_bytes(o->hash, data, k * el);
    } else {
        for (size_t i = 0; i < no; i++) {
            double want = s->type == CG_HVD_BROADCAST
                              ? in_val(s, base[s->root], i)
                              : gc_ref_reduce(s, base, g->size, first + i);
            double got = get_val(s->dt, out, i);
            if (!gc_representable(s->dt, want)) {
                gc_note(o, V_WRONG, "test bug: reference %g of %s not exact "
                        "in %s", want, name, cg_dtype_name(s->dt));
                return;
            }
            if (got != want)
                gc_mismatch(g, o, name, s, i, got, want);
        }
        if (has_out(s) && !gc_poisoned(s->dt, out + no * el, GUARD / el))
            gc_note(o, V_WRONG, "%s: written past its output's end", name);
        o->hash = gc_hash_bytes(o->hash, out, no * el);
    }
    /* Nothing writes past an input; an input that is not the output
     * stays as it was (reducescatter: not promised). */
    if (!gc_poisoned(s->dt, in + ni * el, GUARD / el))
        gc_note(o, V_WRONG, "%s: written past its input's end", name);
    else if (s->type != CG_HVD_REDUCESCATTER && (has_out(s) ||
             s->type == CG_HVD_ALLGATHER) &&
             memcmp(in, g->h_in + ioff, ni * el) != 0)
        gc_note(o, V_WRONG, "%s: its input changed", name);
}

static size_t align_up(size_t n)
{
    return (n + ALIGN - 1) / ALIGN * ALIGN;
}

/* Fills, poisons, enqueues the n tensors of sp (names c<tag>.<index>:
 * the same every step, so later steps are negotiated by the cache),
 * waits for all and checks every element. *sec_p: first enqueue to last
 * completion. */
void gc_run_step(gc_t *g, int tag, const spec_t *sp, int n,
                 outcome_t *o, double *sec_p)
{
    size_t ioff[MAXT], ooff[MAXT], iat = 0, oat = 0;
    cg_hvd_req_h req[MAXT];
    cg_status_t st[MAXT];
    char name[MAXT][24];
    double t0;

    memset(o, 0, sizeof(*o));
    if (n > MAXT)
        gc_fatal("test bug: %d tensors in a step, at most %d", n, MAXT);
    for (int t = 0; t < n; t++) {
        const spec_t *s = &sp[t];
        size_t el = cg_dtype_size(s->dt), ni = in_elems(s, g->rank), first;
        size_t no = out_elems(g, s, &first);

        ioff[t] = iat;
        iat = align_up(iat + ni * el + GUARD);
        ooff[t] = oat;
        if (has_out(s))
            oat = align_up(oat + no * el + GUARD);
        if (iat > ARENA || oat > ARENA)
            gc_fatal("test bug: step c%d needs more than %zu bytes", tag,
                     ARENA);
        uint32_t base = rank_base(s, g->rank);

        for (size_t i = 0; i < ni; i++)
            put_val(s->dt, g->h_in + ioff[t], i, in_val(s, base, i));
        gc_poison(s->dt, g->h_in + ioff[t] + ni * el, GUARD / el);
        if (has_out(s))
            gc_poison(s->dt, g->h_out + ooff[t], no + GUARD / el);
        o->elems += ni;
        snprintf(name[t], sizeof(name[t]), "c%d.%d", tag, t);
    }
    to_dev(g, g->dev_in, g->h_in, iat);
    to_dev(g, g->dev_out, g->h_out, oat);

    t0 = now_s();
    for (int t = 0; t < n; t++) {
        const spec_t *s = &sp[t];
        size_t first, no = out_elems(g, s, &first);
        char *in = g->dev_in + ioff[t];
        cg_hvd_tensor_t ten = {
            .field_mask = g->device >= 0 ? CG_HVD_TENSOR_FIELD_DEVICE : 0,
            .name = name[t], .dtype = s->dt, .ndim = s->row == 1 ? 1 : 2,
            .shape = {dim0_of(s, g->rank), s->row}, .input = in,
            .output = has_out(s) ? g->dev_out + ooff[t] : in,
            .flags = CG_HVD_IS_LEAF, .device = g->device};

        if (s->type == CG_HVD_REDUCESCATTER && no == 0)
            ten.output = NULL; /* allowed for an empty slice */
        switch (s->type) {
        case CG_HVD_ALLREDUCE:
            st[t] = cg_hvd_enqueue_allreduce(g->core, &ten, s->op, s->pre,
                                             s->post, &req[t]);
            break;
        case CG_HVD_BROADCAST:
            st[t] = cg_hvd_enqueue_broadcast(g->core, &ten, s->root, &req[t]);
            break;
        case CG_HVD_ALLGATHER:
            st[t] = cg_hvd_enqueue_allgather(g->core, &ten, &req[t]);
            break;
        default:
            st[t] = cg_hvd_enqueue_reducescatter(g->core, &ten, s->op,
                                                 s->pre, s->post, &req[t]);
            break;
        }
        if (st[t] != CG_OK) {
            gc_note(o, st[t] == CG_ERR_UNSUPPORTED ? V_REFUSED : V_WRONG,
                    "enqueue %s: %s (%s)", name[t], cg_last_error(),
                    cg_status_name(st[t]));
            req[t] = NULL;
        }
    }
    for (int t = 0; t < n; t++)
        if (req[t] != NULL)
            st[t] = cg_hvd_wait(req[t]);
    *sec_p = now_s() - t0;

    from_dev(g, g->c_in, g->dev_in, iat);
    from_dev(g, g->c_out, g->dev_out, oat);
    if (tag == g->corrupt && sp[0].type != CG_HVD_ALLGATHER) {
        size_t first, no = out_elems(g, &sp[0], &first);
        char *out = has_out(&sp[0]) ? g->c_out + ooff[0] : g->c_in + ioff[0];
        if (no > 0)
            out[0] ^= 1; /* the lowest bit of element 0 (little endian) */
    }
    for (int t = 0; t < n; t++) {
        if (req[t] == NULL)
            continue;
        if (st[t] != CG_OK) {
            const char *e = cg_hvd_error(req[t]);
            gc_note(o,
                    st[t] == CG_ERR_UNSUPPORTED && e[0] ? V_REFUSED : V_WRONG,
                    "%s: %s (%s)", name[t], e, cg_status_name(st[t]));
        } else {
            check_tensor(g, &sp[t], name[t], req[t], ioff[t], ooff[t], o);
        }
        cg_hvd_release(req[t]);
    }
}
