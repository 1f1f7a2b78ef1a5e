# SPDX-License-Identifier: Apache-2.0
"""Fault matrix row 1: a rank SIGKILLed mid-AllReduce, mid-Broadcast,
mid-negotiation and while idle between steps, through the engine's C API
and the Horovod ABI, on both transports, 3 hosts. Every survivor must err
within CG_TIMEOUT naming the dead rank, exit cleanly (threads and
descriptors back to the main thread and stdio), and leave no process,
zombie or /dev/shm entry on its host.
usage: test_kill.py CGNT_RANK [--no-ucx]
"""
import sys
import time

import job as jobmod
import matrix
import netns

TIMEOUT_S = 3
VICTIM = 1
# phase: (cgnt_rank arguments, the victim's event to wait for, then delay)
PHASES = {
    "allreduce": (["--ops", "allreduce", "--tensors", "4",
                   "--elems", "262144"], ("step", "step 3 "), 0.03),
    "broadcast": (["--ops", "broadcast", "--tensors", "4",
                   "--elems", "262144"], ("step", "step 3 "), 0.03),
    "negotiation": (["--ops", "mixed", "--tensors", "400", "--elems", "4"],
                    ("step", "step 3 "), 0.002),
    "idle": (["--ops", "allreduce", "--tensors", "2", "--elems", "1024",
              "--idle-ms", "1000"], ("idle", "step 1$"), 0.1),
}


def case(cluster, binary, face, phase, transport, port):
    args, (kind, pattern), delay = PHASES[phase]
    name = "kill-%s-%s" % (phase, face)
    j = jobmod.Job(cluster, binary, args + ["--steps", "100000"] +
                   (["--shim"] if face == "shim" else []), transport,
                   TIMEOUT_S, port=port)
    if None in j.wait_all("ready", 20):
        matrix.fail(name, "ranks did not start", j)
        j.finish(5)
        return
    if j.ranks[VICTIM].wait_event(kind, 20, pattern) is None:
        matrix.fail(name, "victim never reached %s %s" % (kind, pattern), j)
        j.finish(5)
        return
    time.sleep(delay)
    t0 = j.ranks[VICTIM].kill()
    matrix.expect_failure(name, transport, j, t0, TIMEOUT_S, VICTIM)


def main():
    binary = sys.argv[1]
    port = 29400
    with netns.Cluster(3) as cluster:
        for transport in matrix.transports():
            for face in ("engine", "shim"):
                for phase in PHASES:
                    port += 10
                    case(cluster, binary, face, phase, transport, port)
    return matrix.exit_code()


if __name__ == "__main__":
    sys.exit(main())
