/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The host memory probe: /proc/meminfo MemAvailable/MemTotal, bounded by
 * the cgroup v2 memory.max/memory.current of this process's cgroup and its
 * ancestors. Every path is injectable (cg_host_probe_t) so tests can feed
 * fake files. Layer: core/governor; calls core/base (error) and libc only.
 */
#include "core/governor/probe.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/error.h"

#define CG__PATH_MAX 4096
#define CG__CGROUP_DEPTH_MAX 32

/* Reads a small text file into buf (NUL-terminated). Returns 0, or the
 * errno of the failure. */
static int cg__read_text(const char *path, char *buf, size_t len)
{
    FILE *f = fopen(path, "re");
    size_t n;
    int err;

    if (f == NULL)
        return errno;
    n = fread(buf, 1, len - 1, f);
    err = ferror(f) ? EIO : 0;
    fclose(f);
    buf[n] = '\0';
    return err;
}

/* Finds "<key>: <n> kB" in meminfo text; false when absent. */
static bool cg__meminfo_field(const char *text, const char *key,
                              uint64_t *bytes_p)
{
    size_t klen = strlen(key);
    const char *p = text;
    unsigned long long kb;
    char *end;

    for (;;) {
        if (strncmp(p, key, klen) == 0 && p[klen] == ':')
            break;
        p = strchr(p, '\n');
        if (p == NULL)
            return false;
        p++;
    }
    errno = 0;
    kb = strtoull(p + klen + 1, &end, 10);
    if (errno != 0 || end == p + klen + 1)
        return false;
    *bytes_p = (uint64_t)kb * 1024;
    return true;
}

static cg_status_t cg__read_meminfo(const char *path, uint64_t *avail_p,
                                    uint64_t *total_p)
{
    char text[8192];
    int err = cg__read_text(path, text, sizeof(text));

    if (err != 0)
        return cg_error_set(CG_ERR_IO, "host memory probe: cannot read %s: "
                            "%s", path, strerror(err));
    if (!cg__meminfo_field(text, "MemTotal", total_p) ||
        !cg__meminfo_field(text, "MemAvailable", avail_p))
        return cg_error_set(CG_ERR_IO, "host memory probe: %s has no "
                            "MemTotal or MemAvailable line (kernel before "
                            "3.14?)", path);
    return CG_OK;
}

/* Reads a cgroup value file: a number, or "max" (-> UINT64_MAX).
 * CG_ERR_NOT_FOUND when the file does not exist. */
static cg_status_t cg__read_cgroup_value(const char *dir, const char *name,
                                         uint64_t *v_p)
{
    char path[CG__PATH_MAX], text[64], *end;
    unsigned long long v;
    int err;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    err = cg__read_text(path, text, sizeof(text));
    if (err == ENOENT || err == ENOTDIR)
        return CG_ERR_NOT_FOUND;
    if (err != 0)
        return cg_error_set(CG_ERR_IO, "host memory probe: cannot read %s: "
                            "%s", path, strerror(err));
    if (strncmp(text, "max", 3) == 0 && (text[3] == '\n' || !text[3])) {
        *v_p = UINT64_MAX;
        return CG_OK;
    }
    errno = 0;
    v = strtoull(text, &end, 10);
    if (errno != 0 || end == text || (*end != '\n' && *end != '\0'))
        return cg_error_set(CG_ERR_IO, "host memory probe: %s holds '%.20s', "
                            "not a number or 'max'", path, text);
    *v_p = v;
    return CG_OK;
}

/* The cgroup v2 directory of this process: root + the "0::" path. */
static bool cg__cgroup_dir(const cg_host_probe_t *hp, const char *root,
                           char *dir, size_t len)
{
    const char *proc = hp->proc_cgroup_path != NULL ? hp->proc_cgroup_path
                                                    : "/proc/self/cgroup";
    char text[4096], *line, *nl;

    if (hp->cgroup_dir != NULL) {
        snprintf(dir, len, "%s", hp->cgroup_dir);
        return true;
    }
    if (cg__read_text(proc, text, sizeof(text)) != 0)
        return false;
    for (line = text; line != NULL && *line; line = nl ? nl + 1 : NULL) {
        nl = strchr(line, '\n');
        if (nl != NULL)
            *nl = '\0';
        if (strncmp(line, "0::", 3) == 0) {
            /* "/" is the root itself. */
            snprintf(dir, len, "%s%s", root,
                     strcmp(line + 3, "/") == 0 ? "" : line + 3);
            return true;
        }
    }
    return false;
}

/* Bounds free/total by one cgroup directory's memory.max/current. */
static cg_status_t cg__cgroup_bound(const char *dir, uint64_t *free_p,
                                    uint64_t *total_p)
{
    uint64_t max, cur, room;
    cg_status_t status = cg__read_cgroup_value(dir, "memory.max", &max);

    if (status == CG_ERR_NOT_FOUND || (status == CG_OK && max == UINT64_MAX))
        return CG_OK;
    if (status != CG_OK)
        return status;
    status = cg__read_cgroup_value(dir, "memory.current", &cur);
    if (status == CG_ERR_NOT_FOUND)
        cur = 0;
    else if (status != CG_OK)
        return status;
    room = max > cur ? max - cur : 0;
    if (room < *free_p)
        *free_p = room;
    if (max < *total_p)
        *total_p = max;
    return CG_OK;
}

cg_status_t cg_host_probe_read(void *arg, uint64_t *free_p, uint64_t *total_p)
{
    const cg_host_probe_t *hp = arg;
    const char *root = hp->cgroup_root != NULL ? hp->cgroup_root
                                               : "/sys/fs/cgroup";
    size_t root_len = strlen(root);
    uint64_t free_b, total_b;
    char dir[CG__PATH_MAX], *slash;
    cg_status_t status;
    int depth;

    status = cg__read_meminfo(hp->meminfo_path != NULL ? hp->meminfo_path
                                                       : "/proc/meminfo",
                              &free_b, &total_b);
    if (status != CG_OK)
        return status;
    if (!cg__cgroup_dir(hp, root, dir, sizeof(dir)))
        goto out;
    /* The directory, then its ancestors while they stay under root. */
    for (depth = 0; depth < CG__CGROUP_DEPTH_MAX; depth++) {
        status = cg__cgroup_bound(dir, &free_b, &total_b);
        if (status != CG_OK)
            return status;
        if (strncmp(dir, root, root_len) != 0 || strlen(dir) <= root_len)
            break;
        slash = strrchr(dir, '/');
        if (slash == NULL || (size_t)(slash - dir) < root_len)
            break;
        *slash = '\0';
    }
out:
    if (free_b > total_b)
        free_b = total_b;
    *free_p = free_b;
    *total_p = total_b;
    return CG_OK;
}

void cg_host_probe_init(cg_host_probe_t *hp, cg_mem_probe_t *probe_p)
{
    probe_p->name = "host";
    probe_p->kind = CG_MEM_KIND_HOST;
    probe_p->device = NULL;
    probe_p->read = cg_host_probe_read;
    probe_p->arg = hp;
}
