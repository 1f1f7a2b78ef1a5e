/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The tuner plugin driven as NCCL drives it: tn_harness LIB VERSION MODE
 * loads ncclTunerPlugin_vVERSION, feeds NCCL-shaped cost tables and checks
 * the choices for MODE: "ok" (no pressure: table unchanged, nChannels 0),
 * "warn" (only Ring/Tree left), "critical" (Ring/Simple only, or the
 * cheapest offered cell when Ring/Simple is not), with nChannels NCCL's
 * (0) unless CG_TUNER_CHANNELS_WARN / _CRITICAL set a cap (at WARN a
 * table without Ring and Tree stays whole), "rules" (rules.csv in
 * CG_TUNER_RULES on communicators of several node and rank counts: a
 * row's nNodes/nRanks filter decides where it applies), "rules_warn" and
 * "rules_critical" (the same rules under pressure, which wins),
 * "badcfg" (a bad CG_* value: init succeeds, WARNs, and the tuner is a
 * pass-through), "rulesfail" (a missing, unreadable or malformed rules
 * file: init succeeds, WARNs naming the file and why, and the policy runs
 * without rules). Log lines are kept by np_drv.c's logger. The pressure
 * comes from the real governor (the test sets CG_PRESSURE_* thresholds).
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugin/nccl/tuner_v2.h"
#include "plugin/nccl/tuner_v3.h"
#include "plugin/nccl/tuner_v4.h"
#include "plugin/nccl/tuner_v5.h"
#include "harness_check.h"
#include "np_drv.h"

enum { NA = NCCL_NUM_ALGORITHMS_V5, NP = NCCL_NUM_PROTOCOLS_V5 };

static void *g_tab;
static int g_ver;

static int t_init(void **ctx, size_t nranks, size_t nnodes)
{
    ncclTunerConstants_v5_t k;
    ncclNvlDomainInfo_v5_t nvl = {1, 8, 8};
    memset(&k, 0, sizeof(k));
    switch (g_ver) {
    case 5: return ((ncclTuner_v5_t *)g_tab)->init(ctx, 7, nranks, nnodes,
                                                    np_drv_logger, &nvl, &k);
    case 4: return ((ncclTuner_v4_t *)g_tab)->init(nranks, nnodes,
                                                    np_drv_logger, ctx);
    case 3: return ((ncclTuner_v3_t *)g_tab)->init(nranks, nnodes,
                                                    np_drv_logger, ctx);
    default: return ((ncclTuner_v2_t *)g_tab)->init(nranks, nnodes,
                                                     np_drv_logger, ctx);
    }
}

static int t_fini(void *ctx)
{
    switch (g_ver) {
    case 5: return ((ncclTuner_v5_t *)g_tab)->finalize(ctx);
    case 4: return ((ncclTuner_v4_t *)g_tab)->destroy(ctx);
    case 3: return ((ncclTuner_v3_t *)g_tab)->destroy(ctx);
    default: return ((ncclTuner_v2_t *)g_tab)->destroy(ctx);
    }
}

/* The cell NCCL would pick from t (cheapest available), as a*NP+p. */
static int pick(float t[NA][NP])
{
    int best = -1;
    for (int i = 0; i < NA * NP; i++)
        if (t[i / NP][i % NP] != NCCL_ALGO_PROTO_IGNORE &&
            (best < 0 || t[i / NP][i % NP] < t[best / NP][best % NP]))
            best = i;
    return best;
}

/* Runs the tuner on t; v2 gets the support flags and its answer is
 * written back as a zero cost (what NCCL's v2 shim does). */
static int t_coll(void *ctx, int coll, size_t nbytes, float t[NA][NP],
                  int *nch)
{
    *nch = 0;
    if (g_ver >= 3) {
        if (g_ver == 5)
            return ((ncclTuner_v5_t *)g_tab)->getCollInfo(
                ctx, coll, nbytes, 1, (float **)t, NA, NP, 0, nch);
        if (g_ver == 4)
            return ((ncclTuner_v4_t *)g_tab)->getCollInfo(
                ctx, coll, nbytes, 1, (float **)t, NA, NP, 0, nch);
        return ((ncclTuner_v3_t *)g_tab)->getCollInfo(
            ctx, coll, nbytes, 1, (float **)t, NA, NP, nch);
    }
    int a = -1, p = -1;
    int cn = t[NCCL_ALGO_COLLNET_CHAIN][NCCL_PROTO_SIMPLE] !=
             NCCL_ALGO_PROTO_IGNORE;
    int nv = t[NCCL_ALGO_NVLS][NCCL_PROTO_SIMPLE] != NCCL_ALGO_PROTO_IGNORE;
    int r = ((ncclTuner_v2_t *)g_tab)->getCollInfo(ctx, coll, nbytes, cn, nv,
                                                   1, &a, &p, nch);
    if (a >= 0 && p >= 0 && t[a][p] != NCCL_ALGO_PROTO_IGNORE)
        t[a][p] = 0.0f;
    return r;
}

/* A table like NCCL's on one node: Tree/Ring/PAT offered, CollNet and
 * NVLS not; LL cheapest (small message). */
static void table(float t[NA][NP], int with_ring_simple)
{
    for (int a = 0; a < NA; a++)
        for (int p = 0; p < NP; p++)
            t[a][p] = NCCL_ALGO_PROTO_IGNORE;
    for (int p = 0; p < NP; p++) {
        t[NCCL_ALGO_TREE][p] = 10.0f + p;
        t[NCCL_ALGO_RING][p] = 20.0f + p;
        t[NCCL_ALGO_PAT][p] = 5.0f + p;
    }
    t[NCCL_ALGO_NVLS][NCCL_PROTO_SIMPLE] = 2.0f;
    if (!with_ring_simple)
        t[NCCL_ALGO_RING][NCCL_PROTO_SIMPLE] = NCCL_ALGO_PROTO_IGNORE;
}

/* The channel count the plugin must return at a level: the cap the
 * environment sets, else 0 (NCCL's). */
static int want_cap(const char *var)
{
    const char *v = getenv(var);
    return v != NULL && *v != '\0' ? atoi(v) : 0;
}

/* One collective on a fresh table through ctx: NCCL's pick afterwards
 * must be cell (a*NP+p; -1: the table left as NCCL gave it) with nch
 * channels. */
static void expect(void *ctx, int coll, size_t nbytes, int cell, int nch,
                   int line)
{
    float t[NA][NP], orig[NA][NP];
    int got_nch = -1;

    table(t, 1);
    memcpy(orig, t, sizeof(t));
    CHECK(t_coll(ctx, coll, nbytes, t, &got_nch) == 0);
    if (cell < 0 ? memcmp(t, orig, sizeof(t)) != 0 : pick(t) != cell) {
        fprintf(stderr, "[%s] line %d: coll %d %zu bytes: cell %d, want %d\n",
                g_who, line, coll, nbytes, pick(t), cell);
        g_fail = 1;
    }
    if (got_nch != nch) {
        fprintf(stderr, "[%s] line %d: coll %d %zu bytes: %d channels, "
                "want %d\n", g_who, line, coll, nbytes, got_nch, nch);
        g_fail = 1;
    }
}
#define EXPECT(ctx, coll, nbytes, a, p, nch)                                 \
    expect(ctx, coll, nbytes, (a) < 0 ? -1 : (a) * NP + (p), nch, __LINE__)

/* rules.csv on communicators of several shapes: a row with an nNodes or
 * nRanks filter applies only to that shape. level: the pressure the
 * environment sets (0 ok, 1 warn, 2 critical with a channel cap of
 * CG_TUNER_CHANNELS_CRITICAL), which wins over a rule. */
static void rules(int level)
{
    enum { RING = NCCL_ALGO_RING, TREE = NCCL_ALGO_TREE, PAT = NCCL_ALGO_PAT,
           LL = NCCL_PROTO_LL, LL128 = NCCL_PROTO_LL128,
           SIMPLE = NCCL_PROTO_SIMPLE };
    void *c16x2 = NULL, *c8x1 = NULL, *c8x4 = NULL, *c16x4 = NULL;
    int cap = want_cap("CG_TUNER_CHANNELS_CRITICAL");

    CHECK(t_init(&c16x2, 16, 2) == 0 && t_init(&c8x1, 8, 1) == 0 &&
          t_init(&c8x4, 8, 4) == 0 && t_init(&c16x4, 16, 4) == 0);
    if (level == 0) {
        /* 16 ranks on 2 nodes: rows 1, 3, 4 and 6. */
        EXPECT(c16x2, ncclFuncAllReduce, 4096, RING, LL, 2);
        EXPECT(c16x2, ncclFuncAllReduce, 8 << 20, TREE, SIMPLE, 0);
        EXPECT(c16x2, ncclFuncReduce, 4096, RING, LL128, 4);
        EXPECT(c16x2, ncclFuncAllGather, 4096, -1, -1, 0); /* 4 nodes only */
        EXPECT(c16x2, ncclFuncBroadcast, 4096, PAT, SIMPLE, 6);
        EXPECT(c16x2, ncclFuncReduceScatter, 4096, -1, -1, 0); /* no rule */
        /* 8 ranks on 1 node: not row 1 (2 nodes), row 2 (8 ranks). */
        EXPECT(c8x1, ncclFuncAllReduce, 4096, TREE, LL128, 5);
        EXPECT(c8x1, ncclFuncReduce, 4096, -1, -1, 0); /* 16 ranks only */
        EXPECT(c8x1, ncclFuncAllGather, 4096, -1, -1, 0);
        /* 8 ranks on 4 nodes: rows 2 and 5. */
        EXPECT(c8x4, ncclFuncAllReduce, 4096, TREE, LL128, 5);
        EXPECT(c8x4, ncclFuncAllGather, 4096, RING, SIMPLE, 3);
        /* 16 ranks on 4 nodes: neither row 1 nor row 2. */
        EXPECT(c16x4, ncclFuncAllReduce, 4096, -1, -1, 0);
        EXPECT(c16x4, ncclFuncReduce, 4096, RING, LL128, 4);
        EXPECT(c16x4, ncclFuncAllGather, 4096, RING, SIMPLE, 3);
    } else if (level == 1) {
        /* WARN keeps Ring and Tree: rules on those cells hold, a PAT rule
         * is masked (the cheapest Ring/Tree cell, Tree/LL, wins, with
         * NCCL's channel count, not the rule's 6 meant for PAT). */
        EXPECT(c16x2, ncclFuncAllReduce, 4096, RING, LL, 2);
        EXPECT(c8x1, ncclFuncAllReduce, 4096, TREE, LL128, 5);
        EXPECT(c16x2, ncclFuncBroadcast, 4096, TREE, LL, 0);
        EXPECT(c16x4, ncclFuncAllReduce, 4096, TREE, LL, 0);
    } else {
        /* CRITICAL keeps Ring/Simple whatever the rule, its channels
         * capped. */
        EXPECT(c16x2, ncclFuncAllReduce, 4096, RING, SIMPLE, cap);
        EXPECT(c16x2, ncclFuncAllReduce, 8 << 20, RING, SIMPLE, cap);
        EXPECT(c8x4, ncclFuncAllGather, 4096, RING, SIMPLE, cap);
        EXPECT(c16x2, ncclFuncBroadcast, 4096, RING, SIMPLE, cap);
    }
    CHECK(t_fini(c16x2) == 0 && t_fini(c8x1) == 0 && t_fini(c8x4) == 0 &&
          t_fini(c16x4) == 0);
}

/* One rules file that cannot be used (NCCL_TUNER_CONFIG_FILE, the alias,
 * set to path): init succeeds with a WARN containing what and why, and
 * the pressure policy (CRITICAL, no cap) applies without any rule. */
static void rules_unusable(const char *path, const char *what,
                           const char *why)
{
    void *ctx = NULL;

    if (path == NULL) {
        CHECK(!"TN_RULES_DIR and TN_RULES_BAD set");
        return;
    }
    setenv("NCCL_TUNER_CONFIG_FILE", path, 1);
    np_drv_log_clear();
    CHECK(t_init(&ctx, 16, 2) == 0 && ctx != NULL);
    CHECK(np_drv_log_count(NCCL_LOG_WARN, what) == 1);
    CHECK(np_drv_log_count(NCCL_LOG_WARN, why) == 1);
    CHECK(np_drv_log_count(NCCL_LOG_WARN, "running without rules") == 1);
    /* 7 channels would be the malformed file's first rule, half-applied. */
    EXPECT(ctx, ncclFuncAllReduce, 4096, NCCL_ALGO_RING, NCCL_PROTO_SIMPLE,
           0);
    CHECK(t_fini(ctx) == 0);
}

int main(int argc, char **argv)
{
    char sym[32];
    void *lib, *ctx = NULL;
    float t[NA][NP], orig[NA][NP];
    int nch;

    if (argc != 4)
        return 2;
    g_who = "tuner";
    g_ver = atoi(argv[2]);
    const char *mode = argv[3];
    lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    CHECK(lib != NULL);
    if (lib == NULL)
        return 1;
    snprintf(sym, sizeof(sym), "ncclTunerPlugin_v%d", g_ver);
    g_tab = dlsym(lib, sym);
    CHECK(g_tab != NULL);
    if (g_tab == NULL)
        return 1;
    CHECK(t_init(&ctx, 16, 2) == 0 && ctx != NULL);
    table(t, 1);
    memcpy(orig, t, sizeof(t));
    CHECK(t_coll(ctx, ncclFuncAllReduce, 1 << 20, t, &nch) == 0);
    if (strcmp(mode, "ok") == 0 || strcmp(mode, "badcfg") == 0) {
        CHECK(memcmp(t, orig, sizeof(t)) == 0 && nch == 0);
        CHECK(pick(t) == NCCL_ALGO_NVLS * NP + NCCL_PROTO_SIMPLE);
        if (strcmp(mode, "badcfg") == 0) { /* a pass-through, said so */
            CHECK(np_drv_log_count(NCCL_LOG_WARN, "pass-through") == 1);
            CHECK(np_drv_log_count(NCCL_LOG_WARN, "for "
                                   "CG_TUNER_CHANNELS_CRITICAL: expected") >=
                  1);
            table(t, 0);
            memcpy(orig, t, sizeof(t));
            CHECK(t_coll(ctx, ncclFuncAllReduce, 4096, t, &nch) == 0);
            CHECK(memcmp(t, orig, sizeof(t)) == 0 && nch == 0);
        }
    } else if (strcmp(mode, "rulesfail") == 0) {
        /* The environment's file does not exist; then a directory; then
         * a malformed file. */
        const char *missing = getenv("NCCL_TUNER_CONFIG_FILE");
        CHECK(missing != NULL && nch == 0 &&
              pick(t) == NCCL_ALGO_RING * NP + NCCL_PROTO_SIMPLE);
        CHECK(missing != NULL &&
              np_drv_log_count(NCCL_LOG_WARN, missing) == 1);
        CHECK(np_drv_log_count(NCCL_LOG_WARN, "No such file") == 1);
        CHECK(t_fini(ctx) == 0);
        rules_unusable(getenv("TN_RULES_DIR"), getenv("TN_RULES_DIR"),
                       "Is a directory");
        rules_unusable(getenv("TN_RULES_BAD"), "rules_bad.csv:4:",
                       "unknown collective, algorithm or protocol");
        CHECK(t_init(&ctx, 16, 2) == 0);
    } else if (strcmp(mode, "warn") == 0) {
        int b = pick(t);
        CHECK(nch == want_cap("CG_TUNER_CHANNELS_WARN"));
        /* v2 cannot name a set of cells: NCCL keeps choosing there. */
        if (g_ver >= 3)
            CHECK(b == NCCL_ALGO_TREE * NP + NCCL_PROTO_LL);
        else
            CHECK(b == NCCL_ALGO_NVLS * NP + NCCL_PROTO_SIMPLE);
        /* No Ring or Tree cell offered: nothing is masked. */
        table(t, 1);
        for (int p = 0; p < NP; p++)
            t[NCCL_ALGO_RING][p] = t[NCCL_ALGO_TREE][p] =
                NCCL_ALGO_PROTO_IGNORE;
        memcpy(orig, t, sizeof(t));
        CHECK(t_coll(ctx, ncclFuncAllReduce, 1 << 20, t, &nch) == 0);
        if (g_ver >= 3)
            CHECK(memcmp(t, orig, sizeof(t)) == 0);
        CHECK(pick(t) == NCCL_ALGO_NVLS * NP + NCCL_PROTO_SIMPLE);
    } else if (strcmp(mode, "critical") == 0) {
        CHECK(nch == want_cap("CG_TUNER_CHANNELS_CRITICAL"));
        CHECK(pick(t) == NCCL_ALGO_RING * NP + NCCL_PROTO_SIMPLE);
        table(t, 0); /* no Ring/Simple: the cheapest offered survives */
        CHECK(t_coll(ctx, ncclFuncAllReduce, 1 << 20, t, &nch) == 0);
        CHECK(pick(t) >= 0);
        if (g_ver >= 3)
            CHECK(pick(t) == NCCL_ALGO_NVLS * NP + NCCL_PROTO_SIMPLE);
    } else if (strncmp(mode, "rules", 5) == 0) {
        rules(strcmp(mode, "rules") == 0 ? 0
              : strcmp(mode, "rules_warn") == 0 ? 1 : 2);
    }
    CHECK(t_fini(ctx) == 0);
    /* Every line under TUNING, without collguard's prefix (init logs at
     * least its INFO line). */
    CHECK(np_drv_log_bad(NCCL_TUNING) == 0);
    /* init -> finalize -> init */
    CHECK(t_init(&ctx, 2, 1) == 0 && t_fini(ctx) == 0);
    dlclose(lib);
    printf("tuner v%d %s: %s\n", g_ver, mode, g_fail ? "FAILED" : "passed");
    return g_fail;
}
