/* SPDX-License-Identifier: Apache-2.0 */
/*
 * How long the shim's two hand-offs busy-poll before they sleep (waiters
 * in hvd_queue.c, the background thread after a cycle in hvd_cycle.c):
 * an adaptive budget of at most CG_SPIN_TIME. A spin that sees its event
 * sets the budget back to CG_SPIN_TIME; one that times out halves it, to
 * nothing below a sixteenth; while it is short of CG_SPIN_TIME every 8th
 * spin is a whole one, so the budget comes back once spinning pays again.
 * Spinning loses where the thread it waits for has no CPU (other
 * processes' load: one 4 KiB op took 113 us spinning and 11 us sleeping
 * on a loaded 2-core host) or where the wait is long (a large
 * collective, the next forward pass). Relaxed atomics: several waiting
 * threads share one budget, and a lost update costs one spin at most.
 * Header-only. Layer: core/engine.
 */
#ifndef CG_ENGINE_HVD_SPIN_H
#define CG_ENGINE_HVD_SPIN_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct cg_hvd_spin {
    atomic_uint_least64_t budget; /* ns */
    atomic_uint tries;            /* spins taken while short of the most */
} cg_hvd_spin_t;

static inline void cg_hvd_spin_init(cg_hvd_spin_t *s, uint64_t most)
{
    atomic_init(&s->budget, most);
    atomic_init(&s->tries, 0);
}

/* The spin to take now (0: sleep at once). */
static inline uint64_t cg_hvd_spin_take(cg_hvd_spin_t *s, uint64_t most)
{
    uint64_t b = atomic_load_explicit(&s->budget, memory_order_relaxed);

    if (b < most &&
        (atomic_fetch_add_explicit(&s->tries, 1, memory_order_relaxed) &
         7u) == 7u)
        return most;
    return b;
}

/* A spin taken ended: hit, its event came within it. */
static inline void cg_hvd_spin_result(cg_hvd_spin_t *s, uint64_t most,
                                      bool hit)
{
    uint64_t b = most;

    if (!hit) {
        b = atomic_load_explicit(&s->budget, memory_order_relaxed) / 2;
        if (b < most / 16)
            b = 0;
    }
    atomic_store_explicit(&s->budget, b, memory_order_relaxed);
}

#endif
