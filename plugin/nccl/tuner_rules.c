/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The tuner's CSV rules, one per line:
 *   collective,min_bytes,max_bytes,algorithm,protocol,channels,nNodes,nRanks
 * collective: broadcast, reduce, allgather, reducescatter, allreduce;
 * algorithm: tree, ring, collnet_direct, collnet_chain, nvls, nvls_tree,
 * pat; protocol: ll, ll128, simple; sizes inclusive (bytes or 64K, 4M);
 * channels, nNodes, nRanks: -1 for NCCL's / any (the last two may be
 * left out). '#' starts a comment. The first matching rule wins. A file
 * is taken whole or not at all: a line that does not parse refuses the
 * file (the caller warns, naming file and line, and runs without rules).
 * Layer: plugin/nccl; calls core/base.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/base/error.h"
#include "core/base/parse.h"
#include "plugin/nccl/tuner_impl.h"

#define CG_TN_RULES_MAX 4096

static const char *const cg__tn_colls[] = {
    "broadcast", "reduce", "allgather", "reducescatter", "allreduce", NULL};
static const char *const cg__tn_algos[] = {
    "tree", "ring", "collnet_direct", "collnet_chain", "nvls", "nvls_tree",
    "pat", NULL};
static const char *const cg__tn_protos[] = {"ll", "ll128", "simple", NULL};

static int cg__tn_name(const char *const *names, const char *s)
{
    for (int i = 0; names[i] != NULL; i++)
        if (strcasecmp(names[i], s) == 0)
            return i;
    return -1;
}

static char *cg__tn_trim(char *s)
{
    char *e;

    while (*s == ' ' || *s == '\t')
        s++;
    e = s + strlen(s);
    while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\n' ||
                     e[-1] == '\r'))
        *--e = '\0';
    return s;
}

static int cg__tn_long(const char *s, long *v_p)
{
    int64_t v;

    if (!cg_parse_int(s, -1, 1 << 30, &v))
        return 0;
    *v_p = (long)v;
    return 1;
}

/* 1 with *r filled; 0 with why set. */
static int cg__tn_parse_line(char *line, cg__tn_rule_t *r, const char **why)
{
    char *f[8], *save = NULL;
    int n = 0;
    long ch;

    for (char *tok = strtok_r(line, ",", &save); tok != NULL;
         tok = strtok_r(NULL, ",", &save)) {
        if (n == 8) {
            *why = "more than 8 fields";
            return 0;
        }
        f[n++] = cg__tn_trim(tok);
    }
    if (n < 6) {
        *why = "fewer than 6 fields";
        return 0;
    }
    r->coll = cg__tn_name(cg__tn_colls, f[0]);
    r->algo = cg__tn_name(cg__tn_algos, f[3]);
    r->proto = cg__tn_name(cg__tn_protos, f[4]);
    r->nnodes = r->nranks = -1;
    if (r->coll < 0 || r->algo < 0 || r->proto < 0) {
        *why = "unknown collective, algorithm or protocol";
        return 0;
    }
    if (!cg_parse_size(f[1], &r->min_bytes) ||
        !cg_parse_size(f[2], &r->max_bytes) || r->min_bytes > r->max_bytes) {
        *why = "bad size range";
        return 0;
    }
    if (!cg__tn_long(f[5], &ch) || ch == 0 ||
        (n > 6 && !cg__tn_long(f[6], &r->nnodes)) ||
        (n > 7 && !cg__tn_long(f[7], &r->nranks))) {
        *why = "channels, nNodes and nRanks must be -1 or positive";
        return 0;
    }
    r->channels = (int)ch;
    return 1;
}

cg_status_t cg__tn_rules_load(const char *path, const cg_log_t *log,
                             cg__tn_rule_t **rules_p, int *n_p)
{
    cg__tn_rule_t *rules;
    char line[512];
    int n = 0, lineno = 0;
    cg_status_t st = CG_OK;
    FILE *f = fopen(path, "r");

    if (f == NULL)
        return cg_error_set(CG_ERR_IO, "cannot open %s: %m", path);
    rules = calloc(CG_TN_RULES_MAX, sizeof(*rules));
    if (rules == NULL) {
        fclose(f);
        return cg_error_set(CG_ERR_NO_MEMORY, "no memory for tuner rules");
    }
    while (st == CG_OK && fgets(line, sizeof(line), f) != NULL) {
        const char *why = NULL;
        char *hash = strchr(line, '#'), *s;
        lineno++;
        if (hash != NULL)
            *hash = '\0';
        s = cg__tn_trim(line);
        if (*s == '\0')
            continue;
        if (n == CG_TN_RULES_MAX) {
            cg_warn(log, "%s:%d: more than %d rules; the rest are ignored",
                    path, lineno, CG_TN_RULES_MAX);
            break;
        }
        if (cg__tn_parse_line(s, &rules[n], &why))
            n++;
        else
            st = cg_error_set(CG_ERR_CONFIG, "%s:%d: %s", path, lineno, why);
    }
    if (st == CG_OK && ferror(f))
        st = cg_error_set(CG_ERR_IO, "cannot read %s: %m", path);
    fclose(f);
    if (st != CG_OK) {
        free(rules);
        return st;
    }
    *rules_p = rules;
    *n_p = n;
    return CG_OK;
}

const cg__tn_rule_t *cg__tn_rules_match(const cg__tn_rule_t *rules, int n,
                                      int coll, size_t nbytes, size_t nnodes,
                                      size_t nranks)
{
    for (int i = 0; i < n; i++) {
        const cg__tn_rule_t *r = &rules[i];
        if (r->coll == coll && nbytes >= r->min_bytes &&
            nbytes <= r->max_bytes &&
            (r->nnodes < 0 || (size_t)r->nnodes == nnodes) &&
            (r->nranks < 0 || (size_t)r->nranks == nranks))
            return r;
    }
    return NULL;
}
