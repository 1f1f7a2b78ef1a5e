/* SPDX-License-Identifier: Apache-2.0 */
/* Units for core/governor/probe_host.c and core/governor/probe_cuda.c: the real host probe
 * against /proc/meminfo, fake meminfo and cgroup v2 trees (limit, "max",
 * over the limit, an ancestor's limit, "0::" resolution), unreadable and
 * malformed files, and the CUDA probe failing cleanly without a GPU. */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/governor/probe.h"

#define KiB (1ull << 10)
#define MiB (1ull << 20)
#define GiB (1ull << 30)

static char tmp[64];

static void tmp_init(void)
{
    snprintf(tmp, sizeof(tmp), "/tmp/cg_probe_XXXXXX");
    cr_assert_not_null(mkdtemp(tmp));
}

static void tmp_fini(void)
{
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
    cr_expect_eq(system(cmd), 0);
}

TestSuite(probe, .init = tmp_init, .fini = tmp_fini, .timeout = 10);

/* Writes text to tmp/rel (creating the directories on the way). */
static void put(const char *rel, const char *text)
{
    char path[256];
    char *slash;
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s", tmp, rel);
    for (slash = strchr(path + strlen(tmp) + 1, '/'); slash != NULL;
         slash = strchr(slash + 1, '/')) {
        *slash = '\0';
        mkdir(path, 0700);
        *slash = '/';
    }
    f = fopen(path, "w");
    cr_assert_not_null(f, "%s", path);
    fputs(text, f);
    fclose(f);
}

static char *dup_path(const char *rel)
{
    char *p = malloc(256);
    snprintf(p, 256, "%s/%s", tmp, rel);
    return p;
}

#define MEMINFO "MemTotal:       16777216 kB\nMemFree:  1000 kB\n" \
                "MemAvailable:    8388608 kB\nBuffers: 1 kB\n"

static cg_status_t read_fake(cg_host_probe_t *hp, uint64_t *f, uint64_t *t)
{
    cg_mem_probe_t probe;
    cg_host_probe_init(hp, &probe);
    cr_assert_eq(probe.kind, CG_MEM_KIND_HOST);
    return probe.read(probe.arg, f, t);
}

Test(probe, meminfo_alone_without_a_cgroup)
{
    char *mi = dup_path("meminfo"), *cg = dup_path("none");
    char *self = dup_path("self_cgroup");
    cg_host_probe_t hp = {mi, NULL, cg, self};
    uint64_t f = 0, t = 0;

    put("meminfo", MEMINFO);
    put("self_cgroup", "1:memory:/x\n"); /* cgroup v1 only */
    cr_assert_eq(read_fake(&hp, &f, &t), CG_OK, "%s", cg_last_error());
    cr_assert_eq(f, 8 * GiB, "free %llu", (unsigned long long)f);
    cr_assert_eq(t, 16 * GiB, "total %llu", (unsigned long long)t);
    free(mi);
    free(cg);
    free(self);
}

Test(probe, cgroup_limit_bounds_free_and_total)
{
    char *mi = dup_path("meminfo"), *dir = dup_path("cg/job");
    cg_host_probe_t hp = {mi, dir, NULL, NULL};
    uint64_t f = 0, t = 0;

    put("meminfo", MEMINFO);
    put("cg/job/memory.max", "4294967296\n");     /* 4 GiB */
    put("cg/job/memory.current", "3221225472\n"); /* 3 GiB */
    cr_assert_eq(read_fake(&hp, &f, &t), CG_OK, "%s", cg_last_error());
    cr_assert_eq(f, 1 * GiB, "free %llu", (unsigned long long)f);
    cr_assert_eq(t, 4 * GiB, "total %llu", (unsigned long long)t);
    put("cg/job/memory.max", "max\n");
    cr_assert_eq(read_fake(&hp, &f, &t), CG_OK, "%s", cg_last_error());
    cr_assert_eq(f, 8 * GiB, "unlimited: free %llu", (unsigned long long)f);
    cr_assert_eq(t, 16 * GiB);
    put("cg/job/memory.max", "1073741824\n"); /* current above max */
    cr_assert_eq(read_fake(&hp, &f, &t), CG_OK, "%s", cg_last_error());
    cr_assert_eq(f, 0, "over the limit: free %llu", (unsigned long long)f);
    cr_assert_eq(t, 1 * GiB);
    free(mi);
    free(dir);
}

Test(probe, own_cgroup_found_from_proc_and_ancestors_bound_it)
{
    char *mi = dup_path("meminfo"), *root = dup_path("sys");
    char *self = dup_path("self_cgroup");
    cg_host_probe_t hp = {mi, NULL, root, self};
    uint64_t f = 0, t = 0;

    put("meminfo", MEMINFO);
    put("self_cgroup", "1:name=systemd:/a/b\n0::/a/b\n");
    put("sys/a/b/memory.max", "max\n");
    put("sys/a/b/memory.current", "100\n");
    put("sys/a/memory.max", "2147483648\n");     /* 2 GiB on the parent */
    put("sys/a/memory.current", "1610612736\n"); /* 1.5 GiB */
    cr_assert_eq(read_fake(&hp, &f, &t), CG_OK, "%s", cg_last_error());
    cr_assert_eq(f, 512 * MiB, "free %llu", (unsigned long long)f);
    cr_assert_eq(t, 2 * GiB, "total %llu", (unsigned long long)t);
    free(mi);
    free(root);
    free(self);
}

Test(probe, unreadable_or_malformed_files_are_errors_naming_them)
{
    char *mi = dup_path("meminfo"), *dir = dup_path("cg");
    cg_host_probe_t hp = {mi, dir, NULL, NULL};
    uint64_t f = 0, t = 0;

    cr_assert_eq(read_fake(&hp, &f, &t), CG_ERR_IO);
    cr_assert(strstr(cg_last_error(), mi) != NULL, "%s", cg_last_error());
    put("meminfo", "MemTotal: 1000 kB\nMemFree: 10 kB\n");
    cr_assert_eq(read_fake(&hp, &f, &t), CG_ERR_IO);
    cr_assert(strstr(cg_last_error(), "MemAvailable") != NULL, "%s",
              cg_last_error());
    put("meminfo", MEMINFO);
    put("cg/memory.max", "lots\n");
    cr_assert_eq(read_fake(&hp, &f, &t), CG_ERR_IO);
    cr_assert(strstr(cg_last_error(), "memory.max holds 'lots") != NULL,
              "%s", cg_last_error());
    free(mi);
    free(dir);
}

/* Reads one "<key>: <n> kB" line of the real /proc/meminfo. */
static uint64_t meminfo_bytes(const char *key)
{
    char line[256];
    unsigned long long kb = 0;
    FILE *f = fopen("/proc/meminfo", "r");
    size_t n = strlen(key);

    cr_assert_not_null(f);
    while (fgets(line, sizeof(line), f) != NULL)
        if (strncmp(line, key, n) == 0 && line[n] == ':')
            sscanf(line + n + 1, "%llu", &kb);
    fclose(f);
    return (uint64_t)kb * 1024;
}

Test(probe, real_host_values_are_plausible)
{
    cg_host_probe_t hp = {NULL, NULL, NULL, NULL};
    uint64_t f = 0, t = 0, total = meminfo_bytes("MemTotal");
    uint64_t avail = meminfo_bytes("MemAvailable");

    cr_assert_eq(read_fake(&hp, &f, &t), CG_OK, "%s", cg_last_error());
    cr_log_info("host probe: free %llu MiB of %llu MiB (MemAvailable %llu "
                "MiB, MemTotal %llu MiB)", (unsigned long long)(f / MiB),
                (unsigned long long)(t / MiB),
                (unsigned long long)(avail / MiB),
                (unsigned long long)(total / MiB));
    cr_assert_gt(t, 0);
    cr_assert_leq(f, t, "free %llu > total %llu", (unsigned long long)f,
                  (unsigned long long)t);
    cr_assert_leq(t, total, "total above MemTotal");
    if (t == total) {
        /* no cgroup limit: free tracks MemAvailable within 5% of total */
        uint64_t d = f > avail ? f - avail : avail - f;
        cr_assert_leq(d, total / 20, "free %llu vs MemAvailable %llu",
                      (unsigned long long)f, (unsigned long long)avail);
    } else {
        cr_assert_leq(f, avail + total / 20, "cgroup-bounded free");
    }
}
