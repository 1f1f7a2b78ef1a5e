# SPDX-License-Identifier: Apache-2.0
"""A job of cgnt_rank processes on a netns.Cluster, one rank per host.

Ranks bootstrap through the TCP rendezvous with torchrun's variables
(MASTER_ADDR is host 0's 10.250.0.1). Every stdout/stderr line is kept with
the time it arrived; the "CGNT <event> t=<ns>" lines of cgnt_rank become
events (their t is CLOCK_MONOTONIC, the clock of time.monotonic_ns()).
finish() waits for the ranks and checks what a dead job must not leave
behind: a process or zombie on a host, an entry in a host's /dev/shm, a
thread or descriptor still open in a rank after teardown.
"""
import os
import re
import signal
import subprocess
import threading
import time

EVENT = re.compile(r"^(?:CGNT|PROXY) (\S+) t=(\d+) ?(.*)$")


class Rank:
    def __init__(self, rank, host, argv, env):
        self.rank, self.host = rank, host
        self.lines, self.events = [], []
        self.cond = threading.Condition()
        self.proc = subprocess.Popen(host.enter() + argv, env=env,
                                     stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        self.readers = [threading.Thread(target=self._read, args=(f,),
                                         daemon=True)
                        for f in (self.proc.stdout, self.proc.stderr)]
        for t in self.readers:
            t.start()

    def _read(self, f):
        for line in f:
            now = time.monotonic_ns()
            line = line.rstrip("\n")
            m = EVENT.match(line)
            with self.cond:
                self.lines.append((now, line))
                if m:
                    self.events.append((m.group(1), int(m.group(2)),
                                        m.group(3)))
                self.cond.notify_all()

    def wait_event(self, kind, timeout, pattern=""):
        """The first event of that kind (whose text matches pattern)."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for e in self.events:
                    if e[0] == kind and re.search(pattern, e[2]):
                        return e
                left = deadline - time.monotonic()
                if left <= 0 or (self.proc.poll() is not None and
                                 not any(t.is_alive() for t in self.readers)):
                    return None
                self.cond.wait(min(left, 0.05))

    def event(self, kind):
        with self.cond:
            return next((e for e in self.events if e[0] == kind), None)

    def count(self, kind):
        with self.cond:
            return sum(1 for e in self.events if e[0] == kind)

    def grep(self, pattern):
        with self.cond:
            return [l for _, l in self.lines if re.search(pattern, l)]

    def kill(self):
        """SIGKILL; the time it was sent (ns, CLOCK_MONOTONIC)."""
        t = time.monotonic_ns()
        self.proc.send_signal(signal.SIGKILL)
        return t


def start_proxy(host, port, *args):
    """fault_proxy.py on host, its redirect installed; stop with
    stop_proxy."""
    here = os.path.dirname(os.path.abspath(__file__))
    p = Rank(-1, host, ["/usr/bin/python3", "-u",
                        os.path.join(here, "fault_proxy.py"), "--port",
                        str(port)] + [str(a) for a in args], None)
    if p.wait_event("listening", 10) is None:
        raise RuntimeError("proxy on host %d did not start: %s"
                           % (host.index, p.grep(".")))
    host.helpers.add(p.proc.pid)
    host.redirect(port)
    return p


def stop_proxy(p):
    p.host.unredirect()
    p.proc.kill()
    p.proc.wait()
    p.host.helpers.discard(p.proc.pid)


class Job:
    def __init__(self, cluster, binary, args, transport, timeout_s,
                 nranks=None, env=None, port=29500, defer=()):
        self.cluster, self.timeout_s = cluster, timeout_s
        self.hosts = cluster.hosts[:nranks or len(cluster.hosts)]
        self.ranks = []
        self.port = port
        base = {k: v for k, v in os.environ.items()
                if not k.startswith(("CG_", "OMPI_", "HOROVOD_", "PMIX_"))}
        base.update({
            "MASTER_ADDR": self.hosts[0].addr, "MASTER_PORT": str(port),
            "WORLD_SIZE": str(len(self.hosts)), "LOCAL_RANK": "0",
            "LOCAL_WORLD_SIZE": "1", "CG_TRANSPORT": transport,
            "CG_TIMEOUT": "%gs" % timeout_s, "CG_LOG_LEVEL": "warn",
            "CG_RUN_SECRET": "cgnt-%d" % os.getpid(),
            "CG_MEM_PROBE": "host"})
        base.update(env or {})
        self.argv = [os.path.abspath(binary)] + list(args)
        self.env = [dict(base, RANK=str(r)) for r in range(len(self.hosts))]
        self.ranks = [None if r in defer else
                      Rank(r, h, self.argv, self.env[r])
                      for r, h in enumerate(self.hosts)]

    def start(self, r):
        """Starts a rank deferred at construction."""
        self.ranks[r] = Rank(r, self.hosts[r], self.argv, self.env[r])

    def rendezvous_port(self):
        return self.port + 1  # torchrun's store holds MASTER_PORT

    def wait_all(self, kind, timeout, ranks=None):
        out = []
        for r in (ranks if ranks is not None else self.ranks):
            out.append(r.wait_event(kind, timeout))
        return out

    def finish(self, timeout):
        """Waits for every rank (killing what outlives timeout); returns
        (codes, leaks): exit codes by rank (None: had to be killed) and
        a list of what was left behind."""
        deadline = time.monotonic() + timeout
        codes = []
        for r in self.ranks:
            try:
                codes.append(r.proc.wait(max(0.1, deadline - time.monotonic())))
            except subprocess.TimeoutExpired:
                r.proc.kill()
                r.proc.wait()
                codes.append(None)
            for t in r.readers:
                t.join(5)
        return codes, self.leaks()

    def leaks(self):
        out = []
        for h in self.hosts:
            left = h.processes()
            if left:
                out.append("host %d: processes %s" % (h.index, left))
            shm = h.shm_entries()
            if shm:
                out.append("host %d: /dev/shm holds %s" % (h.index, shm))
        for r in self.ranks:
            e = r.event("exit")
            if e is None:
                continue
            m = re.search(r"threads (\d+) fds (\d+)", e[2])
            if m and (int(m.group(1)) != 1 or int(m.group(2)) > 3):
                out.append("rank %d after teardown: %s" % (r.rank, e[2]))
        return out

    def log_tail(self, n=15, crash_lines=80):
        """Each rank's last n lines; for a rank that crashed (UCX's or
        glibc's backtrace in its output), from the crash on, so the
        frames that name the fault are not cut off."""
        out = []
        for r in self.ranks:
            with r.cond:
                lines = [l for _, l in r.lines]
            first = next((i for i, l in enumerate(lines)
                          if re.search(r"Caught signal|[Bb]acktrace", l)), None)
            keep = lines[-n:] if first is None else \
                lines[max(0, first - 3):first + crash_lines]
            for l in keep:
                out.append("  [%d] %s" % (r.rank, l))
        return "\n".join(out)
