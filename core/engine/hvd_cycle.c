/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Life of the Horovod shim's core: create (transport and communicator
 * over the context's bootstrap, or a process set's own, then the
 * background thread), the thread's cycle (take the inbox, negotiate,
 * execute, tick the governor, publish stats, sleep out CG_CYCLE_TIME) and
 * destroy (a stop every rank agrees on, pending requests failed,
 * everything freed; a removed set's core is retired first and freed with
 * the global core). Layer: core/engine; calls
 * transport/transport.h, core/coll/comm.h and the governor.
 */
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/base/clock.h"
#include "core/base/error.h"
#include "core/engine/hvd_core.h"
#include "core/backend/hvd_gpu.h"
#include "core/engine/hvd_metrics.h"
#include "core/engine/hvd_timeline.h"

/* Under the lock: whether the next cycle should start without waiting
 * out CG_CYCLE_TIME. A thread blocked in cg_hvd_wait adds nothing more to
 * this cycle's fusion window (a framework waits once its backward pass has
 * enqueued everything), so waiting would only add latency; unless the last
 * cycle made no progress and nothing new came: then the wait is for a name
 * other ranks have not enqueued yet, and cycling faster would only spin. */
static bool cg__hurry(const cg_hvd_core_t *core)
{
    return core->waiters > 0 &&
           (core->progressed || !cg_list_empty(&core->inbox));
}

/* Under the lock: sleeps until t_end, a stop or a reason to hurry. After
 * a cycle that ran something (spin), first busy-polls the kick counter
 * with the lock let go, for the budget hvd_spin.h keeps (CG_SPIN_TIME at
 * most): a caller that waits on its next request within that time starts
 * the cycle without a futex wake-up (5-50us on each hand-off, the shim's
 * cost per fused op). */
static void cg__sleep_until(cg_hvd_core_t *core, uint64_t t_end, bool spin)
{
    struct timespec ts = {(time_t)(t_end / 1000000000ull),
                          (long)(t_end % 1000000000ull)};
    uint64_t budget = 0;

    if (spin && core->spin_ns > 0 && !core->stop && !cg__hurry(core))
        budget = cg_hvd_spin_take(&core->cycle_spin, core->spin_ns);
    if (budget > 0) {
        unsigned k = atomic_load_explicit(&core->kick, memory_order_relaxed);
        uint64_t t_spin = cg_now_ns() + budget;
        bool hit;

        if (t_spin > t_end)
            t_spin = t_end;
        pthread_mutex_unlock(&core->lock);
        while (!(hit = atomic_load_explicit(&core->kick,
                                            memory_order_relaxed) != k) &&
               cg_now_ns() < t_spin)
            cg_cpu_relax();
        cg_hvd_spin_result(&core->cycle_spin, core->spin_ns, hit);
        pthread_mutex_lock(&core->lock);
    }
    while (!core->stop && !cg__hurry(core) && cg_now_ns() < t_end)
        pthread_cond_timedwait(&core->wake_cond, &core->lock, &ts);
}

/* The thread ends: enqueue fails from now on, pending requests too. */
static void cg__die(cg_hvd_core_t *core, cg_status_t st, const char *msg)
{
    pthread_mutex_lock(&core->lock);
    core->dead = true;
    core->dead_status = st;
    snprintf(core->dead_msg, sizeof(core->dead_msg), "%s", msg);
    cg_hvd_stats_publish(core);
    pthread_mutex_unlock(&core->lock);
    cg_hvd_fail_all(core, st, msg);
}

void *cg_hvd_cycle_main(void *arg)
{
    cg_hvd_core_t *core = arg;
    char msg[256];

    for (;;) {
        uint64_t t0 = cg_now_ns(), t1, t2;
        cg_list_t *before = core->owned.prev;
        size_t n_new = 0;
        cg_hvd_offer_t offer;
        int stop_rank;
        bool stop, progressed;
        cg_status_t st;

        pthread_mutex_lock(&core->lock);
        /* In one move: a thousand requests walked one by one cost tens of
         * microseconds of cache misses on the critical path. */
        n_new = core->inbox_len;
        core->inbox_len = 0;
        cg_list_splice_tail(&core->owned, &core->inbox);
        stop = core->stop;
        pthread_mutex_unlock(&core->lock);

        cg_hvd_tl_cycle_start(core);
        t1 = cg_now_ns();
        /* After the inbox is taken (its CUDA requests' device is set, so
         * their staging slots are sized now) and before negotiation; the
         * last cycle's collectives all ended in its execute. */
        cg_hvd_fusion_prepare(core, &offer);
        st = cg_hvd_negotiate(core, before->next, n_new, stop, &offer,
                              &stop_rank);
        t2 = cg_now_ns();
        core->tstats.negotiate_ns += t2 - t1;
        if (st == CG_OK && stop_rank >= 0) {
            if (core->parent != NULL)
                snprintf(msg, sizeof(msg), "process set %d was removed (or "
                         "the core shut down: rank %d stopped it) with this "
                         "request pending", (int)core->set_id,
                         core->set_ranks[stop_rank]);
            else
                snprintf(msg, sizeof(msg), "the collective core was shut "
                         "down (rank %d called cg_hvd_core_destroy) with "
                         "this request pending", stop_rank);
            cg__die(core, CG_ERR_CANCELED, msg);
            break;
        }
        progressed = n_new > 0 || core->ready_len > 0;
        if (st == CG_OK)
            st = cg_hvd_execute(core);
        core->tstats.execute_ns += cg_now_ns() - t2;
        if (st != CG_OK) {
            snprintf(msg, sizeof(msg), "collective failed, the job cannot "
                     "continue: %s", cg_last_error());
            cg_error(core->log, "%s", msg);
            cg__die(core, st, msg);
            break;
        }
        if (core->parent == NULL) /* sampling: one thread, the global's */
            (void)cg_governor_tick(core->gov);
        cg_hvd_metrics_tick(core);
        cg_hvd_tl_cycle_end(core);
        pthread_mutex_lock(&core->lock);
        cg_hvd_stats_publish(core);
        core->progressed = progressed;
        /* After a cycle that ran something, a whole window from now (not
         * from its start): a cycle that overran would otherwise start at
         * once and cut the next batch in two while it is being enqueued. */
        cg__sleep_until(core, (progressed ? cg_now_ns() : t0) +
                                  core->cycle_ns, progressed);
        pthread_mutex_unlock(&core->lock);
    }
    return NULL;
}

/* CG_SPIN_TIME, unless the CPUs this rank may run on are too few for
 * both its caller's and its background thread to run at once (a spinner
 * would then take the CPU from the thread it waits for): two at least of
 * its own when it is bound, two per rank on this host when it may run
 * anywhere. why: the reason when off. */
static uint64_t cg__spin_ns(cg_ctx_h ctx, char *why, size_t len)
{
    const cg_bootstrap_env_t *env = cg_bootstrap_env(ctx->bs);
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    int local = env->local_size > 0 ? env->local_size : 1, cpus = 0;
    cpu_set_t set;

    why[0] = '\0';
    if (ctx->cfg.spin_time_ns == 0)
        return 0;
    if (sched_getaffinity(0, sizeof(set), &set) == 0)
        cpus = CPU_COUNT(&set);
    if (cpus <= 0 || online <= 0)
        return ctx->cfg.spin_time_ns;
    if (cpus < online && cpus < 2)
        snprintf(why, len, "bound to %d CPU", cpus);
    else if (cpus >= online && cpus < 2 * local)
        snprintf(why, len, "%d ranks on %d CPUs", local, cpus);
    return why[0] != '\0' ? 0 : ctx->cfg.spin_time_ns;
}

static cg_status_t cg__sync_init(cg_hvd_core_t *core)
{
    pthread_condattr_t ca;

    if (pthread_condattr_init(&ca) != 0)
        return cg_error_set(CG_ERR_NO_MEMORY, "pthread_condattr_init: %m");
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_mutex_init(&core->lock, NULL);
    pthread_cond_init(&core->done_cond, NULL);
    pthread_cond_init(&core->wake_cond, &ca);
    pthread_condattr_destroy(&ca);
    return CG_OK;
}

static void cg__free_buffers(cg_hvd_core_t *core)
{
    cg_hvd_negotiate_free(core);
    cg_hvd_fusion_release(core);
    cg_governor_free(core->gov, CG_MEM_CAT_CONTROL, core->xbuf,
                     core->xbuf_len);
    cg_governor_free(core->gov, CG_MEM_CAT_CONTROL, core->ready,
                     core->ready_cap * sizeof(*core->ready));
    cg_hvd_stage_release(core);
    while (!cg_list_empty(&core->warned)) {
        cg_list_t *l = core->warned.next;
        cg_list_del(l);
        cg_governor_free(core->gov, CG_MEM_CAT_CONTROL,
                         cg_list_entry(l, cg_hvd_name_t, link),
                         sizeof(cg_hvd_name_t));
    }
}

static cg_status_t cg__connect(cg_hvd_core_t *core)
{
    const cg_config_t *cfg = &core->ctx->cfg;
    cg_bootstrap_t *bs = core->bs;
    cg_transport_params_t tp = {cfg->transport, cg_bootstrap_cookie(bs),
                                core->rank, cfg->timeout_ns,
                                cfg->socket_ifname, cfg->socket_nsocks,
                                core->log, cg_governor_mem_ops(core->gov),
                                cfg->ucx_shm_zcopy};
    cg_comm_params_t cp = {bs, NULL, core->gov, cfg, core->log};
    cg_status_t st;

    st = cg_transport_create(&tp, &core->tp);
    if (st != CG_OK)
        return st;
    cp.tp = core->tp;
    st = cg_comm_create(&cp, &core->comm);
    if (st != CG_OK) {
        cg_transport_destroy(core->tp);
        core->tp = NULL;
    }
    return st;
}

/* The core's pair of backends: one for host tensors (CG_CPU_OPERATIONS)
 * and one for CUDA tensors (CG_GPU_OPERATIONS), shared when both name the
 * same kind; AUTO with NCCL built in chooses later (hvd_gpu_auto.c). */
static cg_status_t cg__backends_create(cg_hvd_core_t *core)
{
    const cg_config_t *cfg = &core->ctx->cfg;
    cg_backend_kind_t cpu = (cg_backend_kind_t)cfg->cpu_operations;
    cg_backend_kind_t want = (cg_backend_kind_t)cfg->gpu_operations;
    cg_backend_kind_t gpu = cg_backend_resolve(want);
    cg_backend_params_t p;
    cg_backend_t *be_cpu, *be_gpu = NULL;
    cg_status_t st;

    cg_hvd_backend_params(core, CG_BACKEND_MEM_HOST,
                          "HOROVOD_CPU_OPERATIONS", &p);
    st = cg_backend_create(cpu, &p, &be_cpu);
    if (st != CG_OK)
        return st;
    core->gpu_auto = cg_backend_auto_pending(want);
    if (core->gpu_auto) {
        core->tstats.gpu_backend = CG_BACKEND_AUTO;
    } else if (gpu == cpu) {
        be_gpu = be_cpu;
    } else {
        p.mem = CG_BACKEND_MEM_CUDA;
        p.var = "HOROVOD_GPU_OPERATIONS";
        st = cg_backend_create(gpu, &p, &be_gpu);
        if (st != CG_OK)
            goto err_cpu;
    }
    if (be_gpu != NULL)
        core->tstats.gpu_backend = be_gpu->ops->kind;
    cg_info(core->log, "host tensors: %s backend, CUDA tensors: %s backend",
            cg_backend_kind_name(be_cpu->ops->kind),
            be_gpu != NULL ? cg_backend_kind_name(be_gpu->ops->kind)
                           : "AUTO (chosen at the first CUDA collective)");
    core->be_cpu = be_cpu;
    core->be_gpu = be_gpu;
    return CG_OK;

err_cpu:
    cg_backend_destroy(be_cpu);
    return st;
}

static void cg__backends_destroy(cg_hvd_core_t *core)
{
    if (core->be_gpu != core->be_cpu)
        cg_backend_destroy(core->be_gpu);
    cg_backend_destroy(core->be_cpu);
    core->be_cpu = NULL;
    core->be_gpu = NULL;
}

/* What a core allocates beside itself: the reducescatter blocks, the
 * joined bitmap and a set's member list. */
static size_t cg__joined_bytes(const cg_hvd_core_t *core)
{
    return (size_t)(core->size + 63) / 64 * sizeof(uint64_t);
}

static cg_status_t cg__arrays(cg_hvd_core_t *core, const int *ranks)
{
    cg_status_t st = cg_governor_alloc(core->gov, CG_MEM_CAT_CONTROL,
                                       (size_t)core->size * sizeof(size_t),
                                       (void **)&core->rs_counts);

    if (st == CG_OK)
        st = cg_governor_alloc(core->gov, CG_MEM_CAT_CONTROL,
                               cg__joined_bytes(core),
                               (void **)&core->joined);
    if (st == CG_OK) {
        memset(core->joined, 0, cg__joined_bytes(core));
        core->last_joined = -1;
    }
    if (st == CG_OK && ranks != NULL) {
        st = cg_governor_alloc(core->gov, CG_MEM_CAT_CONTROL,
                               (size_t)core->size * sizeof(int),
                               (void **)&core->set_ranks);
        if (st == CG_OK)
            memcpy(core->set_ranks, ranks, (size_t)core->size * sizeof(int));
    }
    return st;
}

static void cg__arrays_free(cg_hvd_core_t *core)
{
    cg_governor_free(core->gov, CG_MEM_CAT_CONTROL, core->rs_counts,
                     (size_t)core->size * sizeof(size_t));
    cg_governor_free(core->gov, CG_MEM_CAT_CONTROL, core->joined,
                     cg__joined_bytes(core));
    if (core->set_ranks != NULL)
        cg_governor_free(core->gov, CG_MEM_CAT_CONTROL, core->set_ranks,
                         (size_t)core->size * sizeof(int));
}

/* The fields before anything is allocated or started. */
static void cg__fields(cg_hvd_core_t *core, cg_ctx_h ctx, cg_bootstrap_t *bs,
                       cg_hvd_core_t *parent, int32_t id)
{
    memset(core, 0, sizeof(*core));
    core->ctx = ctx;
    core->gov = ctx->gov;
    core->log = &ctx->log;
    core->bs = bs;
    core->parent = parent;
    core->set_id = id;
    core->rank = cg_bootstrap_rank(bs);
    core->size = cg_bootstrap_size(bs);
    core->cycle_ns = ctx->cfg.cycle_time_ns;
    core->spin_ns = cg__spin_ns(ctx, core->spin_why, sizeof(core->spin_why));
    core->stats.spin_ns = core->spin_ns;
    cg_hvd_spin_init(&core->wait_spin, core->spin_ns);
    cg_hvd_spin_init(&core->cycle_spin, core->spin_ns);
    core->dup_policy = (cg_dup_policy_t)ctx->cfg.duplicate_policy;
    cg_list_init(&core->inbox);
    cg_hvd_queue_init(core);
    for (int b = 0; b < CG_HVD_BUCKETS; b++) {
        cg_list_init(&core->registry[b]);
        cg_list_init(&core->tab_buckets[b]);
    }
    cg_list_init(&core->warned);
    cg_list_init(&core->owned);
    cg_list_init(&core->table);
}

cg_status_t cg_hvd_core_make(cg_ctx_h ctx, cg_bootstrap_t *bs,
                             cg_hvd_core_t *parent, int32_t id,
                             const int *ranks, cg_hvd_core_t **core_p)
{
    cg_hvd_core_t *core;
    cg_status_t st;

    st = cg_governor_alloc(ctx->gov, CG_MEM_CAT_CONTROL, sizeof(*core),
                           (void **)&core);
    if (st != CG_OK)
        return st;
    cg__fields(core, ctx, bs, parent, id);
    st = cg_hvd_gpu_create(core->gov, core->log, core->rank, &core->ctx->cfg,
                           &core->gpu);
    if (st == CG_OK)
        st = cg__arrays(core, parent != NULL ? ranks : NULL);
    if (st != CG_OK)
        goto err_free;
    st = cg__sync_init(core);
    if (st != CG_OK)
        goto err_free;
    if (parent == NULL) /* a set writes no metrics of its own */
        st = cg_hvd_metrics_start(core);
    if (st != CG_OK)
        goto err_sync;
    st = cg__connect(core);
    if (st != CG_OK)
        goto err_metrics;
    st = cg__backends_create(core);
    if (st != CG_OK)
        goto err_comm;
    if (parent == NULL) /* nor a timeline */
        cg_hvd_timeline_init(core);
    if (pthread_create(&core->thread, NULL, cg_hvd_cycle_main, core) != 0) {
        st = cg_error_set(CG_ERR_NO_MEMORY, "cg_hvd_core_create: "
                          "pthread_create: %m");
        goto err_backends;
    }
    if (parent == NULL)
        cg_info(core->log, "hvd core ready: %d ranks, cycle %.3f ms, "
                "spin %.0f us%s%s%s, transport %s", core->size,
                core->cycle_ns / 1e6, core->spin_ns / 1e3,
                core->spin_why[0] ? " (CG_SPIN_TIME off: " : "",
                core->spin_why, core->spin_why[0] ? ")" : "",
                cg_transport_name(core->tp));
    else
        cg_debug(core->log, "process set %d: rank %d of %d, transport %s",
                 (int)id, core->rank, core->size,
                 cg_transport_name(core->tp));
    *core_p = core;
    return CG_OK;

err_backends:
    cg_hvd_timeline_fini(core);
    cg__backends_destroy(core);
err_comm:
    cg_comm_destroy(core->comm);
    cg_transport_destroy(core->tp);
err_metrics:
    cg_hvd_metrics_stop(core, false);
err_sync:
    pthread_cond_destroy(&core->wake_cond);
    pthread_cond_destroy(&core->done_cond);
    pthread_mutex_destroy(&core->lock);
err_free:
    cg__arrays_free(core);
    cg_hvd_gpu_destroy(core->gpu);
    cg_governor_free(ctx->gov, CG_MEM_CAT_CONTROL, core, sizeof(*core));
    return st;
}

void cg_hvd_core_retire(cg_hvd_core_t *core, const char *msg)
{
    pthread_mutex_lock(&core->lock);
    core->stop = true;
    atomic_fetch_add_explicit(&core->kick, 1, memory_order_relaxed);
    pthread_cond_broadcast(&core->wake_cond);
    pthread_mutex_unlock(&core->lock);
    pthread_join(core->thread, NULL);
    pthread_mutex_lock(&core->lock);
    if (!core->dead) { /* enqueues fail from now on */
        core->dead = true;
        core->dead_status = CG_ERR_CANCELED;
        snprintf(core->dead_msg, sizeof(core->dead_msg), "%s", msg);
    }
    pthread_mutex_unlock(&core->lock);
    cg_hvd_timeline_fini(core);
    cg_hvd_fail_all(core, CG_ERR_CANCELED, msg);
    cg_hvd_metrics_stop(core, true);
    cg__free_buffers(core);
    cg__backends_destroy(core);
    cg_comm_destroy(core->comm);
    cg_transport_destroy(core->tp);
    core->comm = NULL;
    core->tp = NULL;
    if (core->parent != NULL) { /* the set's own bootstrap */
        cg_bootstrap_destroy(core->bs);
        core->bs = NULL;
    }
}

void cg_hvd_core_free(cg_hvd_core_t *core)
{
    cg_hvd_queue_fini(core);
    cg_hvd_gpu_destroy(core->gpu);
    pthread_cond_destroy(&core->wake_cond);
    pthread_cond_destroy(&core->done_cond);
    pthread_mutex_destroy(&core->lock);
    cg__arrays_free(core);
    cg_governor_free(core->gov, CG_MEM_CAT_CONTROL, core, sizeof(*core));
}
