/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The timeline (core/observe/timeline.c, core/observe/timeline_writer.c): JSON escaping,
 * a file that parses (with /usr/bin/python3's json) after every flush and
 * after stop, balanced spans across a restart, counters and instants,
 * errors that name the file, start/stop racing with event threads, and a
 * one-rank hvd core whose governor's pressure change reaches its timeline.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "collguard/hvd.h"
#include "core/base/error.h"
#include "core/observe/timeline.h"

/* Counting allocator: every byte must come back. */
static atomic_long live_bytes;

static void *tl_alloc(void *arg, cg_mem_cat_t cat, size_t size)
{
    (void)arg;
    (void)cat;
    atomic_fetch_add(&live_bytes, (long)size);
    return malloc(size);
}

static void tl_free(void *arg, cg_mem_cat_t cat, void *p, size_t size)
{
    (void)arg;
    (void)cat;
    atomic_fetch_sub(&live_bytes, (long)size);
    free(p);
}

static cg_timeline_t *tl_new(uint64_t period_ns)
{
    cg_timeline_params_t p = {{tl_alloc, tl_free, NULL}, NULL, period_ns};
    cg_timeline_t *tl = NULL;
    cg_status_t st = cg_timeline_create(&p, &tl);

    cr_assert_eq(st, CG_OK, "create: %s", cg_last_error());
    return tl;
}

static void tl_done(cg_timeline_t *tl)
{
    cg_timeline_destroy(tl);
    cr_assert_eq(atomic_load(&live_bytes), 0, "%ld bytes not freed",
                 atomic_load(&live_bytes));
}

/* A fresh path under /tmp for this test process. */
static void tl_path(char *buf, size_t len, const char *tag)
{
    snprintf(buf, len, "/tmp/cg_test_timeline_%d_%s.json", (int)getpid(),
             tag);
    unlink(buf);
}

/* The checker's exit status for `args` (0: the check passed). */
static int tl_checker(const char *args)
{
    char cmd[2200];

    snprintf(cmd, sizeof(cmd), "/usr/bin/python3 %s %s >/dev/null",
             CG_TL_CHECK, args);
    return system(cmd);
}

/* 0 when path parses. */
static int tl_check(const char *path)
{
    char args[1100];

    snprintf(args, sizeof(args), "valid %s", path);
    return tl_checker(args);
}

static char *tl_read(const char *path)
{
    FILE *f = fopen(path, "rb");
    static char buf[1 << 20];
    size_t n;

    cr_assert_not_null(f, "cannot open %s", path);
    n = fread(buf, 1, sizeof(buf) - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

/* One complete operation of tensor name. */
static void tl_op(cg_timeline_t *tl, const char *name)
{
    uint64_t t = cg_timeline_now_ns();

    cg_timeline_negotiate_start(tl, name, "ALLREDUCE", t);
    cg_timeline_negotiate_rank(tl, name, 0, t);
    cg_timeline_negotiate_end(tl, name, t);
    cg_timeline_op_start(tl, name, "ALLREDUCE", t);
    cg_timeline_activity_start(tl, name, "MEMCPY_IN_FUSION_BUFFER", t);
    cg_timeline_activity_start(tl, name, "COLLGUARD_ALLREDUCE", t + 1000);
    cg_timeline_op_end(tl, name, "float32", "[4]", t + 2000);
}

Test(timeline, escapes_quotes_backslashes_and_controls)
{
    char out[128];
    size_t n = cg_json_escape(out, sizeof(out), "a\"b\\c\n\x01\t\x1f/");

    cr_assert_str_eq(out, "a\\\"b\\\\c\\n\\u0001\\t\\u001f/", "got %s", out);
    cr_assert_eq(n, strlen(out), "length %zu for %s", n, out);
}

Test(timeline, keeps_utf8_and_replaces_invalid_bytes)
{
    char out[128];

    cg_json_escape(out, sizeof(out), "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80");
    cr_assert_str_eq(out, "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", "got %s",
                     out);
    cg_json_escape(out, sizeof(out), "x\xffy");
    cr_assert_str_eq(out, "x\\ufffdy", "lone 0xff: %s", out);
    cg_json_escape(out, sizeof(out), "\xc0\xaf");
    cr_assert_str_eq(out, "\\ufffd\\ufffd", "overlong '/': %s", out);
    cg_json_escape(out, sizeof(out), "\xed\xa0\x80");
    cr_assert_str_eq(out, "\\ufffd\\ufffd\\ufffd", "surrogate: %s", out);
    cg_json_escape(out, sizeof(out), "\xe2\x82");
    cr_assert_str_eq(out, "\\ufffd\\ufffd", "cut sequence: %s", out);
}

Test(timeline, escape_never_splits_an_escape)
{
    char out[6];
    size_t n = cg_json_escape(out, sizeof(out), "\"\"\"");

    cr_assert_str_eq(out, "\\\"\\\"", "got %s", out);
    cr_assert_eq(n, 4, "length %zu", n);
    n = cg_json_escape(out, sizeof(out), "\x01");
    cr_assert_str_eq(out, "", "a 6-byte escape in 6 bytes: %s", out);
    cr_assert_eq(n, 0, "length %zu", n);
}

Test(timeline, file_parses_after_every_flush_and_after_stop)
{
    static const char *const names[] = {"plain", "q\"uote", "back\\slash",
                                        "new\nline", "bad\xff", "tab\there"};
    cg_timeline_t *tl = tl_new(0);
    char path[256], name[64];

    tl_path(path, sizeof(path), "flush");
    cr_assert_eq(cg_timeline_start(tl, path, true), CG_OK, "start: %s",
                 cg_last_error());
    cr_assert_eq(tl_check(path), 0, "empty timeline does not parse");
    for (int round = 0; round < 6; round++) {
        cg_timeline_cycle_start(tl, cg_timeline_now_ns());
        for (int i = 0; i < 50; i++) {
            snprintf(name, sizeof(name), "%s.%d.%d", names[round], round, i);
            tl_op(tl, name);
        }
        cg_timeline_flush(tl);
        cr_assert_eq(tl_check(path), 0, "round %d does not parse", round);
    }
    cg_timeline_flush(tl); /* nothing buffered: no write */
    cr_assert_not_null(strstr(tl_read(path), "q\\\"uote.1.7"),
                       "escaped name missing");
    cr_assert_not_null(strstr(tl_read(path), "\"ph\":\"E\",\"ts\":"),
                       "no end event");
    cr_assert_not_null(strstr(tl_read(path), ",\"args\":{\"dtype\":"
                              "\"float32\",\"shape\":\"[4]\"}}"),
                       "no args on the operation's end");
    cr_assert_not_null(strstr(tl_read(path), "\"name\":\"NEGOTIATE_"
                              "ALLREDUCE\""), "no negotiation");
    cg_timeline_stop(tl);
    cr_assert_eq(tl_check(path), 0, "stopped timeline does not parse");
    cr_assert_eq(cg_timeline_running(tl), false, "still running");
    tl_done(tl);
    unlink(path);
}

Test(timeline, spans_stay_balanced_across_a_restart)
{
    cg_timeline_t *tl = tl_new(0);
    char a[256], b[256], args[600];
    uint64_t t = cg_timeline_now_ns();
    const char *text;

    tl_path(a, sizeof(a), "ra");
    tl_path(b, sizeof(b), "rb");
    cr_assert_eq(cg_timeline_start(tl, a, false), CG_OK, "%s",
                 cg_last_error());
    cg_timeline_op_start(tl, "open", "BROADCAST", t);
    cg_timeline_activity_start(tl, "open", "COLLGUARD_BCAST", t);
    cr_assert_eq(cg_timeline_start(tl, b, false), CG_OK, "%s",
                 cg_last_error());
    /* The ends of spans begun in file a are dropped in file b. */
    cg_timeline_activity_end(tl, "open", t + 10);
    cg_timeline_op_end(tl, "open", "int32", "[1]", t + 20);
    cg_timeline_negotiate_rank(tl, "open", 1, t + 20);
    tl_op(tl, "whole");
    cg_timeline_stop(tl);
    /* Spans open at the switch are closed in file a. */
    snprintf(args, sizeof(args), "names %s open -", a);
    cr_assert_eq(tl_checker(args), 0, "file a is not balanced");
    cr_assert_eq(tl_check(b), 0, "file b does not parse");
    text = tl_read(b);
    cr_assert_null(strstr(text, "\"open\""), "file b: %s", text);
    cr_assert_not_null(strstr(text, "\"whole\""), "file b: %s", text);
    tl_done(tl);
    unlink(a);
    unlink(b);
}

Test(timeline, same_path_continues_the_file)
{
    cg_timeline_t *tl = tl_new(0);
    char path[256];
    const char *text;

    tl_path(path, sizeof(path), "same");
    cr_assert_eq(cg_timeline_start(tl, path, false), CG_OK, "%s",
                 cg_last_error());
    tl_op(tl, "first");
    cg_timeline_flush(tl);
    cr_assert_eq(cg_timeline_start(tl, path, true), CG_OK, "%s",
                 cg_last_error());
    tl_op(tl, "second");
    cg_timeline_cycle_start(tl, cg_timeline_now_ns());
    cg_timeline_stop(tl);
    cr_assert_eq(tl_check(path), 0, "does not parse");
    text = tl_read(path);
    cr_assert_not_null(strstr(text, "\"first\""), "%s", text);
    cr_assert_not_null(strstr(text, "\"second\""), "%s", text);
    cr_assert_not_null(strstr(text, "CYCLE_START"), "mark_cycles now on");
    tl_done(tl);
    unlink(path);
}

Test(timeline, counters_follow_their_period_and_instants_are_global)
{
    cg_timeline_t *tl = tl_new(1000000000ull);
    cg_timeline_counters_t c = {CG_MEM_KIND_HOST, 1u << 30, 1u << 28,
                                1u << 26, 1u << 22, CG_PRESSURE_WARN};
    uint64_t t = cg_timeline_now_ns();
    char path[256];
    const char *text;

    tl_path(path, sizeof(path), "ctr");
    cr_assert_eq(cg_timeline_counters_due(tl, t), false, "due when stopped");
    cr_assert_eq(cg_timeline_start(tl, path, false), CG_OK, "%s",
                 cg_last_error());
    cr_assert_eq(cg_timeline_counters_due(tl, t), true, "first is due");
    cg_timeline_counters(tl, &c, t);
    cr_assert_eq(cg_timeline_counters_due(tl, t + 999999999ull), false,
                 "due before the period");
    cr_assert_eq(cg_timeline_counters_due(tl, t + 1000000000ull), true,
                 "not due after the period");
    cg_timeline_instant(tl, "PRESSURE_WARN", "\"from\":\"ok\",\"to\":\"warn\"",
                        t);
    cg_timeline_stop(tl);
    cr_assert_eq(tl_check(path), 0, "does not parse");
    text = tl_read(path);
    cr_assert_not_null(strstr(text, "\"args\":{\"host\":1073741824}"), "%s",
                       text);
    cr_assert_not_null(strstr(text, "\"level\":1"), "%s", text);
    cr_assert_not_null(strstr(text, "\"name\":\"PRESSURE_WARN\",\"ph\":\"i\","
                                    "\"s\":\"g\""), "%s", text);
    tl_done(tl);
    unlink(path);
}

Test(timeline, unwritable_path_is_an_io_error_naming_it)
{
    cg_timeline_t *tl = tl_new(0);
    cg_status_t st = cg_timeline_start(tl, "/nonexistent-dir/t.json", false);

    cr_assert_eq(st, CG_ERR_IO, "got %s", cg_status_string(st));
    cr_assert_not_null(strstr(cg_last_error(), "/nonexistent-dir/t.json"),
                       "message: %s", cg_last_error());
    cr_assert_eq(cg_timeline_running(tl), false, "running after a failure");
    tl_op(tl, "ignored"); /* a stopped timeline takes events silently */
    st = cg_timeline_start(tl, "", false);
    cr_assert_eq(st, CG_ERR_INVALID_PARAM, "empty path: %s",
                 cg_status_string(st));
    tl_done(tl);
}

typedef struct {
    cg_timeline_t *tl;
    atomic_int stop;
    int id;
} tl_race_t;

static void *tl_racer(void *arg)
{
    tl_race_t *r = arg;
    char name[32];

    for (int i = 0; !atomic_load(&r->stop); i++) {
        snprintf(name, sizeof(name), "t%d.%d", r->id, i % 300);
        tl_op(r->tl, name);
        cg_timeline_instant(r->tl, "OOM_EARLY_WARNING", NULL,
                            cg_timeline_now_ns());
        if (i % 64 == 0)
            cg_timeline_flush(r->tl);
    }
    return NULL;
}

Test(timeline, start_and_stop_race_with_event_threads, .timeout = 60)
{
    tl_race_t r[2];
    pthread_t th[2];
    cg_timeline_t *tl = tl_new(0);
    char path[4][256];

    for (int f = 0; f < 4; f++) {
        char tag[8];
        snprintf(tag, sizeof(tag), "race%d", f);
        tl_path(path[f], sizeof(path[f]), tag);
    }
    for (int i = 0; i < 2; i++) {
        r[i] = (tl_race_t){.tl = tl, .id = i};
        pthread_create(&th[i], NULL, tl_racer, &r[i]);
    }
    for (int k = 0; k < 40; k++) {
        cr_assert_eq(cg_timeline_start(tl, path[k % 4], k % 2), CG_OK, "%s",
                     cg_last_error());
        usleep(2000);
        if (k % 3 == 0)
            cg_timeline_stop(tl);
    }
    for (int i = 0; i < 2; i++) {
        atomic_store(&r[i].stop, 1);
        pthread_join(th[i], NULL);
    }
    cg_timeline_stop(tl);
    for (int f = 0; f < 4; f++) {
        cr_assert_eq(tl_check(path[f]), 0, "%s does not parse", path[f]);
        unlink(path[f]);
    }
    tl_done(tl);
}

/* The application's probe view: 1% free once squeezed. */
static cg_status_t tl_squeeze_probe(void *arg, uint64_t *free_p,
                                    uint64_t *total_p)
{
    if (atomic_load((atomic_int *)arg))
        *free_p = *total_p / 100;
    return CG_OK;
}

Test(timeline, governor_pressure_reaches_the_core_timeline, .timeout = 60)
{
    static atomic_int squeezed;
    char path[256], var[300], args[600];
    const char *env[] = {var, "CG_PROBE_INTERVAL=5ms", "CG_CYCLE_TIME=2ms",
                         "CG_LOG_LEVEL=none", "CG_TRANSPORT=socket",
                         "CG_SOCKET_IFNAME=lo", NULL};
    cg_ctx_params_t cp = {.field_mask = CG_CTX_PARAM_ENV |
                                        CG_CTX_PARAM_BOOTSTRAP |
                                        CG_CTX_PARAM_PROBE,
                          .env = env, .bootstrap = 1,
                          .probe_fn = tl_squeeze_probe,
                          .probe_arg = &squeezed};
    cg_hvd_core_h core;
    cg_ctx_h ctx;

    tl_path(path, sizeof(path), "gov");
    snprintf(var, sizeof(var), "CG_TIMELINE=%s", path);
    cr_assert_eq(cg_ctx_create(&cp, &ctx), CG_OK, "ctx: %s", cg_last_error());
    cr_assert_eq(cg_hvd_core_create(ctx, &core), CG_OK, "core: %s",
                 cg_last_error());
    usleep(30000);
    atomic_store(&squeezed, 1);
    usleep(100000); /* ~20 governor samples on the background thread */
    cg_hvd_core_destroy(core);
    cg_ctx_destroy(ctx);
    snprintf(args, sizeof(args), "instant %s PRESSURE_CRITICAL", path);
    cr_assert_eq(tl_checker(args), 0, "no PRESSURE_CRITICAL in %s", path);
    unlink(path);
}
