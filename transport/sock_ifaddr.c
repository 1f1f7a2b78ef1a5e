/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Interface picking with NCCL_SOCKET_IFNAME semantics (CG_SOCKET_IFNAME):
 * prefix lists, '^' to exclude, '=' for exact names, and without a spec
 * NCCL's automatic choice (ib*, else all but docker*, lo* and virbr*, else
 * docker*, else loopback); the list of every selected interface (one NCCL
 * net device each).
 * Layer: transport; calls core/base only.
 */
#include "transport/sock.h"

#include <ifaddrs.h>
#include <net/if.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/error.h"

/* Does name match one entry of the comma list (prefix or exact)? */
static bool cg__ifname_in_list(const char *list, const char *name, bool exact)
{
    size_t name_len = strlen(name);
    const char *p = list;

    while (*p != '\0') {
        const char *end = strchr(p, ',');
        size_t n = (end != NULL) ? (size_t)(end - p) : strlen(p);
        if (n > 0) {
            if (exact ? (n == name_len && strncmp(p, name, n) == 0)
                      : (n <= name_len && strncmp(p, name, n) == 0))
                return true;
        }
        if (end == NULL)
            break;
        p = end + 1;
    }
    return false;
}

static bool cg__ifname_matches(const char *spec, const char *name)
{
    bool exclude = false, exact = false;

    if (spec[0] == '^') {
        exclude = true;
        spec++;
    }
    if (spec[0] == '=') {
        exact = true;
        spec++;
    }
    return cg__ifname_in_list(spec, name, exact) != exclude;
}

static bool cg__ifa_usable(const struct ifaddrs *ifa)
{
    if (ifa->ifa_addr == NULL || !(ifa->ifa_flags & IFF_UP))
        return false;
    if (ifa->ifa_addr->sa_family == AF_INET)
        return true;
    if (ifa->ifa_addr->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 =
            (const struct sockaddr_in6 *)ifa->ifa_addr;
        /* Link-local needs a scope on every peer: skip it as NCCL does. */
        return !IN6_IS_ADDR_LINKLOCAL(&in6->sin6_addr);
    }
    return false;
}

/* NCCL's automatic classes, best first (its ncclFindInterfaces without
 * NCCL_SOCKET_IFNAME: "ib", then "^docker,lo,virbr", then "docker", then
 * "lo"); virbr* is never chosen. */
enum { CG__IF_IB, CG__IF_OTHER, CG__IF_DOCKER, CG__IF_LO, CG__IF_NEVER };

static int cg__if_class(const char *name, bool loopback)
{
    if (loopback || strncmp(name, "lo", 2) == 0)
        return CG__IF_LO;
    if (strncmp(name, "virbr", 5) == 0)
        return CG__IF_NEVER;
    if (strncmp(name, "docker", 6) == 0)
        return CG__IF_DOCKER;
    return strncmp(name, "ib", 2) == 0 ? CG__IF_IB : CG__IF_OTHER;
}

int cg_sock_auto_select(const char *const *names, const bool *loopback,
                        int n, bool *chosen)
{
    int best = CG__IF_NEVER, count = 0;

    for (int i = 0; i < n; i++) {
        int c = cg__if_class(names[i], loopback != NULL && loopback[i]);
        if (c < best)
            best = c;
    }
    for (int i = 0; i < n; i++) {
        int c = cg__if_class(names[i], loopback != NULL && loopback[i]);
        chosen[i] = c == best && c != CG__IF_NEVER;
        count += chosen[i];
    }
    return count;
}

/* The usable interfaces of this host (at most CG__IFA_MAX), which of
 * them a spec selects (an empty spec: NCCL's automatic choice), and the
 * getifaddrs list they point into. */
#define CG__IFA_MAX 256
typedef struct cg__ifa_sel {
    struct ifaddrs *list;
    const struct ifaddrs *ifa[CG__IFA_MAX];
    const char *name[CG__IFA_MAX];
    bool lo[CG__IFA_MAX];
    bool chosen[CG__IFA_MAX];
    int n;
} cg__ifa_sel_t;

static void cg__ifa_sel_free(cg__ifa_sel_t *sel)
{
    freeifaddrs(sel->list);
    free(sel);
}

/* The selection of spec over this host's interfaces into *sel_p, which
 * cg__ifa_sel_free frees; an error when getifaddrs or the allocation
 * fails. */
static cg_status_t cg__ifa_select(const char *spec, cg__ifa_sel_t **sel_p)
{
    cg__ifa_sel_t *sel = malloc(sizeof(*sel));

    if (sel == NULL)
        return cg_error_set(CG_ERR_NO_MEMORY, "no memory for interfaces");
    if (getifaddrs(&sel->list) < 0) {
        free(sel);
        return cg_error_set(CG_ERR_IO, "getifaddrs failed: %m");
    }
    *sel_p = sel;
    sel->n = 0;
    for (const struct ifaddrs *ifa = sel->list;
         ifa != NULL && sel->n < CG__IFA_MAX; ifa = ifa->ifa_next) {
        if (!cg__ifa_usable(ifa))
            continue;
        sel->ifa[sel->n] = ifa;
        sel->name[sel->n] = ifa->ifa_name;
        sel->lo[sel->n] = (ifa->ifa_flags & IFF_LOOPBACK) != 0;
        sel->n++;
    }
    if (spec[0] == '\0') {
        cg_sock_auto_select(sel->name, sel->lo, sel->n, sel->chosen);
        return CG_OK;
    }
    for (int i = 0; i < sel->n; i++)
        sel->chosen[i] = cg__ifname_matches(spec, sel->name[i]);
    return CG_OK;
}

/* The error of a spec that selects nothing. */
static cg_status_t cg__ifa_none(const char *spec)
{
    return cg_error_set(CG_ERR_NOT_FOUND,
                        "no up IPv4/IPv6 interface matches "
                        "CG_SOCKET_IFNAME '%s' (see 'ip addr' for "
                        "names; '^' excludes, '=' is exact)", spec);
}

/* The first selected interface, IPv4 before IPv6; NULL if none. */
static const struct ifaddrs *cg__ifa_find(const cg__ifa_sel_t *sel)
{
    for (int pass = 0; pass < 2; pass++) {
        int family = (pass == 0) ? AF_INET : AF_INET6;
        for (int i = 0; i < sel->n; i++)
            if (sel->chosen[i] && sel->ifa[i]->ifa_addr->sa_family == family)
                return sel->ifa[i];
    }
    return NULL;
}

cg_status_t cg_sock_pick_addr(const char *ifname_spec, cg_sockaddr_t *addr_p,
                              char *ifname_out, size_t ifname_len)
{
    const char *spec = (ifname_spec != NULL) ? ifname_spec : "";
    const struct ifaddrs *ifa;
    cg__ifa_sel_t *sel;
    cg_sockaddr_t a;
    cg_status_t st = cg__ifa_select(spec, &sel);

    if (st != CG_OK)
        return st;
    ifa = cg__ifa_find(sel);
    if (ifa == NULL) {
        cg__ifa_sel_free(sel);
        return cg__ifa_none(spec);
    }
    memset(&a, 0, sizeof(a));
    if (ifa->ifa_addr->sa_family == AF_INET) {
        memcpy(&a.u.in, ifa->ifa_addr, sizeof(a.u.in));
        a.len = sizeof(a.u.in);
    } else {
        memcpy(&a.u.in6, ifa->ifa_addr, sizeof(a.u.in6));
        a.len = sizeof(a.u.in6);
    }
    cg_sockaddr_set_port(&a, 0);
    if (ifname_out != NULL && ifname_len > 0)
        snprintf(ifname_out, ifname_len, "%s", ifa->ifa_name);
    cg__ifa_sel_free(sel);
    *addr_p = a;
    return CG_OK;
}

cg_status_t cg_sock_list_ifnames(const char *ifname_spec, char *names,
                                 size_t len, int max, int *n_p)
{
    const char *spec = (ifname_spec != NULL) ? ifname_spec : "";
    cg__ifa_sel_t *sel;
    cg_status_t st;
    int n = 0;

    if (names == NULL || len == 0 || max < 1 || n_p == NULL)
        return cg_error_set(CG_ERR_INVALID_PARAM,
                            "cg_sock_list_ifnames: no room for names");
    st = cg__ifa_select(spec, &sel);
    if (st != CG_OK)
        return st;
    for (int k = 0; k < sel->n && n < max; k++) {
        bool seen = false;
        if (!sel->chosen[k])
            continue;
        for (int i = 0; i < n && !seen; i++)
            seen = strncmp(names + (size_t)i * len, sel->name[k], len) == 0;
        if (!seen)
            snprintf(names + (size_t)n++ * len, len, "%s", sel->name[k]);
    }
    cg__ifa_sel_free(sel);
    if (n == 0)
        return cg__ifa_none(spec);
    *n_p = n;
    return CG_OK;
}
