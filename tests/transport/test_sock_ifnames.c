/* SPDX-License-Identifier: Apache-2.0 */
/* Units for cg_sock_list_ifnames (transport/sock_ifaddr.c): every
 * interface a CG_SOCKET_IFNAME spec selects, once each (the NCCL net
 * plugin's devices), with cg_sock_pick_addr's rules; and the choice
 * without a spec (cg_sock_auto_select), NCCL's, over lists of names. */
#include <criterion/criterion.h>
#include <net/if.h>
#include <stdbool.h>
#include <string.h>

#include "core/base/error.h"
#include "transport/sock.h"

Test(sock_ifnames, exact_prefix_exclude_and_none)
{
    char names[8][IF_NAMESIZE];
    int n = -1;

    cr_assert_eq(cg_sock_list_ifnames("=lo", &names[0][0], IF_NAMESIZE, 8,
                                      &n), CG_OK);
    cr_assert_eq(n, 1, "lo has IPv4 and IPv6 addresses: listed once, got %d",
                 n);
    cr_assert_str_eq(names[0], "lo");
    n = 0;
    cg_status_t st = cg_sock_list_ifnames("^lo", &names[0][0], IF_NAMESIZE,
                                          8, &n);
    cr_assert(st == CG_OK || st == CG_ERR_NOT_FOUND, "status %d", st);
    for (int i = 0; i < n; i++)
        cr_assert_str_neq(names[i], "lo");
    n = -1;
    cr_assert_eq(cg_sock_list_ifnames("=nosuch0", &names[0][0], IF_NAMESIZE,
                                      8, &n), CG_ERR_NOT_FOUND);
    cr_assert_eq(n, -1, "n untouched on failure");
}

Test(sock_ifnames, empty_spec_matches_pick_addr)
{
    char names[8][IF_NAMESIZE], first[IF_NAMESIZE];
    cg_sockaddr_t a;
    int n = 0;

    cr_assert_eq(cg_sock_list_ifnames("", &names[0][0], IF_NAMESIZE, 8, &n),
                 CG_OK);
    cr_assert_geq(n, 1);
    cr_assert_eq(cg_sock_pick_addr("", &a, first, sizeof(first)), CG_OK);
    int found = 0;
    for (int i = 0; i < n; i++)
        found |= strcmp(names[i], first) == 0;
    cr_assert(found, "pick_addr's choice %s is among the listed", first);
    cr_assert_eq(cg_sock_list_ifnames("", &names[0][0], IF_NAMESIZE, 0, &n),
                 CG_ERR_INVALID_PARAM);
}

/* The choice without a spec, as NCCL's ncclFindInterfaces makes it: ib*
 * first, else all but docker*, lo* and virbr*, else docker*, else
 * loopback; virbr* never. One entry per address, so names repeat. */
static int auto_pick(const char *const *names, const bool *lo, int n,
                     const char *want)
{
    bool chosen[8];
    char got[128] = "";
    int k = cg_sock_auto_select(names, lo, n, chosen);

    for (int i = 0; i < n; i++)
        if (chosen[i]) {
            strcat(got, got[0] != '\0' ? "," : "");
            strcat(got, names[i]);
        }
    cr_expect_str_eq(got, want, "chose '%s', want '%s'", got, want);
    return k;
}

Test(sock_ifnames, auto_select_like_nccl)
{
    const char *a[] = {"lo", "eth0", "docker0", "virbr0", "eth0", "veth1"};
    const bool alo[] = {true, false, false, false, false, false};
    const char *b[] = {"lo", "docker0", "virbr0", "docker1"};
    const char *c[] = {"lo", "virbr0"};
    const char *d[] = {"virbr0"};
    const char *e[] = {"eth0", "ib1", "lo", "ib0"};
    const char *f[] = {"loop9", "wlan0"}; /* lo* is NCCL's prefix */
    const char *g[] = {"lan0", "docker0"}; /* flagged loopback */
    const bool glo[] = {true, false};

    cr_expect_eq(auto_pick(a, alo, 6, "eth0,eth0,veth1"), 3);
    cr_expect_eq(auto_pick(b, NULL, 4, "docker0,docker1"), 2);
    cr_expect_eq(auto_pick(c, NULL, 2, "lo"), 1);
    cr_expect_eq(auto_pick(d, NULL, 1, ""), 0);
    cr_expect_eq(auto_pick(e, NULL, 4, "ib1,ib0"), 2);
    cr_expect_eq(auto_pick(f, NULL, 2, "wlan0"), 1);
    cr_expect_eq(auto_pick(g, glo, 2, "docker0"), 1);
    cr_expect_eq(auto_pick(a, alo, 0, ""), 0);
}
