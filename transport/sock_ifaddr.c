/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Interface picking with NCCL_SOCKET_IFNAME semantics (CG_SOCKET_IFNAME):
 * prefix lists, '^' to exclude, '=' for exact names, automatic choice of a
 * non-loopback interface with loopback as the fallback; the list of every
 * selected interface (one NCCL net device each).
 * Layer: transport; calls core/base only.
 */
#include "transport/sock.h"

#include <ifaddrs.h>
#include <net/if.h>
#include <stdbool.h>
#include <stdio.h>
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

/* Pass 0: IPv4 only, pass 1: IPv6. With an empty spec, loopback is
 * skipped unless allow_lo. */
static const struct ifaddrs *cg__ifa_find(const struct ifaddrs *list,
                                          const char *spec, bool allow_lo)
{
    for (int pass = 0; pass < 2; pass++) {
        int family = (pass == 0) ? AF_INET : AF_INET6;
        for (const struct ifaddrs *ifa = list; ifa != NULL;
             ifa = ifa->ifa_next) {
            if (!cg__ifa_usable(ifa) || ifa->ifa_addr->sa_family != family)
                continue;
            if (spec[0] != '\0') {
                if (cg__ifname_matches(spec, ifa->ifa_name))
                    return ifa;
            } else if (allow_lo || !(ifa->ifa_flags & IFF_LOOPBACK)) {
                return ifa;
            }
        }
    }
    return NULL;
}

cg_status_t cg_sock_pick_addr(const char *ifname_spec, cg_sockaddr_t *addr_p,
                              char *ifname_out, size_t ifname_len)
{
    const char *spec = (ifname_spec != NULL) ? ifname_spec : "";
    const struct ifaddrs *ifa;
    struct ifaddrs *list = NULL;
    cg_sockaddr_t a;

    if (getifaddrs(&list) < 0)
        return cg_error_set(CG_ERR_IO, "getifaddrs failed: %m");
    ifa = cg__ifa_find(list, spec, false);
    if (ifa == NULL && spec[0] == '\0')
        ifa = cg__ifa_find(list, spec, true);
    if (ifa == NULL) {
        freeifaddrs(list);
        return cg_error_set(CG_ERR_NOT_FOUND,
                            "no up IPv4/IPv6 interface matches "
                            "CG_SOCKET_IFNAME '%s' (see 'ip addr' for "
                            "names; '^' excludes, '=' is exact)", spec);
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
    freeifaddrs(list);
    *addr_p = a;
    return CG_OK;
}

/* Is ifa selected by spec (pass allow_lo: loopback too when spec is ""). */
static bool cg__ifa_selected(const struct ifaddrs *ifa, const char *spec,
                             bool allow_lo)
{
    if (!cg__ifa_usable(ifa))
        return false;
    if (spec[0] != '\0')
        return cg__ifname_matches(spec, ifa->ifa_name);
    return allow_lo || !(ifa->ifa_flags & IFF_LOOPBACK);
}

cg_status_t cg_sock_list_ifnames(const char *ifname_spec, char *names,
                                 size_t len, int max, int *n_p)
{
    const char *spec = (ifname_spec != NULL) ? ifname_spec : "";
    struct ifaddrs *list = NULL;
    int n = 0;

    if (names == NULL || len == 0 || max < 1 || n_p == NULL)
        return cg_error_set(CG_ERR_INVALID_PARAM,
                            "cg_sock_list_ifnames: no room for names");
    if (getifaddrs(&list) < 0)
        return cg_error_set(CG_ERR_IO, "getifaddrs failed: %m");
    for (int pass = 0; pass < 2 && n == 0; pass++) {
        if (pass == 1 && spec[0] != '\0')
            break;
        for (const struct ifaddrs *ifa = list; ifa != NULL && n < max;
             ifa = ifa->ifa_next) {
            bool seen = false;
            if (!cg__ifa_selected(ifa, spec, pass == 1))
                continue;
            for (int i = 0; i < n && !seen; i++)
                seen = strncmp(names + (size_t)i * len, ifa->ifa_name,
                               len) == 0;
            if (!seen)
                snprintf(names + (size_t)n++ * len, len, "%s",
                         ifa->ifa_name);
        }
    }
    freeifaddrs(list);
    if (n == 0)
        return cg_error_set(CG_ERR_NOT_FOUND,
                            "no up IPv4/IPv6 interface matches "
                            "CG_SOCKET_IFNAME '%s' (see 'ip addr' for "
                            "names; '^' excludes, '=' is exact)", spec);
    *n_p = n;
    return CG_OK;
}
