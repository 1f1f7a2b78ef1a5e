# SPDX-License-Identifier: Apache-2.0
"""Fault matrix row 2: nftables inside host 1's namespace drops everything
to and from the other hosts while 3 ranks allreduce. Longer than
CG_TIMEOUT: every rank errs (ranks 0 and 2 naming rank 1) within twice
CG_TIMEOUT of the cut and the job exits cleanly; shorter: the rule is
removed and the collectives complete with exact results.
usage: test_partition.py CGNT_RANK [--no-ucx]
"""
import sys
import time

import job as jobmod
import matrix
import netns

TIMEOUT_S = 2
SHORT_S = 0.6
ARGS = ["--ops", "mixed", "--tensors", "4", "--elems", "65536"]


def started(name, j, step):
    if None in j.wait_all("ready", 20) or \
            j.ranks[1].wait_event("step", 20, "step %d " % step) is None:
        matrix.fail(name, "ranks did not start", j)
        j.finish(5)
        return False
    return True


def long_cut(cluster, binary, transport, port):
    name = "partition-longer-than-timeout"
    j = jobmod.Job(cluster, binary, ARGS + ["--steps", "100000"], transport,
                   TIMEOUT_S, port=port)
    if not started(name, j, 3):
        return
    t0 = time.monotonic_ns()
    cluster.hosts[1].partition()
    try:
        res = j.finish(2 * TIMEOUT_S + 20)
    finally:
        cluster.hosts[1].heal()
    others = [r for r in j.ranks if r.rank != 1]
    matrix.expect_failure(name, transport, j, t0, 2 * TIMEOUT_S, 1,
                          survivors=others, codes_leaks=res)
    matrix.expect_failure(name + "-cut-rank", transport, j, t0,
                          2 * TIMEOUT_S, None, survivors=[j.ranks[1]],
                          codes_leaks=res)


def short_cut(cluster, binary, transport, port):
    name = "partition-shorter-than-timeout"
    j = jobmod.Job(cluster, binary, ARGS + ["--steps", "40"], transport,
                   3 * TIMEOUT_S, port=port)
    if not started(name, j, 5):
        return
    cluster.hosts[1].partition()
    time.sleep(SHORT_S)
    cluster.hosts[1].heal()
    matrix.expect_success(name, transport, j, 60,
                          "cut %.1fs < CG_TIMEOUT %ds" % (SHORT_S,
                                                          3 * TIMEOUT_S))


def main():
    binary = sys.argv[1]
    port = 29600
    with netns.Cluster(3) as cluster:
        for transport in matrix.transports():
            long_cut(cluster, binary, transport, port)
            short_cut(cluster, binary, transport, port + 10)
            port += 20
    return matrix.exit_code()


if __name__ == "__main__":
    sys.exit(main())
