# SPDX-License-Identifier: Apache-2.0
"""Hostile peers for the fault matrix, run on an attacker host:
  hostile.py probes ADDR PORT    garbage, a wrong cookie, a truncated
                                 header, an oversized payload length
  hostile.py flood ADDR PORT N   N connections opened and left idle until
                                 stdin closes
Prints "HOSTILE <event> t=<ns> ..." lines.
"""
import os
import socket
import struct
import sys
import time


def say(event, text):
    print("HOSTILE %s t=%d %s" % (event, time.monotonic_ns(), text),
          flush=True)


def header(cookie, payload_len, kind=1, version=1):
    # magic "CGHS", version, kind, cookie, rank, sock_index, nsocks,
    # conn_id, payload_len (transport/handshake.h)
    return b"CGHS" + struct.pack("<HHQiHHII", version, kind, cookie, 0, 0, 1,
                                 7, payload_len)


def probes(addr, port):
    cases = {
        "garbage": os.urandom(512),
        "wrong-cookie": header(0x1234567890abcdef, 0),
        "truncated-header": header(0, 0)[:13],
        "oversized-length": header(0, 0xfffffff0),
    }
    for name, data in cases.items():
        s = socket.create_connection((addr, port), 5)
        s.sendall(data)
        s.settimeout(10)
        try:
            got = s.recv(64)
            say("probe", "%s answered %d bytes then %s" %
                (name, len(got), "closed" if not s.recv(64) else "more"))
        except socket.timeout:
            say("probe", "%s: still open after 10 s" % name)
        except OSError as e:
            say("probe", "%s: %s" % (name, e.strerror))
        s.close()


def flood(addr, port, n):
    held = []
    for _ in range(n):
        s = socket.socket()
        s.setblocking(False)
        try:
            s.connect((addr, port))
        except BlockingIOError:
            pass
        held.append(s)
    time.sleep(1)
    say("flood", "%d connections opened to %s:%d" % (len(held), addr, port))
    sys.stdin.read()
    for s in held:
        s.close()


if __name__ == "__main__":
    if sys.argv[1] == "probes":
        probes(sys.argv[2], int(sys.argv[3]))
    else:
        flood(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
