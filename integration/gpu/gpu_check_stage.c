/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpu_check's staging checks (integration/gpu/gpu_check.c): every rank's
 * view of the staging chunk (agreed, its slots, its governor's) gathered
 * and judged, and the no-slot cases run in place of the suite when a
 * rank's slots are refused (CG_FAULT_STAGING=1 there): a staged CUDA
 * allreduce and broadcast must fail on every rank naming that rank.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "core/base/parse.h"
#include "integration/gpu/gpu_check_impl.h"

static int env_on(const char *name)
{
    const char *v = getenv(name);
    bool on = false;

    return v != NULL && cg_parse_bool(v, &on) && on;
}

/* 1: CG_FAULT_ALLOC fails some of this rank's allocations. */
static int faults_alloc(void)
{
    const char *v = getenv("CG_FAULT_ALLOC");

    return v != NULL && *v != '\0' && strcmp(v, "0") != 0;
}

/* 1: this rank stages CUDA tensors through host memory (CUDA mode on
 * COLLGUARD or MPI, or CG_GPU_STAGE_EMULATE); 0: it does not; -1: not
 * known here (AUTO picks the backend inside the library). */
static int stages(const gc_t *g)
{
    if (env_on("CG_GPU_STAGE_EMULATE"))
        return 1;
    if (g->device < 0 || strcasecmp(g->backend, "NCCL") == 0)
        return 0;
    if (strcasecmp(g->backend, "COLLGUARD") == 0 ||
        strcasecmp(g->backend, "MPI") == 0)
        return 1;
    return -1;
}

/* Every rank's view, in units of 256 bytes (the slots' granularity). */
enum { C_AGREED, C_SLOT, C_GOV, C_STAGES, C_FAULT, C_FALLOC, C_N };
typedef struct {
    int32_t v[C_N][MAX_RANKS];
} chunks_t;

static void gather_chunks(gc_t *g, chunks_t *c)
{
    cg_hvd_stats_t s;
    cg_governor_snapshot_t snap;

    memset(c, 0, sizeof(*c));
    cg_hvd_core_stats(g->core, &s);
    if (cg_ctx_governor_snapshot(g->ctx, &snap) != CG_OK)
        gc_fatal("governor snapshot: %s", cg_last_error());
    c->v[C_AGREED][g->rank] = (int32_t)(s.stage_chunk_bytes / 256);
    c->v[C_SLOT][g->rank] = (int32_t)(s.stage_slot_bytes / 256);
    c->v[C_GOV][g->rank] = (int32_t)(snap.chunk_bytes / 256);
    c->v[C_STAGES][g->rank] = stages(g) == 1;
    c->v[C_FAULT][g->rank] = env_on("CG_FAULT_STAGING");
    c->v[C_FALLOC][g->rank] = faults_alloc();
    if (gc_agree_max(g, &c->v[0][0], C_N * MAX_RANKS) != 0)
        gc_fatal("rank %d: the core stopped while gathering the staging "
                 "chunks", g->rank);
}

/* The verdict on one gathered view (the same on every rank). */
static void judge_chunks(const gc_t *g, const chunks_t *c, outcome_t *o)
{
    int32_t least = INT32_MAX, agreed = c->v[C_AGREED][0];
    int any = 0, fault = -1;

    for (int r = 0; r < g->size; r++) {
        if (c->v[C_AGREED][r] != agreed) {
            gc_note(o, V_WRONG, "rank %d sees an agreed chunk of %d x 256 B, "
                    "rank 0 %d x 256 B", r, (int)c->v[C_AGREED][r],
                    (int)agreed);
            return;
        }
        if (c->v[C_FAULT][r] && fault < 0)
            fault = r;
        if (!c->v[C_STAGES][r])
            continue;
        any = 1;
        least = c->v[C_SLOT][r] < least ? c->v[C_SLOT][r] : least;
    }
    o->elems = (size_t)agreed * 256;
    if (!any && agreed != 0)
        gc_note(o, V_WRONG, "no rank stages, yet %d x 256 B agreed",
                (int)agreed);
    else if (any && fault >= 0 && agreed != 0)
        gc_note(o, V_WRONG, "rank %d has no staging slot, yet %d x 256 B "
                "agreed", fault, (int)agreed);
    else if (any && fault < 0 && (agreed == 0 || agreed != least))
        gc_note(o, V_WRONG, "agreed %d x 256 B, want the least slot, %d x "
                "256 B", (int)agreed, (int)least);
    /* Slots hold the governor's chunk; under CG_FAULT_ALLOC an
     * allocation may have shrunk them (kept until the chunk moves), never
     * grown them past it. */
    for (int r = 0; r < g->size && any && fault < 0; r++)
        if (c->v[C_STAGES][r] &&
            (c->v[C_SLOT][r] > c->v[C_GOV][r] ||
             (!c->v[C_FALLOC][r] && c->v[C_SLOT][r] != c->v[C_GOV][r])))
            gc_note(o, V_WRONG, "rank %d's slots hold %d x 256 B, its "
                    "governor's chunk is %d x 256 B", r, (int)c->v[C_SLOT][r],
                    (int)c->v[C_GOV][r]);
}

/* One row: the ranks' staging chunks, once they have settled (memory
 * still moving gets up to 2 s). */
void gc_stage_chunk_check(gc_t *g, const char *cname)
{
    struct timespec nap = {0, 50000000};
    char b[32];
    chunks_t c;
    outcome_t o;

    if (stages(g) < 0)
        return; /* AUTO: which backend runs is the library's choice */
    for (int k = 0; k < 40; k++) {
        memset(&o, 0, sizeof(o));
        gather_chunks(g, &c);
        judge_chunks(g, &c, &o);
        if (o.verdict == V_OK)
            break;
        nanosleep(&nap, NULL);
    }
    if (g->rank == 0) {
        printf("staging chunk (%s): agreed %s;", cname,
               cg_format_size(o.elems, b, sizeof(b)));
        for (int r = 0; r < g->size; r++)
            printf(" rank %d %s%s", r,
                   c.v[C_STAGES][r]
                       ? cg_format_size((uint64_t)c.v[C_SLOT][r] * 256, b,
                                        sizeof(b))
                       : "-",
                   c.v[C_FAULT][r] ? " (slots refused)" : "");
        printf("\n");
    }
    gc_report(g, cname, "-", "bytes", &o, 0);
}

/* One staged CUDA collective that must fail on every rank, naming rank
 * `who` (the one whose slots are refused). */
static void no_slot_case(gc_t *g, cg_hvd_op_type_t type, int who)
{
    size_t n = (size_t)1 << 18; /* 1 MiB of f32 */
    cg_hvd_tensor_t t = {.field_mask = CG_HVD_TENSOR_FIELD_DEVICE,
                         .dtype = CG_DTYPE_F32, .ndim = 1,
                         .shape = {(int64_t)n}, .input = g->dev_in,
                         .output = g->dev_in, .flags = CG_HVD_IS_LEAF,
                         .device = g->device};
    char name[64], want[64];
    cg_hvd_req_h req = NULL;
    cg_status_t st;
    outcome_t o;

    memset(&o, 0, sizeof(o));
    o.elems = n;
    snprintf(name, sizeof(name), "gc.no-slot.%s",
             type == CG_HVD_BROADCAST ? "broadcast" : "allreduce");
    snprintf(want, sizeof(want), "rank %d has no staging slot", who);
    t.name = name;
    st = type == CG_HVD_BROADCAST
             ? cg_hvd_enqueue_broadcast(g->core, &t, 0, &req)
             : cg_hvd_enqueue_allreduce(g->core, &t, CG_OP_SUM, 1.0, 1.0,
                                        &req);
    if (st != CG_OK) {
        gc_note(&o, V_WRONG, "enqueue: %s", cg_last_error());
    } else {
        st = cg_hvd_wait(req);
        if (st != CG_ERR_NO_MEMORY || strstr(cg_hvd_error(req), want) == NULL)
            gc_note(&o, V_WRONG, "%s: %s (want CG_ERR_NO_MEMORY naming rank "
                    "%d)", cg_status_name(st), cg_hvd_error(req), who);
        else if (g->rank == 0)
            printf("%s refused as it must be: %s\n", name,
                   cg_hvd_error(req));
        cg_hvd_release(req);
    }
    gc_report(g, type == CG_HVD_BROADCAST ? "no-slot-broadcast"
                                          : "no-slot-allreduce",
              "f32", "-", &o, 0);
}

/* With a rank whose slots are refused (CG_FAULT_STAGING=1 there): the
 * no-slot cases in place of the suite (every staged collective would fail
 * alike); 1 when they ran. */
int gc_no_slot_cases(gc_t *g)
{
    /* The lowest refused rank is the one the error names: the maximum of
     * size - rank over the refused ranks. */
    int32_t who = env_on("CG_FAULT_STAGING") ? g->size - g->rank : 0;

    if (gc_agree_max(g, &who, 1) != 0)
        gc_fatal("rank %d: the core stopped before the no-slot check",
                 g->rank);
    if (who == 0)
        return 0;
    if (g->device >= 0 && stages(g) == 1) {
        no_slot_case(g, CG_HVD_ALLREDUCE, g->size - who);
        no_slot_case(g, CG_HVD_BROADCAST, g->size - who);
    }
    gc_stage_chunk_check(g, "stage-chunk-no-slot");
    return 1;
}
