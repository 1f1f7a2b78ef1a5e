/* SPDX-License-Identifier: Apache-2.0 */
/* Units for transport/sock.c and sock_ifaddr.c: interface picking with
 * NCCL_SOCKET_IFNAME syntax, address strings and packing, and loopback
 * listen/connect/accept with partial and deadline-bounded I/O. */
#include <criterion/criterion.h>
#include <string.h>
#include <unistd.h>

#include "tp_test_util.h"
#include "transport/sock.h"

Test(sock, ifname_prefix_exact_and_exclude)
{
    cg_sockaddr_t a;
    char name[32], str[CG_SOCKADDR_STRLEN];

    cr_assert_eq(cg_sock_pick_addr("lo", &a, name, sizeof(name)), CG_OK);
    cr_assert_str_eq(name, "lo");
    cr_assert_str_eq(cg_sockaddr_str(&a, str, sizeof(str)), "127.0.0.1:0");
    cr_assert_eq(cg_sock_pick_addr("=lo", &a, name, sizeof(name)), CG_OK);
    cr_assert_str_eq(name, "lo");
    cr_assert_eq(cg_sock_pick_addr("nosuch,l", &a, name, sizeof(name)), CG_OK,
                 "second list entry is a prefix of lo");
    cr_assert_str_eq(name, "lo");
    cr_assert_eq(cg_sock_pick_addr("=l", &a, name, sizeof(name)),
                 CG_ERR_NOT_FOUND, "exact 'l' must not match 'lo'");
    cr_assert(strstr(cg_last_error(), "'=l'") != NULL, "%s", cg_last_error());
    if (cg_sock_pick_addr("^lo", &a, name, sizeof(name)) == CG_OK)
        cr_assert_str_neq(name, "lo", "excluded lo was picked");
}

Test(sock, automatic_choice_prefers_non_loopback_then_falls_back)
{
    cg_sockaddr_t a, b;
    char name[32], name2[32];

    cr_assert_eq(cg_sock_pick_addr(NULL, &a, name, sizeof(name)), CG_OK);
    cr_assert_eq(cg_sock_pick_addr("", &b, name2, sizeof(name2)), CG_OK);
    cr_assert_str_eq(name, name2);
    if (cg_sock_pick_addr("^lo", &b, name2, sizeof(name2)) == CG_OK)
        cr_assert_str_neq(name, "lo", "lo chosen while %s is up", name2);
    else
        cr_assert_str_eq(name, "lo");
    cr_assert_eq(cg_sockaddr_port(&a), 0);
}

Test(sock, resolve_str_and_pack_round_trip)
{
    cg_sockaddr_t a, b;
    uint8_t packed[CG_SOCKADDR_PACKED_SIZE];
    char s1[CG_SOCKADDR_STRLEN], s2[CG_SOCKADDR_STRLEN];

    cr_assert_eq(cg_sock_resolve("127.0.0.1", 4242, &a), CG_OK);
    cr_assert_str_eq(cg_sockaddr_str(&a, s1, sizeof(s1)), "127.0.0.1:4242");
    cg_sockaddr_pack(&a, packed);
    cr_assert_eq(cg_sockaddr_unpack(packed, &b), CG_OK);
    cr_assert_str_eq(cg_sockaddr_str(&b, s2, sizeof(s2)), s1);
    cr_assert_eq(cg_sock_resolve("::1", 80, &a), CG_OK);
    cr_assert_str_eq(cg_sockaddr_str(&a, s1, sizeof(s1)), "[::1]:80");
    cg_sockaddr_pack(&a, packed);
    cr_assert_eq(cg_sockaddr_unpack(packed, &b), CG_OK);
    cr_assert_str_eq(cg_sockaddr_str(&b, s2, sizeof(s2)), "[::1]:80");
    packed[0] = 5;
    cr_assert_eq(cg_sockaddr_unpack(packed, &b), CG_ERR_INVALID_PARAM);
    cr_assert_eq(cg_sock_resolve("127.0.0.1", 70000, &a),
                 CG_ERR_INVALID_PARAM);
    cr_assert_eq(cg_sock_resolve("no-such-host.invalid", 1, &a),
                 CG_ERR_NOT_FOUND);
}

/* A connected loopback pair: *c connector side, *s accepted side. */
static void loop_pair(int *c, int *s)
{
    cg_sockaddr_t bind_addr, bound;
    uint64_t end = cg_deadline_ns(tp_scaled_ns(5000));
    int lfd;

    cr_assert_eq(cg_sock_resolve("127.0.0.1", 0, &bind_addr), CG_OK);
    cr_assert_eq(cg_sock_listen(&bind_addr, 4, &lfd, &bound), CG_OK);
    cr_assert_neq(cg_sockaddr_port(&bound), 0, "ephemeral port not set");
    cr_assert_eq(cg_sock_connect_start(&bound, c), CG_OK);
    while (cg_sock_accept(lfd, s, NULL) == CG_INPROGRESS)
        cr_assert_lt(cg_now_ns(), end, "accept timed out");
    while (cg_sock_connect_check(*c) == CG_INPROGRESS)
        cr_assert_lt(cg_now_ns(), end, "connect timed out");
    cg_sock_tune(*c, 2000000000ull);
    cg_sock_close(lfd);
}

Test(sock, send_all_recv_all_and_partial_io)
{
    char out[1000], in[1000];
    size_t done = 0;
    int c, s;

    loop_pair(&c, &s);
    tp_fill(out, sizeof(out), 3);
    cr_assert_eq(cg_sock_recv_some(s, in, sizeof(in), &done), CG_OK);
    cr_assert_eq(done, 0, "nothing sent yet, got %zu", done);
    cr_assert_eq(cg_sock_send_all(c, out, sizeof(out), cg_deadline_ns(1e9)),
                 CG_OK);
    cr_assert_eq(cg_sock_recv_all(s, in, sizeof(in), cg_deadline_ns(1e9)),
                 CG_OK);
    cr_assert_eq(tp_check(in, sizeof(in), 3), (size_t)-1);
    cr_assert_eq(cg_sock_recv_all(s, in, 1, cg_deadline_ns(50000000)),
                 CG_ERR_TIMEOUT);
    cr_assert(strstr(cg_last_error(), "0 of 1 bytes") != NULL, "%s",
              cg_last_error());
    cg_sock_close(c);
    cr_assert_eq(cg_sock_recv_all(s, in, 1, cg_deadline_ns(1e9)),
                 CG_ERR_PEER_RESET, "%s", cg_last_error());
    int eof = 0;
    done = 0;
    cr_assert_eq(cg_sock_recv_avail(s, in, 1, &done, &eof), CG_OK);
    cr_assert_eq(eof, 1, "orderly EOF not reported");
    cr_assert_eq(done, 0);
    /* The first send after the FIN is accepted locally; the peer's RST
     * turns the next one into a reset. */
    (void)cg_sock_send_all(s, out, sizeof(out), cg_deadline_ns(1e9));
    usleep(10000);
    cr_assert_eq(cg_sock_send_all(s, out, sizeof(out), cg_deadline_ns(1e9)),
                 CG_ERR_PEER_RESET, "%s", cg_last_error());
    cg_sock_close(s);
}

Test(sock, connect_to_closed_port_is_unreachable)
{
    cg_sockaddr_t bind_addr, bound;
    uint64_t end = cg_deadline_ns(tp_scaled_ns(5000));
    cg_status_t st;
    int lfd, fd;

    cr_assert_eq(cg_sock_resolve("127.0.0.1", 0, &bind_addr), CG_OK);
    cr_assert_eq(cg_sock_listen(&bind_addr, 1, &lfd, &bound), CG_OK);
    cg_sock_close(lfd);
    st = cg_sock_connect_start(&bound, &fd);
    if (st == CG_OK) {
        while ((st = cg_sock_connect_check(fd)) == CG_INPROGRESS)
            cr_assert_lt(cg_now_ns(), end);
        cg_sock_close(fd);
    }
    cr_assert_eq(st, CG_ERR_UNREACHABLE, "got %s: %s", cg_status_name(st),
                 cg_last_error());
}
