/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A communicator's shared-memory area, for ranks that all run on one host:
 * every rank maps its own segment (a control block and two data slots)
 * and every peer's, so collectives move data with plain loads and stores
 * and synchronise on per-rank sequence words instead of messages. Set up
 * collectively at communicator creation through the bootstrap (same host,
 * boot and PID namespace; each rank creates its segment, all agree, all
 * map, each unlinks its own name, so nothing is left in /dev/shm once
 * set up); any rank's failure leaves every rank without it, logged once.
 * A wait on a peer fails at once when any rank aborted, when the peer's
 * process is gone, or after CG_TIMEOUT without the word moving.
 * Layer: core/coll; calls transport/bootstrap.h and the governor (the own
 * segment is CG_MEM_CAT_RING memory). Threads: as the communicator.
 */
#ifndef CG_CORE_SHM_H
#define CG_CORE_SHM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "collguard/status.h"
#include "core/base/log.h"
#include "core/governor/governor.h"
#include "transport/bootstrap.h"

typedef struct cg_shm cg_shm_t;

typedef struct cg_shm_params {
    cg_bootstrap_t *bs;   /* borrowed; rank and size come from it */
    cg_governor_t *gov;   /* borrowed */
    const cg_log_t *log;  /* may be NULL */
    uint64_t slot;        /* CG_SHM_SLOT of this rank; 0: not wanted */
    bool required;        /* CG_ALGO=shm: failing to set up is an error */
    uint64_t timeout_ns;  /* CG_TIMEOUT for waits */
} cg_shm_params_t;

/* The sequence words every rank publishes (monotonic, starting at 0). */
typedef enum {
    CG_SHM_IN = 0,  /* rounds whose inputs are in the rank's slot */
    CG_SHM_RES = 1, /* rounds whose result is in the rank's slot */
    CG_SHM_FIN = 2, /* rounds the rank finished reading everyone's slots */
    CG_SHM_WORDS = 3
} cg_shm_word_t;

/* Collective over params->bs. *shm_p is NULL where shared memory is not
 * used (not wanted on some rank, ranks on several hosts, or a failure:
 * logged as a warning once, or CG_ERR_CONFIG naming the rank and cause
 * when params->required). */
cg_status_t cg_shm_create(const cg_shm_params_t *params, cg_shm_t **shm_p);
void cg_shm_destroy(cg_shm_t *shm);

/* Bytes of each slot (the same on every rank). */
size_t cg_shm_slot_bytes(const cg_shm_t *shm);
/* Slot b (0 or 1) of rank r's segment. */
uint8_t *cg_shm_slot(const cg_shm_t *shm, int r, int b);
/* Rounds run so far on this communicator (the same on every rank);
 * cg_shm_next_round counts one more. */
uint64_t cg_shm_round(const cg_shm_t *shm);
void cg_shm_next_round(cg_shm_t *shm);

/* What a rank's operation is, published with its first round's inputs
 * (two, by the round's slot) so peers check they run the same one. */
typedef struct cg_shm_desc {
    uint64_t round;  /* its first round */
    uint64_t count;
    uint32_t dtype;
    uint32_t op;
} cg_shm_desc_t;
void cg_shm_desc_set(cg_shm_t *shm, int b, const cg_shm_desc_t *d);
/* Rank r's, for slot b: valid once r's CG_SHM_IN reached d->round + 1. */
void cg_shm_desc_get(const cg_shm_t *shm, int r, int b, cg_shm_desc_t *d);

/* This rank's word w = v (release: what it wrote before is visible to a
 * peer that sees v). */
void cg_shm_post(cg_shm_t *shm, cg_shm_word_t w, uint64_t v);
/* Until peer's word w is at least v (acquire). CG_ERR_PEER_RESET when a
 * rank aborted or the peer's process is gone, CG_ERR_TIMEOUT after
 * CG_TIMEOUT without progress; cg_last_error() names op, the peer and
 * the cause. */
cg_status_t cg_shm_wait(cg_shm_t *shm, int peer, cg_shm_word_t w,
                        uint64_t v, const char *op);
/* Marks this rank aborted: every rank waiting in cg_shm_wait fails. */
void cg_shm_abort(cg_shm_t *shm);

#endif
