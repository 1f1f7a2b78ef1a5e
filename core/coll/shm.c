/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The communicator's shared-memory area (see shm.h): set-up in three
 * bootstrap rounds (who we are; created or not; mapped or not), the
 * per-rank segments (one 4 KiB control block of sequence words, each on
 * its own cache line, then two slots), and the waits with abort, liveness
 * and timeout checks. Layer: core/coll.
 */
#include "core/coll/shm.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/base/clock.h"
#include "core/base/error.h"

#define CG__SHM_LINE 64
#define CG__SHM_CTL 4096u
/* Polls of a word between checks for aborts, liveness and time. */
#define CG__SHM_SPINS 64
/* Liveness of the awaited peer is checked this often while waiting. */
#define CG__SHM_ALIVE_NS 2000000ull

/* The control block at the start of every rank's segment. */
typedef struct cg__shm_ctl {
    struct {
        _Atomic uint64_t v;
        char pad[CG__SHM_LINE - sizeof(uint64_t)];
    } word[CG_SHM_WORDS], abort;
    struct {
        cg_shm_desc_t d; /* written before CG_SHM_IN's release */
        char pad[CG__SHM_LINE - sizeof(cg_shm_desc_t)];
    } desc[2];
} cg__shm_ctl_t;

_Static_assert(sizeof(cg__shm_ctl_t) <= CG__SHM_CTL, "control block size");

struct cg_shm {
    int rank, size;
    cg_governor_t *gov;
    const cg_log_t *log;
    uint64_t timeout_ns;
    size_t slot;          /* agreed slot bytes */
    size_t own_bytes;     /* the own segment's size (accounted) */
    uint64_t round;
    char name[64];        /* the own segment's name, "" once unlinked */
    cg_mem_backend_t backend;
    struct cg__shm_peer {
        uint8_t *seg;     /* the rank's segment, mapped here */
        size_t bytes;
        int pid;
    } *peer;              /* [size] */
};

/* Who a rank is, and what it offers (first bootstrap round). */
typedef struct cg__shm_ident {
    char host[64];
    char boot[40];
    uint64_t pidns;
    uint64_t id;     /* rank 0's names the job's segments */
    uint64_t slot;   /* 0: this rank does not want shared memory */
    int32_t pid;
    int32_t pad;
} cg__shm_ident_t;

/* A rank's outcome of a set-up step (second and third rounds). */
typedef struct cg__shm_step {
    uint64_t bytes;
    int32_t err;     /* errno of the failure; 0: done */
    int32_t pad;
} cg__shm_step_t;

static void cg__ident(cg__shm_ident_t *me, uint64_t slot)
{
    struct stat sb;
    FILE *f;

    memset(me, 0, sizeof(*me));
    gethostname(me->host, sizeof(me->host) - 1);
    f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (f != NULL) {
        if (fgets(me->boot, sizeof(me->boot), f) == NULL)
            me->boot[0] = '\0';
        fclose(f);
    }
    if (stat("/proc/self/ns/pid", &sb) == 0)
        me->pidns = (uint64_t)sb.st_ino;
    if (getrandom(&me->id, sizeof(me->id), GRND_NONBLOCK) !=
        (ssize_t)sizeof(me->id))
        me->id = cg_now_ns() ^ ((uint64_t)getpid() << 32);
    me->pid = (int32_t)getpid();
    me->slot = slot;
}

/* The own segment, as a governor backend (accounted, CG_FAULT_ALLOC). */
static void *cg__seg_alloc(void *arg, size_t size)
{
    cg_shm_t *shm = arg;
    int fd = shm_open(shm->name, O_CREAT | O_EXCL | O_RDWR, 0600);
    void *p = MAP_FAILED;
    int err;

    if (fd < 0)
        return NULL;
    /* Reserve the pages now: a full /dev/shm fails here, not as SIGBUS
     * in the middle of a collective. */
    err = posix_fallocate(fd, 0, (off_t)size);
    if (err == 0)
        p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    else
        errno = err;
    err = errno;
    close(fd);
    if (p == MAP_FAILED) {
        shm_unlink(shm->name);
        errno = err;
        return NULL;
    }
    return p;
}

static void cg__seg_free(void *arg, void *ptr, size_t size)
{
    cg_shm_t *shm = arg;

    munmap(ptr, size);
    if (shm->name[0] != '\0')
        shm_unlink(shm->name);
    shm->name[0] = '\0';
}

static void cg__free(cg_shm_t *shm)
{
    for (int r = 0; r < shm->size; r++) {
        if (shm->peer[r].seg == NULL)
            continue;
        if (r == shm->rank)
            cg_governor_free_on(shm->gov, &shm->backend, CG_MEM_CAT_RING,
                                shm->peer[r].seg, shm->own_bytes);
        else
            munmap(shm->peer[r].seg, shm->peer[r].bytes);
    }
    cg_governor_free(shm->gov, CG_MEM_CAT_CONTROL, shm,
                     sizeof(*shm) + (size_t)shm->size * sizeof(*shm->peer));
}

static void cg__name(char *buf, size_t len, uint64_t id, int rank)
{
    snprintf(buf, len, "/collguard-%016llx-%d", (unsigned long long)id,
             rank);
}

/* Maps rank r's segment of bytes bytes; errno value on failure. */
static int cg__map_peer(cg_shm_t *shm, uint64_t id, int r, size_t bytes)
{
    char name[64];
    int fd, err;
    void *p;

    cg__name(name, sizeof(name), id, r);
    fd = shm_open(name, O_RDWR, 0);
    if (fd < 0)
        return errno;
    p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    err = errno;
    close(fd);
    if (p == MAP_FAILED)
        return err;
    shm->peer[r].seg = p;
    shm->peer[r].bytes = bytes;
    return 0;
}

/* One set-up round: every rank's outcome; the first failure (rank and
 * errno) or -1 when all did. */
static cg_status_t cg__agree(cg_bootstrap_t *bs, cg_shm_t *shm,
                             const cg__shm_step_t *mine,
                             cg__shm_step_t *all, int *bad_p)
{
    cg_status_t st = cg_bootstrap_allgather(bs, mine, all, sizeof(*mine));

    *bad_p = -1;
    for (int r = 0; st == CG_OK && r < shm->size && *bad_p < 0; r++)
        if (all[r].err != 0)
            *bad_p = r;
    return st;
}

/* Why shared memory is not used: an error when required, else a warning
 * (or a debug line for a job spread over hosts, the normal case). */
static cg_status_t cg__decline(const cg_shm_params_t *p, bool warn,
                               const char *why)
{
    if (p->required)
        return cg_error_set(CG_ERR_CONFIG, "CG_ALGO=shm: no shared memory: "
                            "%s", why);
    if (warn)
        cg_warn(p->log, "shared-memory collectives off, the transport "
                "carries them: %s (CG_SHM_SLOT=0 turns this off quietly)",
                why);
    else
        cg_debug(p->log, "shared-memory collectives off: %s", why);
    return CG_OK;
}

/* The set-up after the ranks agreed they share a host: create, agree,
 * map, agree, unlink. */
static cg_status_t cg__setup(const cg_shm_params_t *p, cg_shm_t *shm,
                             uint64_t id, uint64_t slot, cg__shm_step_t *all)
{
    cg__shm_step_t mine = {0, 0, 0};
    /* The control block, a page for staggering the slots, two slots. */
    size_t want = 2 * CG__SHM_CTL + 2 * (size_t)slot, got = 0;
    char why[256];
    void *seg = NULL;
    int bad;
    cg_status_t st;

    cg__name(shm->name, sizeof(shm->name), id, shm->rank);
    shm->backend = (cg_mem_backend_t){cg__seg_alloc, cg__seg_free, shm, 0};
    errno = 0;
    if (cg_governor_alloc_shrink_on(shm->gov, &shm->backend,
                                    CG_MEM_CAT_RING, want, want, 4096,
                                    "CG_SHM_SLOT", &seg, &got) != CG_OK)
        mine.err = errno != 0 ? errno : ENOMEM;
    shm->peer[shm->rank].seg = seg;
    shm->peer[shm->rank].bytes = got;
    shm->own_bytes = got;
    mine.bytes = got;
    st = cg__agree(p->bs, shm, &mine, all, &bad);
    if (st != CG_OK)
        return st;
    if (bad >= 0) {
        snprintf(why, sizeof(why), "rank %d could not create a %zu-byte "
                 "segment in /dev/shm: %s", bad, want,
                 strerror(all[bad].err));
        return cg__decline(p, true, why);
    }
    for (int r = 0; r < shm->size && mine.err == 0; r++)
        if (r != shm->rank)
            mine.err = cg__map_peer(shm, id, r, (size_t)all[r].bytes);
    st = cg__agree(p->bs, shm, &mine, all, &bad);
    if (st != CG_OK)
        return st;
    /* Every rank has mapped every segment (or given up): names can go. */
    shm_unlink(shm->name);
    shm->name[0] = '\0';
    if (bad >= 0) {
        snprintf(why, sizeof(why), "rank %d could not map its peers' "
                 "segments: %s", bad, strerror(all[bad].err));
        return cg__decline(p, true, why);
    }
    shm->slot = (size_t)slot;
    return CG_OK;
}

cg_status_t cg_shm_create(const cg_shm_params_t *p, cg_shm_t **shm_p)
{
    int rank = cg_bootstrap_rank(p->bs), size = cg_bootstrap_size(p->bs);
    size_t n = (size_t)size, alen = n * sizeof(cg__shm_ident_t);
    cg__shm_ident_t me, *all = NULL;
    cg__shm_step_t *steps;
    uint64_t slot = UINT64_MAX;
    bool want = true, local = true;
    char why[256];
    cg_shm_t *shm = NULL;
    cg_status_t st;

    *shm_p = NULL;
    if (size < 2)
        return CG_OK; /* one rank: nothing to share */
    st = cg_governor_alloc(p->gov, CG_MEM_CAT_CONTROL, alen, (void **)&all);
    if (st != CG_OK)
        return st;
    cg__ident(&me, p->slot);
    st = cg_bootstrap_allgather(p->bs, &me, all, sizeof(me));
    for (int r = 0; st == CG_OK && r < size; r++) {
        want = want && all[r].slot != 0;
        slot = all[r].slot < slot ? all[r].slot : slot;
        local = local && strcmp(all[r].host, me.host) == 0 &&
                strcmp(all[r].boot, me.boot) == 0 &&
                all[r].pidns == me.pidns;
    }
    if (st != CG_OK || !want || !local || slot / n < 4096) {
        cg_governor_free(p->gov, CG_MEM_CAT_CONTROL, all, alen);
        if (st != CG_OK)
            return st;
        if (!want)
            snprintf(why, sizeof(why), "CG_SHM_SLOT is 0 on some rank");
        else if (!local)
            snprintf(why, sizeof(why), "the ranks are not all on one host "
                     "(or share no PID namespace)");
        else
            snprintf(why, sizeof(why), "CG_SHM_SLOT of %llu bytes leaves "
                     "less than 4KiB per rank for %d ranks",
                     (unsigned long long)slot, size);
        return cg__decline(p, want && local, why);
    }
    st = cg_governor_alloc(p->gov, CG_MEM_CAT_CONTROL,
                           sizeof(*shm) + n * sizeof(*shm->peer),
                           (void **)&shm);
    if (st == CG_OK) {
        memset(shm, 0, sizeof(*shm) + n * sizeof(*shm->peer));
        shm->rank = rank;
        shm->size = size;
        shm->gov = p->gov;
        shm->log = p->log;
        shm->timeout_ns = p->timeout_ns;
        shm->peer = (struct cg__shm_peer *)(shm + 1);
        for (int r = 0; r < size; r++)
            shm->peer[r].pid = all[r].pid;
    }
    steps = (cg__shm_step_t *)all; /* reused: smaller entries */
    if (st == CG_OK)
        st = cg__setup(p, shm, all[0].id, slot, steps);
    cg_governor_free(p->gov, CG_MEM_CAT_CONTROL, all, alen);
    if (st == CG_OK && shm->slot != 0) {
        cg_info(p->log, "shared-memory collectives: %d ranks, 2 slots of "
                "%zu bytes each", size, shm->slot);
        *shm_p = shm;
        return CG_OK;
    }
    if (shm != NULL)
        cg__free(shm);
    return st;
}

void cg_shm_destroy(cg_shm_t *shm)
{
    if (shm != NULL)
        cg__free(shm);
}

size_t cg_shm_slot_bytes(const cg_shm_t *shm) { return shm->slot; }

uint8_t *cg_shm_slot(const cg_shm_t *shm, int r, int b)
{
    /* Ranks' slots start at different offsets within a page (the
     * segment has a spare page for it), so the owner's reduction, which
     * reads one rank's slot and writes its own at the same offset, never
     * has loads and stores exactly 4 KiB apart (false store-forwarding
     * stalls on x86). */
    return shm->peer[r].seg + CG__SHM_CTL + (size_t)(r % 16) * 256 +
           (size_t)b * shm->slot;
}

uint64_t cg_shm_round(const cg_shm_t *shm) { return shm->round; }
void cg_shm_next_round(cg_shm_t *shm) { shm->round++; }

static cg__shm_ctl_t *cg__ctl(const cg_shm_t *shm, int r)
{
    return (cg__shm_ctl_t *)shm->peer[r].seg;
}

void cg_shm_post(cg_shm_t *shm, cg_shm_word_t w, uint64_t v)
{
    atomic_store_explicit(&cg__ctl(shm, shm->rank)->word[w].v, v,
                          memory_order_release);
}

void cg_shm_desc_set(cg_shm_t *shm, int b, const cg_shm_desc_t *d)
{
    cg__ctl(shm, shm->rank)->desc[b].d = *d;
}

void cg_shm_desc_get(const cg_shm_t *shm, int r, int b, cg_shm_desc_t *d)
{
    *d = cg__ctl(shm, r)->desc[b].d;
}

void cg_shm_abort(cg_shm_t *shm)
{
    if (shm != NULL)
        atomic_store_explicit(&cg__ctl(shm, shm->rank)->abort.v, 1,
                              memory_order_release);
}

/* Whether process pid is gone (no such process, or a zombie). */
static bool cg__pid_gone(int pid)
{
    char path[64], buf[256], *p;
    ssize_t got;
    int fd;

    if (kill(pid, 0) != 0 && errno == ESRCH)
        return true;
    snprintf(path, sizeof(path), "/proc/%d/stat", pid);
    fd = open(path, O_RDONLY);
    if (fd < 0)
        return false;
    got = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (got <= 0)
        return false;
    buf[got] = '\0';
    p = strrchr(buf, ')');
    return p != NULL && (p[2] == 'Z' || p[2] == 'X');
}

static const char *const cg__word_name[CG_SHM_WORDS] = {
    "inputs", "result", "end of round"};

cg_status_t cg_shm_wait(cg_shm_t *shm, int peer, cg_shm_word_t w,
                        uint64_t v, const char *op)
{
    _Atomic uint64_t *word = &cg__ctl(shm, peer)->word[w].v;
    uint64_t start = 0, alive = 0, now;

    for (;;) {
        for (int i = 0; i < CG__SHM_SPINS; i++) {
            if (atomic_load_explicit(word, memory_order_acquire) >= v)
                return CG_OK;
            cg_cpu_relax();
        }
        for (int r = 0; r < shm->size; r++)
            if (atomic_load_explicit(&cg__ctl(shm, r)->abort.v,
                                     memory_order_acquire) != 0)
                return cg_error_set(CG_ERR_PEER_RESET, "%s: rank %d failed "
                                    "its part (shared memory; see its log), "
                                    "seen on rank %d", op, r, shm->rank);
        now = cg_now_ns();
        if (start == 0)
            start = alive = now;
        if (now - alive > CG__SHM_ALIVE_NS) {
            alive = now;
            if (cg__pid_gone(shm->peer[peer].pid))
                return cg_error_set(CG_ERR_PEER_RESET, "%s: rank %d (pid "
                                    "%d) exited while rank %d waited for "
                                    "its %s (shared memory)", op, peer,
                                    shm->peer[peer].pid, shm->rank,
                                    cg__word_name[w]);
        }
        if (now - start > shm->timeout_ns)
            return cg_error_set(CG_ERR_TIMEOUT, "%s: rank %d waited %.1fs "
                                "for rank %d's %s (shared memory): peer hung "
                                "or stopped (CG_TIMEOUT)", op, shm->rank,
                                shm->timeout_ns / 1e9, peer,
                                cg__word_name[w]);
        sched_yield();
    }
}
