/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The net plugin's registration budget, one version per run:
 *   np_regbudget LIB VERSION
 * run with a governor that samples memory once (CG_PROBE_INTERVAL and
 * CG_OOM_WINDOW of an hour, so the budget stays what init saw) and a small
 * CG_MEM_FRACTION. In one process, on a send and a recv comm connected to
 * each other: regMr of doubling sizes (each deregistered) finds the budget
 * B to a factor of two (the first size refused, S, has S/2 <= B < S); then
 * S/2 registers, a second S/2 is refused (the first one's bytes are
 * accounted: together they pass B) with ncclSystemError and a WARN naming
 * the budget, the first deregistered lets S/2 register again (its bytes
 * came back), and a NCCL_PTR_CUDA registration is refused with
 * ncclInvalidArgument and a WARN (ptrSupport is host only). The regions
 * are reserved address space (PROT_NONE): a registration is a record.
 * Exit 0 when every check held.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "harness_check.h"
#include "np_drv.h"

#define MIB (1ull << 20)

static void *reserve(size_t n)
{
    void *p = mmap(NULL, n, PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

/* The registrations on one comm. */
static void budget_on(np_drv_t *d, void *comm)
{
    size_t s = 0, half;
    void *mh = NULL, *mh2 = NULL, *p, *q;
    ncclResult_t r = ncclSuccess;

    /* Doubling sizes up to 64 TiB: the first refused is S. */
    for (size_t n = MIB; n <= (MIB << 26) && s == 0; n *= 2) {
        p = reserve(n);
        CHECK(p != NULL);
        if (p == NULL)
            return;
        np_drv_log_clear();
        r = np_reg(d, comm, p, n, &mh);
        if (r == ncclSuccess)
            OK(np_dereg(d, comm, mh));
        else
            s = n;
        munmap(p, n);
    }
    CHECK(s > MIB); /* 1 MiB fits every budget this test expects */
    CHECK(r == ncclSystemError);
    CHECK(mh == NULL);
    CHECK(np_drv_log_count(NCCL_LOG_WARN, "refused") == 1);
    CHECK(np_drv_log_count(NCCL_LOG_WARN, "the governor's budget is") == 1);
    if (s <= MIB)
        return;
    half = s / 2;
    p = reserve(half);
    q = reserve(half);
    CHECK(p != NULL && q != NULL);
    if (p == NULL || q == NULL)
        return;
    /* S/2 fits; a second S/2 does not while the first is registered. */
    OK(np_reg(d, comm, p, half, &mh));
    np_drv_log_clear();
    CHECK(np_reg(d, comm, q, half, &mh2) == ncclSystemError);
    CHECK(mh2 == NULL);
    CHECK(np_drv_log_count(NCCL_LOG_WARN, "already registered") == 1);
    /* Deregistered, its bytes come back. */
    OK(np_dereg(d, comm, mh));
    OK(np_reg(d, comm, q, half, &mh2));
    CHECK(mh2 != NULL);
    CHECK(np_reg(d, comm, p, half, &mh) == ncclSystemError);
    OK(np_dereg(d, comm, mh2));
    /* Device memory: host only. */
    np_drv_log_clear();
    mh = (void *)1;
    CHECK(np_reg_type(d, comm, p, 4096, NCCL_PTR_CUDA, &mh) ==
          ncclInvalidArgument);
    CHECK(mh == NULL);
    CHECK(np_drv_log_count(NCCL_LOG_WARN, "only host memory") == 1);
    CHECK(np_drv_log_bad(NCCL_NET) == 0); /* WARNs under NET, unprefixed */
    munmap(p, half);
    munmap(q, half);
}

int main(int argc, char **argv)
{
    unsigned char h[NCCL_NET_HANDLE_MAXSIZE];
    void *l = NULL, *s = NULL, *r = NULL;
    np_drv_t d;
    int ver;

    if (argc != 3) {
        fprintf(stderr, "usage: np_regbudget LIB VERSION\n");
        return 2;
    }
    ver = atoi(argv[2]);
    g_who = "regbudget";
    if (np_drv_open(&d, argv[1], ver) != 0)
        return 1;
    OK(np_init(&d));
    OK(np_listen(&d, 0, h, &l));
    OK(np_pair(&d, h, l, &s, &r));
    if (s != NULL && r != NULL) {
        g_who = "regbudget send";
        budget_on(&d, s);
        g_who = "regbudget recv";
        budget_on(&d, r);
        OK(np_close_send(&d, s));
        OK(np_close_recv(&d, r));
    }
    OK(np_close_listen(&d, l));
    OK(np_finalize(&d));
    np_drv_close(&d);
    printf("net plugin v%d registration budget: %s\n", ver,
           g_fail ? "FAILED" : "all checks passed");
    return g_fail;
}
