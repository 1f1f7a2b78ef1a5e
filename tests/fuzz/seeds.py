#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# Writes the hand-made seeds of tests/fuzz/corpus/<target>/ (valid and
# nearly valid messages of each wire format and configuration lines);
# inputs the fuzzer found worth keeping, and crashes once fixed, are added
# there beside them. Run from anywhere: python3 tests/fuzz/seeds.py
import os
import struct

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def put(target, name, data):
    d = os.path.join(HERE, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "seed-" + name), "wb") as f:
        f.write(data)


# handshake: "CGHS" header (32 bytes) + payload; tcp message header.
def hs(kind, cookie=0, rank=1, idx=0, nsocks=1, conn=7, payload=b""):
    return struct.pack("<IHHQiHHII", 0x53484743, 1, kind, cookie, rank, idx,
                       nsocks, conn, len(payload)) + payload


put("handshake", "tcp-data", hs(1))
put("handshake", "tcp-data-4socks", hs(1, idx=3, nsocks=4))
put("handshake", "ucx-payload", hs(2, payload=b"\x01" * 64))
put("handshake", "bootstrap", hs(3, cookie=0xfeed, payload=struct.pack("<I", 4)))
put("handshake", "tcp-msg", struct.pack("<IIQ", 0x534d4743, 0, 4096))


# rendezvous: byte 0 mode (bit 0 rank, bits 1-2 op: 0 allgather, 1 bcast,
# 2 barrier; bit 3 root), byte 1 length; then the peer's frames.
def frame(op, seq, root, length, body=b""):
    return struct.pack("<IHHIiQ", 0x53424743, op, 0, seq, root, length) + body


L = 8
put("rendezvous", "lead-allgather", bytes([0, L]) + frame(2, 1, 0, L, b"a" * L))
put("rendezvous", "lead-bcast-root1", bytes([2 | 8, L]) + frame(3, 1, 1, L, b"b" * L))
put("rendezvous", "lead-barrier", bytes([4, 0]) + frame(4, 1, 0, 0))
put("rendezvous", "lead-wrong-seq", bytes([0, L]) + frame(2, 2, 0, L, b"a" * L))
put("rendezvous", "follow-allgather", bytes([1, L]) + frame(2, 1, 0, L, b"c" * 2 * L))
put("rendezvous", "follow-bcast", bytes([3, L]) + frame(3, 1, 0, L, b"d" * L))
put("rendezvous", "follow-abort", bytes([1, L]) +
    frame(5, 1, -9, 20, b"rank 3 left the job."))
put("rendezvous", "follow-abort-long", bytes([5, 0]) + frame(5, 1, -2, 600, b"x" * 600))


# negotiate: byte 0 size - 1; header size x [records, stop, fusion offer,
# cache cap, staging chunk offer (INT64_MAX: none)] int64; then records
# laid out as cg_hvd_wire_t (core/engine/hvd_core.h: 6 int32 parameters,
# group size and place, group key, scales, shape, name).
NONE = (1 << 63) - 1


def wire(name, typ=0, dtype=7, op=0, root=0, shape=(4,), device=-1,
         pre=1.0, post=1.0, group=(0, 0, 0)):
    s = list(shape) + [0] * (8 - len(shape))
    return (struct.pack("<8iQ2d8q", typ, dtype, op, root, len(shape), device,
                        *group, pre, post, *s) +
            name.encode().ljust(200, b"\0"))


def nego(rows, recs):
    size = len(rows)
    head = bytes([size - 1]) + b"".join(
        struct.pack("<5q", *(tuple(r) + (NONE,) * (5 - len(r)))) for r in rows)
    return head + b"".join(recs)


put("negotiate", "one-allreduce", nego([(1, 0, 1 << 26, 1024)], [wire("grad.0")]))
put("negotiate", "two-ranks", nego([(1, 0, 1 << 20, 1024), (2, 0, 1 << 22, 512)],
    [wire("a"), wire("a"), wire("b", typ=1, root=1, shape=(2, 3))]))
put("negotiate", "allgather-bf16", nego([(1, 0, 0, 0)] * 3,
    [wire("g", typ=2, dtype=9, shape=(5, 7, 2))] * 3))
put("negotiate", "broadcast-i16", nego([(1, 0, 64, 8)] * 2,
    [wire("h", typ=1, dtype=10, root=1, shape=(3, 5))] * 2))
put("negotiate", "allreduce-u16-prescale", nego([(1, 0, 64, 8)],
    [wire("u", dtype=11, shape=(9,), pre=0.25)]))
put("negotiate", "reducescatter-avg", nego([(1, 1, 4096, 16)] * 4,
    [wire("r", typ=3, op=4, shape=(8,), pre=0.5)] * 4))
put("negotiate", "stall-stop", nego([(0, 2, 0, 0), (0, 0, 1, 1)], []))
put("negotiate", "scalar-cuda", nego([(1, 0, 64, 8, 1 << 20)],
    [wire("s", shape=(), device=0)]))
put("negotiate", "grouped-pair", nego([(2, 0, 64, 8)],
    [wire("p.0", group=(2, 0, 0x1234)), wire("p.1", group=(2, 1, 0x1234))]))
put("negotiate", "staging-chunks", nego([(1, 0, 1 << 20, 8, 1 << 20),
    (1, 0, 1 << 20, 8, 256 << 10), (1, 0, 1 << 20, 8, NONE)],
    [wire("c", device=0)] * 3))
put("negotiate", "staging-no-slot", nego([(0, 0, 64, 8, 4 << 20), (0, 0, 64, 8, 0)], []))
put("negotiate", "staging-negative", nego([(0, 0, 64, 8, -256)], []))

# config: a line whose first byte is below 0x80 sets the table's variable
# number byte % count (core/config/config_table.c order) to the rest; other
# lines are "NAME=value" taken whole.
RAW = b"\xff"
put("config", "sizes", b"\x04" + b"64MiB\n" + b"\x05" + b"1.5M\n" + b"\x06" + b"4K\n")
put("config", "fractions", b"\x03" + b"25%\n" + b"8" + b"0.3\n" + b"\x0b" + b"0.1\n")
put("config", "durations", b"\x0d" + b"5s\n" + b"\x0e" + b"100ms\n" + b"\x13" + b"2m\n")
put("config", "enums", b"\x00" + b"debug\n" + b"\x01" + b"HOST\n" + b"\x12" + b"tcp\n")
put("config", "aliases", RAW + b"HOROVOD_FUSION_THRESHOLD=33554432\n" + RAW +
    b"HOROVOD_CYCLE_TIME=3.5\n" + RAW + b"NCCL_BUFFSIZE=4194304\n" +
    RAW + b"HOROVOD_TIMELINE=/tmp/t.json\n")
put("config", "unknown", RAW + b"CG_FUSION_THRESHOL=1\n" + RAW + b"CG_TEST_X=1\n")
put("config", "bad", b"\x04" + b"-1\n" + b"\x0d" + b"1e99s\n")
put("config", "torchrun", RAW + b"RANK=1\n" + RAW + b"WORLD_SIZE=4\n" + RAW +
    b"LOCAL_RANK=1\n" + RAW + b"LOCAL_WORLD_SIZE=2\n" + RAW +
    b"MASTER_ADDR=10.0.0.1\n" + RAW + b"MASTER_PORT=29500\n")
put("config", "horovod", RAW + b"HOROVOD_RANK=0\n" + RAW + b"HOROVOD_SIZE=2\n" +
    RAW + b"HOROVOD_LOCAL_RANK=0\n" + RAW + b"HOROVOD_LOCAL_SIZE=2\n" + RAW +
    b"HOROVOD_CROSS_RANK=0\n" + RAW + b"HOROVOD_CROSS_SIZE=1\n" + RAW +
    b"CG_RUN_RENDEZVOUS=[::1]:4000\n" + RAW + b"CG_RUN_SECRET=s3\n")
put("config", "collguard-run", RAW + b"CG_RUN_RANK=0\n" + RAW + b"CG_RUN_SIZE=3\n" +
    RAW + b"CG_RUN_LOCAL_RANK=0\n" + RAW + b"CG_RUN_LOCAL_SIZE=3\n" + RAW +
    b"CG_RUN_RENDEZVOUS=localhost:5000\n" + RAW + b"CG_RUN_RENDEZVOUS_FD=7\n")
