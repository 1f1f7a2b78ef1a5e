/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Lanes: one transport instance and the lock over it. A send comm owns
 * one; a listener owns one that the recv comms it accepts share, counted,
 * so closing the listener leaves them working. The lane's cookie is the
 * listener's (fresh per listen) or, for a connector, the one the handle
 * carried: the transport's handshake then checks it on both ends. Also
 * the lane lock's wait (np_impl.h has its fast path).
 * Layer: plugin/nccl; calls transport/ and core/base.
 */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "core/base/error.h"
#include "plugin/nccl/np_impl.h"

/* While the lock looks held: spin (reads only) CG_NP_LOCK_SPINS rounds,
 * then yield the CPU, then, past CG_NP_LOCK_YIELDS rounds (a comm's close
 * flushing its endpoint), nap CG_NP_LOCK_NAP_NS at a time; take it when
 * it looks free. */
#define CG_NP_LOCK_SPINS 128u
#define CG_NP_LOCK_YIELDS 1024u
#define CG_NP_LOCK_NAP_NS 20000

void cg__np_lock_wait(cg__np_lock_t *l)
{
    const struct timespec nap = {0, CG_NP_LOCK_NAP_NS};
    unsigned rounds = 0;

    do {
        while (atomic_load_explicit(&l->held, memory_order_relaxed) != 0) {
            if (rounds < CG_NP_LOCK_YIELDS)
                rounds++;
            if (rounds >= CG_NP_LOCK_YIELDS)
                nanosleep(&nap, NULL);
            else if (rounds >= CG_NP_LOCK_SPINS)
                sched_yield();
        }
    } while (atomic_exchange_explicit(&l->held, 1, memory_order_acquire) != 0);
}

cg_status_t cg__np_lane_create(int dev, cg_transport_kind_t kind,
                              uint64_t cookie, cg__np_lane_t **lane_p)
{
    cg_transport_params_t p = {0};
    char ifname[IF_NAMESIZE + 1];
    cg__np_lane_t *lane;
    cg_status_t st;

    lane = cg_mem_alloc(&cg__np.mem, CG_MEM_CAT_CONTROL, sizeof(*lane));
    if (lane == NULL)
        return cg_error_set(CG_ERR_NO_MEMORY, "no memory for a lane");
    atomic_init(&lane->lock.held, 0);
    atomic_init(&lane->refs, 1);
    /* '=' : this device's interface exactly. */
    snprintf(ifname, sizeof(ifname), "=%s", cg__np.devs[dev].ifname);
    p.kind = kind;
    p.cookie = cookie;
    p.rank = -1;
    p.timeout_ns = cg__np.cfg.timeout_ns;
    p.ifname = ifname;
    p.nsocks = cg__np.cfg.socket_nsocks;
    p.log = &cg__np.log;
    p.mem = cg__np.mem;
    p.ucx_shm_zcopy = cg__np.cfg.ucx_shm_zcopy;
    st = cg_transport_create(&p, &lane->tp);
    if (st != CG_OK) {
        cg_mem_free(&cg__np.mem, CG_MEM_CAT_CONTROL, lane, sizeof(*lane));
        return st;
    }
    *lane_p = lane;
    return CG_OK;
}

void cg__np_lane_ref(cg__np_lane_t *lane)
{
    atomic_fetch_add(&lane->refs, 1);
}

void cg__np_lane_unref(cg__np_lane_t *lane)
{
    if (lane == NULL || atomic_fetch_sub(&lane->refs, 1) != 1)
        return;
    cg_transport_destroy(lane->tp);
    cg_mem_free(&cg__np.mem, CG_MEM_CAT_CONTROL, lane, sizeof(*lane));
}
