/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The handle table: every comm, listener and registration NCCL holds is an
 * id (tag, kind, slot generation, slot index), never a raw pointer, so a
 * closed comm, a foreign pointer or a garbage mhandle is refused with
 * ncclInvalidArgument instead of being dereferenced. Request ids name
 * their comm's slot and generation plus the request's index and its own
 * generation. Allocation and release under the state lock; the lock-free
 * lookups are inline in np_impl.h. Below the objects it holds: the sweep
 * frees them through the table of frees its caller (np_state.c) passes.
 * Layer: plugin/nccl.
 */
#include <stdint.h>

#include "plugin/nccl/np_impl.h"

static void *cg__np_id(cg__np_kind_t kind, uint32_t gen, uint32_t slot,
                       uint32_t extra)
{
    uint64_t v = CG_NP_ID_TAG << 56 | (uint64_t)kind << 52 |
                 (uint64_t)(gen & CG_NP_GEN_MASK) << 28 |
                 (uint64_t)slot << 12 | (extra & 0xfffu);
    return (void *)(uintptr_t)v;
}

static int cg__np_id_parse(const void *id, cg__np_kind_t *kind_p,
                           uint32_t *gen_p, uint32_t *slot_p,
                           uint32_t *extra_p)
{
    uint64_t v = (uint64_t)(uintptr_t)id;

    if (v >> 56 != CG_NP_ID_TAG || cg__np.slots == NULL)
        return 0;
    *kind_p = (cg__np_kind_t)((v >> 52) & 0xf);
    *gen_p = cg__np_id_gen(v);
    *slot_p = cg__np_id_slot(v);
    *extra_p = (uint32_t)v & 0xfffu;
    return *slot_p != 0;
}

void *cg__np_slot_alloc(cg__np_kind_t kind, void *obj)
{
    cg__np_slot_t *s;
    uint32_t i, gen;

    pthread_mutex_lock(&cg__np.lock);
    i = cg__np.free_head;
    if (cg__np.slots == NULL || i >= CG_NP_SLOTS) {
        pthread_mutex_unlock(&cg__np.lock);
        return NULL;
    }
    s = &cg__np.slots[i];
    cg__np.free_head = s->next_free;
    cg__np.nlive++;
    atomic_store(&s->obj, obj);
    atomic_store(&s->kind, (int)kind);
    gen = atomic_load(&s->gen) + 1; /* odd: live */
    atomic_store_explicit(&s->gen, gen, memory_order_release);
    pthread_mutex_unlock(&cg__np.lock);
    return cg__np_id(kind, gen, i, 0);
}

void cg__np_slot_release(void *id)
{
    cg__np_kind_t kind;
    uint32_t gen, i, extra;

    if (!cg__np_id_parse(id, &kind, &gen, &i, &extra))
        return;
    pthread_mutex_lock(&cg__np.lock);
    cg__np_slot_t *s = &cg__np.slots[i];
    uint32_t cur = atomic_load(&s->gen);
    if ((cur & 1) && (cur & CG_NP_GEN_MASK) == gen) {
        atomic_store_explicit(&s->gen, cur + 1, memory_order_release);
        atomic_store(&s->obj, NULL);
        atomic_store(&s->kind, CG_NP_FREE);
        s->next_free = cg__np.free_head;
        cg__np.free_head = i;
        cg__np.nlive--;
    }
    pthread_mutex_unlock(&cg__np.lock);
}

void cg__np_table_sweep(const cg__np_frees_t *frees)
{
    if (cg__np.slots == NULL)
        return;
    /* Comms first (they may share a listener's lane), then the rest. */
    for (int pass = 0; pass < 2; pass++) {
        for (uint32_t i = 1; i < CG_NP_SLOTS && cg__np.nlive > 0; i++) {
            cg__np_slot_t *s = &cg__np.slots[i];
            uint32_t gen = atomic_load(&s->gen);
            int kind = atomic_load(&s->kind);
            void *obj = atomic_load(&s->obj);
            if (!(gen & 1))
                continue;
            if (pass == 0 && kind != CG_NP_SEND && kind != CG_NP_RECV)
                continue;
            atomic_store(&s->gen, gen + 1);
            atomic_store(&s->obj, NULL);
            atomic_store(&s->kind, CG_NP_FREE);
            cg__np.nlive--;
            if (kind == CG_NP_SEND || kind == CG_NP_RECV)
                frees->comm(obj);
            else if (kind == CG_NP_LISTEN)
                frees->listen(obj);
            else if (kind == CG_NP_MR)
                frees->mr(obj);
        }
    }
}
