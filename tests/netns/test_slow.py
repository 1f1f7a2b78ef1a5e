# SPDX-License-Identifier: Apache-2.0
"""Fault matrix row 3: every connection between 3 hosts passes a proxy
that delays each direction by 50 ms and caps it at 8 MB/s. The job must
finish with exact results and no error, and with one rank enqueueing a
step 3 s late (CG_STALL_CHECK_TIME=1s) rank 0's stall inspector must
warn, naming it, while nothing fails. (3 s: with 50 ms each way a
negotiation round over 3 hosts takes 200 ms or more, so the inspector,
which runs once a round, needs the lag to outlast the check time by
several rounds; 1.5 s missed it under load.)
usage: test_slow.py CGNT_RANK [--no-ucx]
"""
import sys

import job as jobmod
import matrix
import netns

TIMEOUT_S = 5
PROXY_PORT = 18080


def case(cluster, binary, transport, port):
    name = "delay-50ms-rate-8MB/s-stall"
    proxies = [jobmod.start_proxy(h, PROXY_PORT, "--delay-ms", 50, "--rate",
                                  8e6) for h in cluster.hosts]
    try:
        j = jobmod.Job(cluster, binary,
                       ["--ops", "mixed", "--steps", "8", "--tensors", "4",
                        "--elems", "32768", "--lag", "2:3:3000"],
                       transport, TIMEOUT_S, port=port,
                       env={"CG_STALL_CHECK_TIME": "1s"})
        codes = matrix.expect_success(name, transport, j, 120)
    finally:
        for p in proxies:
            jobmod.stop_proxy(p)
    relayed = sum(p.count("conn") for p in proxies)
    stats = j.ranks[0].event("stats")
    warned = j.ranks[0].grep(r"(?i)stall")
    if relayed == 0:
        matrix.fail(name, "no connection went through the proxies")
    if stats is None or "stalls_warned 0" in stats[2] or not warned:
        matrix.fail(name, "the stall inspector did not speak: %s" %
                    (stats[2] if stats else "no stats"), j)
    elif not any("2" in w for w in warned):
        matrix.fail(name, "the stall warning does not name rank 2: %s" %
                    warned[:2], j)
    print("    %d connections relayed; rank 0: %s; codes %s" %
          (relayed, warned[0] if warned else "-", codes), flush=True)


def main():
    binary = sys.argv[1]
    port = 29700
    with netns.Cluster(3) as cluster:
        for transport in matrix.transports():
            case(cluster, binary, transport, port)
            port += 10
    return matrix.exit_code()


if __name__ == "__main__":
    sys.exit(main())
