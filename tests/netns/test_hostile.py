# SPDX-License-Identifier: Apache-2.0
"""Fault matrix row 7: hostile peers on a fourth host against the
rendezvous port (rank 0 alone, before the others start): garbage, a wrong
cookie, a truncated header and an oversized length are refused, and 1000
connections are opened and left idle; the job's own ranks, started once
the flood is up, must still join and finish with exact results, rank 0
must log the refusals, and its descriptors and memory must stay bounded
(measured during the flood, from /proc). (The transport's listen ports
exist only between two bootstrap exchanges, too briefly to aim at from
outside; tests/transport/test_tcp_fault.c covers their handshakes, and
tests/plugin/nccl/np_flood.c floods the net plugin's long-lived listen comm.)
usage: test_hostile.py CGNT_RANK [--no-ucx]
"""
import os
import re
import subprocess
import sys
import time

import job as jobmod
import matrix
import netns

TIMEOUT_S = 5
FLOOD = 1000
FD_BOUND = 64          # descriptors a victim may hold during the flood
RSS_BOUND_KIB = 32768  # growth of its resident memory


def proc_usage(pid):
    """(descriptors, VmRSS KiB) of a live process; (0, 0) once it exited."""
    try:
        fds = len(os.listdir("/proc/%d/fd" % pid))
        with open("/proc/%d/status" % pid) as f:
            m = re.search(r"VmRSS:\s+(\d+)", f.read())
    except OSError:
        return 0, 0
    return (fds, int(m.group(1))) if m else (0, 0)


def listening(host, exclude=()):
    out = host.run("ss", "-Htln").stdout
    ports = {int(l.split()[3].rsplit(":", 1)[1]) for l in out.splitlines()}
    return sorted(ports - set(exclude))


def attack(cluster, target, port):
    """The probes (running on) and a flood left open, both started on the
    attacker host: (probes, flood) processes, once the flood is up."""
    me = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                      "hostile.py")
    att = cluster.hosts[-1]
    run = [att.enter() + ["/usr/bin/python3", me] + a for a in
           (["probes", target.addr, str(port)],
            ["flood", target.addr, str(port), str(FLOOD)])]
    probes, flood = [subprocess.Popen(a, stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, text=True)
                     for a in run]
    flood.stdout.readline()
    return probes, flood


def ended(probes, flood):
    """The probes' and the flood's report lines, the flood closed."""
    out = flood.communicate("", timeout=30)[0].splitlines()
    return out + probes.communicate("", timeout=60)[0].splitlines()


def verdict(name, transport, j, victims, before, during, probes):
    matrix.expect_success(name, transport, j, 1, "n/a (refused)")
    for r, b, d in zip(victims, before, during):
        refused = r.grep(r"(?i)drop|refus|handshake")
        print("    rank %d: fds %d -> %d, rss %d -> %d KiB, %d refusal "
              "line(s)" % (r.rank, b[0], d[0], b[1], d[1], len(refused)),
              flush=True)
        if d[0] == 0 or d[0] > FD_BOUND or d[1] - b[1] > RSS_BOUND_KIB:
            matrix.fail(name, "rank %d unbounded: fds %d, rss +%d KiB"
                        % (r.rank, d[0], d[1] - b[1]))
        if not refused:
            matrix.fail(name, "rank %d logged no refusal" % r.rank, j)
    for p in probes:
        print("    " + p, flush=True)
        if "still open" in p:
            matrix.fail(name, "a probe was not refused: " + p)


def rendezvous(cluster, transport, binary, port):
    name = "hostile-rendezvous-port"
    j = jobmod.Job(cluster, binary, ["--steps", "5"], transport, TIMEOUT_S,
                   nranks=3, port=port, defer=(1, 2))
    rport = j.rendezvous_port()
    deadline = time.monotonic() + 10
    while rport not in listening(cluster.hosts[0]):
        if time.monotonic() > deadline:
            matrix.fail(name, "rank 0 never listened", j)
            return
        time.sleep(0.02)
    pid = j.ranks[0].proc.pid
    before = proc_usage(pid)
    probes, flood = attack(cluster, cluster.hosts[0], rport)
    time.sleep(0.5)  # rank 0 alone under the flood
    during = proc_usage(pid)
    j.start(1)
    j.start(2)
    j.finish(60)
    verdict(name, transport, j, [j.ranks[0]], [before], [during],
            ended(probes, flood))


def main():
    binary = sys.argv[1]
    port = 29900
    with netns.Cluster(4) as cluster:
        for transport in matrix.transports():
            rendezvous(cluster, transport, binary, port)
            port += 20
    return matrix.exit_code()


if __name__ == "__main__":
    sys.exit(main())
