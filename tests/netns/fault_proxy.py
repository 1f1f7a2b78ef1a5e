# SPDX-License-Identifier: Apache-2.0
"""A fault-injecting TCP proxy for the fault matrix (run inside a host's
namespace; netns.Host.redirect sends the host's outgoing TCP to it).

Each accepted connection is relayed to its original destination
(SO_ORIGINAL_DST of the nft redirect; the upstream socket carries SO_MARK
MARK so the rule lets it pass). Options: --delay-ms holds every chunk that
long in each direction (order kept), --rate caps each direction's bytes
per second, --cut-after resets both sides once a connection has carried
that many bytes (both directions counted; the bytes up to the cut are
delivered); with --stall-ms the proxy first stops reading both sides for
that long, so that senders' socket buffers fill and their sends stay half
written when the reset comes (the receive buffers of the proxy's sockets
are then kept small: 64 KiB). Prints "PROXY <event> t=<CLOCK_MONOTONIC ns> ..." lines.
"""
import argparse
import collections
import socket
import struct
import threading
import time

SO_ORIGINAL_DST = 80
MARK = 0x4347


def say(fmt, *args):
    print(("PROXY %s t=%d " % (fmt.split(" ")[0], time.monotonic_ns())) +
          (" ".join(fmt.split(" ")[1:]) % args), flush=True)


def reset(s):
    """An abortive close. shutdown first: a close alone would wait for the
    other pump's recv on the same socket to return."""
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                     struct.pack("ii", 1, 0))
        s.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    s.close()


class Conn:
    def __init__(self, opts, down, up, dst):
        self.opts, self.down, self.up, self.dst = opts, down, up, dst
        self.lock = threading.Lock()
        self.carried, self.dead = 0, False
        self.stalled = threading.Event()

    def take(self, n):
        """How many of n bytes may still pass before the cut."""
        with self.lock:
            if self.dead:
                return 0
            if self.opts.cut_after and self.carried + n >= self.opts.cut_after:
                n = self.opts.cut_after - self.carried
            self.carried += n
            return n

    def kill(self, why):
        with self.lock:
            if self.dead:
                return
            self.dead = True
        say("cut %s after %d bytes: %s", self.dst, self.carried, why)
        reset(self.down)
        reset(self.up)

    def pump(self, src, dst):
        q, cond = collections.deque(), threading.Condition()
        writer = threading.Thread(target=self._write, args=(q, cond, dst),
                                  daemon=True)
        writer.start()
        while True:
            while self.stalled.is_set() and not self.dead:
                time.sleep(0.005)   # not reading: the sender's buffer fills
            try:
                data = src.recv(65536)
            except OSError:
                data = None
            with cond:
                q.append((time.monotonic(), data))
                cond.notify()
            if not data:
                return

    def _write(self, q, cond, dst):
        start, sent = time.monotonic(), 0
        while True:
            with cond:
                while not q:
                    cond.wait()
                t, data = q.popleft()
            if data is None:      # reset or error on the other side
                return self.kill("peer reset")
            if data == b"":       # orderly end: pass it on
                try:
                    dst.shutdown(socket.SHUT_WR)
                except OSError:
                    pass
                return
            wait = t + self.opts.delay_ms / 1000.0 - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            n = self.take(len(data))
            if self.opts.rate:
                sent += n
                wait = start + sent / self.opts.rate - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
            try:
                dst.sendall(data[:n])
            except OSError:
                return self.kill("send failed")
            if n < len(data) or (self.opts.cut_after and
                                 self.carried >= self.opts.cut_after):
                if self.opts.stall_ms:
                    self.stalled.set()
                    time.sleep(self.opts.stall_ms / 1000.0)
                return self.kill("cut-after %d" % self.opts.cut_after)


def serve(opts):
    lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if opts.stall_ms:   # accepted sockets inherit it
        lsock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
    lsock.bind(("0.0.0.0", opts.port))
    lsock.listen(1024)
    say("listening port %d", opts.port)
    while True:
        down, _ = lsock.accept()
        raw = down.getsockopt(socket.SOL_IP, SO_ORIGINAL_DST, 16)
        port, ip = struct.unpack("!2xH4s8x", raw)
        dst = "%s:%d" % (socket.inet_ntoa(ip), port)
        if not dst.startswith("10."):
            reset(down)
            continue
        up = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        up.setsockopt(socket.SOL_SOCKET, socket.SO_MARK, MARK)
        if opts.stall_ms:
            up.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
        try:
            up.connect((socket.inet_ntoa(ip), port))
        except OSError as e:
            say("refused %s: %s", dst, e)
            reset(down)
            continue
        for s in (down, up):
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        c = Conn(opts, down, up, dst)
        say("conn %s", dst)
        for a, b in ((down, up), (up, down)):
            threading.Thread(target=c.pump, args=(a, b), daemon=True).start()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--delay-ms", type=float, default=0)
    ap.add_argument("--rate", type=float, default=0)
    ap.add_argument("--cut-after", type=int, default=0)
    ap.add_argument("--stall-ms", type=float, default=0)
    serve(ap.parse_args())


if __name__ == "__main__":
    main()
