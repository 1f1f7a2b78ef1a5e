/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bootstrap_check: one rank of a real job (under mpirun, collguard-run,
 * horovodrun or torchrun). Bootstraps from the process environment, runs
 * the standard exchange (rank-tagged allgather, cookie agreement, bcast,
 * barrier), checks the rank layout and that nothing leaked, and prints
 * "ok". Exit 0 on success; the failure and cg_last_error() otherwise.
 */
#include <stdio.h>
#include <string.h>

#include "tests/transport/bootstrap_test_util.h"

static int bs_check_layout(const cg_bootstrap_env_t *e)
{
    if (e->rank < 0 || e->rank >= e->size || e->local_rank < 0 ||
        e->local_rank >= e->local_size || e->cross_rank < 0 ||
        e->cross_rank >= e->cross_size || e->local_size > e->size ||
        e->cross_size > e->size) {
        fprintf(stderr, "bad layout: rank %d of %d, local %d of %d, cross %d "
                "of %d\n", e->rank, e->size, e->local_rank, e->local_size,
                e->cross_rank, e->cross_size);
        return 1;
    }
    return 0;
}

int main(void)
{
    cg_bootstrap_params_t p;
    cg_bootstrap_t *bs;
    bs_report_t rep;
    tp_mem_t mem;
    cg_status_t status;
    int rc;

    memset(&p, 0, sizeof(p));
    memset(&mem, 0, sizeof(mem));
    memset(&rep, 0, sizeof(rep));
    p.timeout_ns = tp_scaled_ns(20000);
    p.mem = tp_mem_ops(&mem);
    status = cg_bootstrap_create(&p, &bs);
    if (status != CG_OK) {
        fprintf(stderr, "cg_bootstrap_create: %s: %s\n",
                cg_status_name(status), cg_last_error());
        return 1;
    }
    rc = bs_check_layout(cg_bootstrap_env(bs));
    if (rc == 0 && bs_exchange(bs, &rep) != 0) {
        fprintf(stderr, "exchange failed: %s: %s\n",
                cg_status_name((cg_status_t)rep.status), rep.msg);
        rc = 1;
    }
    if (rc == 0)
        fprintf(stderr, "rank %d of %d via %s, cookie 0x%016llx\n",
                cg_bootstrap_rank(bs), cg_bootstrap_size(bs),
                cg_bootstrap_src_name(cg_bootstrap_env(bs)->source),
                (unsigned long long)cg_bootstrap_cookie(bs));
    cg_bootstrap_destroy(bs);
    if (tp_mem_live(&mem) != 0) {
        fprintf(stderr, "leaked %zu bytes\n", tp_mem_live(&mem));
        rc = 1;
    }
    if (rc == 0)
        printf("ok\n");
    return rc;
}
