/* SPDX-License-Identifier: Apache-2.0 */
/* Units for cg_sock_list_ifnames (transport/sock_ifaddr.c): every
 * interface a CG_SOCKET_IFNAME spec selects, once each (the NCCL net
 * plugin's devices), with cg_sock_pick_addr's rules. */
#include <criterion/criterion.h>
#include <net/if.h>
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
