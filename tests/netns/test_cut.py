# SPDX-License-Identifier: Apache-2.0
"""Fault matrix row 4: a proxy on each host resets each connection the
host dials once it has carried N bytes (N at several offsets, so cuts land in
headers and in payloads), while 2 ranks allreduce 1 MiB steps. Both ranks
must err (detected, within CG_TIMEOUT of the cut); no rank may ever see a
wrong element. The stall case first has the proxy stop reading for
STALL_MS while 16 MiB steps are in flight, so the reset meets sends half
written. A rank that UCX's own TCP double completion aborts is reported
KNOWN (matrix.py, docs/fault-tolerance.md).
usage: test_cut.py CGNT_RANK [--no-ucx]
"""
import sys

import job as jobmod
import matrix
import netns

TIMEOUT_S = 3
PROXY_PORT = 18081
CUTS = [3 << 20, (5 << 20) + 7, (2 << 20) + 100003]
STALL_CUTS = [(3 << 20) + 7]
STALL_MS = 300


def stall_case(cluster, binary, transport, port, cut):
    case(cluster, binary, transport, port, cut, STALL_MS, 1 << 20)


def case(cluster, binary, transport, port, cut, stall_ms=0, elems=65536):
    name = ("stall-then-cut-after-%d" if stall_ms else
            "cut-after-%d-bytes") % cut
    proxies = [jobmod.start_proxy(h, PROXY_PORT, "--cut-after", cut,
                                  "--stall-ms", stall_ms)
               for h in cluster.hosts]
    try:
        j = jobmod.Job(cluster, binary,
                       ["--ops", "allreduce", "--steps", "100000",
                        "--tensors", "4", "--elems", str(elems)],
                       transport, TIMEOUT_S, port=port)
        res = j.finish(TIMEOUT_S + 30)
    finally:
        for p in proxies:
            jobmod.stop_proxy(p)
    cuts = [c for p in proxies for c in [p.event("cut")] if c is not None]
    if not cuts:
        matrix.fail(name, "the proxies cut nothing: %s" %
                    [p.grep(".") for p in proxies], j)
        return
    c = min(cuts, key=lambda e: e[1])
    matrix.expect_failure(name, transport, j, c[1], TIMEOUT_S, None,
                          survivors=j.ranks, codes_leaks=res)


def main():
    binary = sys.argv[1]
    port = 29800
    with netns.Cluster(2) as cluster:
        for transport in matrix.transports():
            for cut in CUTS:
                case(cluster, binary, transport, port, cut)
                port += 10
            for cut in STALL_CUTS:
                stall_case(cluster, binary, transport, port, cut)
                port += 10
    return matrix.exit_code()


if __name__ == "__main__":
    sys.exit(main())
