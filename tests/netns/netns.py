# SPDX-License-Identifier: Apache-2.0
"""Hosts that are really separate, for the fault-matrix tests.

A Cluster is a switch namespace holding a bridge plus N host namespaces,
each joined to the bridge by a veth pair and given 10.250.0.<i+1>/24.
Each host also has its own hostname (UTS namespace), its own SysV IPC and
its own /dev/shm (a mount namespace with a private tmpfs), held open by one
`sleep` process that everything run on the host enters with nsenter. nft
rules inside a host partition it; removing them heals. Namespaces are named
cgnt-<pid>-*, so parallel runs never collide, and are removed on exit, on
SIGTERM/SIGINT and, for runs whose process died, by the next run.
Only 10.250.0.x inside these namespaces is ever contacted.
"""
import atexit
import os
import re
import signal
import subprocess
import sys
import time

SKIP = 77
SUBNET = "10.250.0"
PREFIX = "cgnt-"


def sh(*args, check=True, input=None, timeout=30):
    r = subprocess.run(list(args), input=input, capture_output=True,
                       text=True, timeout=timeout)
    if check and r.returncode != 0:
        raise RuntimeError("%s: rc %d: %s" % (" ".join(args), r.returncode,
                                              r.stderr.strip()))
    return r


def skip(why):
    print("SKIP: " + why, flush=True)
    sys.exit(SKIP)


def sweep_stale():
    """Removes namespaces of earlier runs whose process is gone."""
    r = sh("ip", "netns", "list", check=False)
    for line in r.stdout.splitlines():
        name = line.split()[0] if line.split() else ""
        m = re.match(r"cgnt-(\d+)-", name)
        if m and not os.path.exists("/proc/" + m.group(1)):
            sh("ip", "netns", "del", name, check=False)


class Host:
    def __init__(self, cluster, index):
        self.index = index
        self.ns = "%s%d-h%d" % (PREFIX, os.getpid(), index)
        self.hostname = "cgnt-host%d" % index
        self.addr = "%s.%d" % (SUBNET, index + 1)
        self.holder = None
        self.partitioned = False
        self.helpers = set()  # pids of the harness's own tools here

    def enter(self):
        """The argv prefix that runs a command on this host."""
        return ["nsenter", "-t", str(self.holder.pid), "-n", "-u", "-i",
                "-m", "--"]

    def run(self, *args, check=True, input=None, timeout=30):
        return sh(*(self.enter() + list(args)), check=check, input=input,
                  timeout=timeout)

    def nft(self, script):
        self.run("nft", "-f", "-", input=script)

    def partition(self):
        """Drops every packet to and from the other hosts (silently, as a
        cut cable does)."""
        self.nft("table inet cgnt_part {\n"
                 " chain in { type filter hook input priority -10; "
                 "ip saddr %s.0/24 drop; }\n"
                 " chain out { type filter hook output priority -10; "
                 "ip daddr %s.0/24 drop; }\n}\n" % (SUBNET, SUBNET))
        self.partitioned = True

    def heal(self):
        self.run("nft", "delete", "table", "inet", "cgnt_part")
        self.partitioned = False

    def redirect(self, port, mark=0x4347):
        """Sends this host's outgoing TCP to the other hosts through a
        local proxy on port (whose own sockets carry mark)."""
        self.nft("table ip cgnt_proxy {\n"
                 " chain out { type nat hook output priority -100; "
                 "meta mark %d return; ip daddr %s.0/24 meta l4proto tcp "
                 "redirect to :%d; }\n}\n" % (mark, SUBNET, port))

    def unredirect(self):
        self.run("nft", "delete", "table", "ip", "cgnt_proxy")

    def shm_entries(self):
        return self.run("ls", "-A", "/dev/shm").stdout.split()

    def mnt_ns(self):
        return os.readlink("/proc/%d/ns/mnt" % self.holder.pid)

    def processes(self):
        """Pids in this host's mount namespace other than its holder."""
        mine, pids = self.mnt_ns(), []
        for p in os.listdir("/proc"):
            if not p.isdigit() or int(p) == self.holder.pid or \
                    int(p) in self.helpers:
                continue
            try:
                if os.readlink("/proc/%s/ns/mnt" % p) == mine:
                    pids.append(int(p))
            except OSError:
                pass
        return pids


class Cluster:
    """with Cluster(3) as c: c.hosts[0].run(...)"""

    def __init__(self, nhosts):
        if os.geteuid() != 0:
            skip("network namespaces need root")
        for tool in ("ip", "nft", "nsenter", "unshare"):
            if sh("sh", "-c", "command -v " + tool, check=False).returncode:
                skip("%s is not installed (iproute2, nftables, util-linux)"
                     % tool)
        self.sw = "%s%d-sw" % (PREFIX, os.getpid())
        self.hosts = [Host(self, i) for i in range(nhosts)]
        self.made = []

    def __enter__(self):
        sweep_stale()
        atexit.register(self.close)
        for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(s, self._on_signal)
        try:
            self._make()
        except (RuntimeError, OSError) as e:
            self.close()
            skip("the kernel refused a namespace setup step: %s" % e)
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def _on_signal(self, signum, frame):
        self.close()
        sys.exit(128 + signum)

    def _make(self):
        sh("ip", "netns", "add", self.sw)
        self.made.append(self.sw)
        sh("ip", "-n", self.sw, "link", "add", "br0", "type", "bridge")
        sh("ip", "-n", self.sw, "link", "set", "br0", "up")
        for h in self.hosts:
            sh("ip", "netns", "add", h.ns)
            self.made.append(h.ns)
            sh("ip", "-n", h.ns, "link", "add", "eth0", "type", "veth",
               "peer", "name", "p%d" % h.index, "netns", self.sw)
            sh("ip", "-n", self.sw, "link", "set", "p%d" % h.index,
               "master", "br0", "up")
            sh("ip", "-n", h.ns, "addr", "add", h.addr + "/24", "dev",
               "eth0")
            sh("ip", "-n", h.ns, "link", "set", "eth0", "up")
            sh("ip", "-n", h.ns, "link", "set", "lo", "up")
            h.holder = subprocess.Popen(
                ["ip", "netns", "exec", h.ns, "unshare", "--uts", "--ipc",
                 "--mount", "--propagation", "private", "--", "sh", "-c",
                 "mount -t tmpfs -o size=512m cgnt-shm /dev/shm && "
                 "hostname %s && echo up && exec sleep 100000" % h.hostname],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            if h.holder.stdout.readline().strip() != "up":
                raise RuntimeError("host %d: %s" % (
                    h.index, h.holder.stderr.read().strip()))
        # The bridge forwards before the tests start: host 0 listens, every
        # other host connects.
        probe = ("import socket,sys,time\n"
                 "d=time.time()+10\n"
                 "while True:\n"
                 " try: socket.create_connection((sys.argv[1],9),1); break\n"
                 " except ConnectionRefusedError: break\n"
                 " except OSError:\n"
                 "  if time.time()>d: sys.exit(1)\n"
                 "  time.sleep(0.05)\n")
        for h in self.hosts[1:]:
            if h.run(sys.executable, "-c", probe, self.hosts[0].addr,
                     check=False).returncode != 0:
                raise RuntimeError("host %d cannot reach host 0" % h.index)

    def close(self):
        for h in self.hosts:
            if h.holder is None:
                continue
            for pid in h.processes():
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            h.holder.kill()
            h.holder.wait()
            h.holder = None
        for ns in reversed(self.made):
            sh("ip", "netns", "del", ns, check=False)
        self.made = []
