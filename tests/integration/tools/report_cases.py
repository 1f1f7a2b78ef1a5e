# SPDX-License-Identifier: Apache-2.0
# integration/tools/timeline_report.py on traces written here, small
# enough to check by hand: a fused allreduce of two tensors, the same
# tensor alone, a broadcast, governor counters and instants (every number
# of the report worked out in the comments below); a trace cut while an
# operation ran; and bad input (missing, empty, truncated, not a trace,
# not collguard's, a span that never began, header only, bad arguments,
# an unwritable PNG), each a one-line error and a non-zero exit. Also
# holds the tool's dtype sizes to include/collguard/types.h.
# Usage: report_cases.py TOOL TYPES_H
import json
import os
import re
import subprocess
import sys
import tempfile

TOOL, TYPES_H = sys.argv[1], sys.argv[2]
MIB = 1 << 20
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL: %s" % what)


def meta(pid, name):
    return {"name": "process_name", "ph": "M", "pid": pid,
            "args": {"name": name}}


def ev(ph, pid, ts, name=None, args=None):
    e = {"ph": ph, "ts": ts, "pid": pid, "tid": 0}
    if name is not None:
        e["name"] = name
    if args is not None:
        e["args"] = args
    return e


def negotiation(pid, op, begin, end):
    return [ev("B", pid, begin, "NEGOTIATE_" + op), ev("X", pid, begin, "0"),
            ev("X", pid, end, "1"), ev("E", pid, end)]


def counters(ts, free, budget, fusion, chunk, level):
    return [ev("C", 0, ts, "free_memory", {"host": free}),
            ev("C", 0, ts, "governor", {"budget": budget,
                                        "fusion_buffer": fusion,
                                        "chunk": chunk}),
            ev("C", 0, ts, "pressure", {"level": level})]


def small_trace():
    """a and b fused (one COLLGUARD_ALLREDUCE 50..250): op spans 40..270
    and 40..280, so the collective takes 280-40 = 240 us, 24 + 32 = 56
    bytes; a again alone (MPI_ALLREDUCE, 530..630: 100 us, 24 bytes); c
    broadcast (310..410: 100 us, 1000 bytes). Negotiations 10..30, 20..30,
    300..302, 500..520: sum 52, wall 20 + 2 + 20 = 42. Executions: sum
    230 + 240 + 100 + 100 = 670, wall 240 + 100 + 100 = 440. Events from
    ts 5 to 700: a 695 us run."""
    t = [{"name": "process_name", "ph": "M", "pid": 0,
          "args": {"name": "collguard"}},
         meta(1, "a"), meta(2, "b"), meta(3, "c")]
    t += counters(5, 1024 * MIB, 800 * MIB, 64 * MIB, 4 * MIB, 0)
    t += negotiation(1, "ALLREDUCE", 10, 30) + negotiation(2, "ALLREDUCE",
                                                           20, 30)
    for pid, in_end, out_end, end, args in (
            (1, 50, 260, 270, {"dtype": "f32", "shape": "[2, 3]"}),
            (2, 50, 265, 280, {"dtype": "f64", "shape": "[4]"})):
        t += [ev("B", pid, 40, "ALLREDUCE"),
              ev("B", pid, 40, "MEMCPY_IN_FUSION_BUFFER"), ev("E", pid, 50),
              ev("B", pid, 50, "COLLGUARD_ALLREDUCE"), ev("E", pid, 250),
              ev("B", pid, 250, "MEMCPY_OUT_FUSION_BUFFER"),
              ev("E", pid, out_end), ev("E", pid, end, args=args)]
    t += negotiation(3, "BROADCAST", 300, 302)
    t += [ev("B", 3, 310, "BROADCAST"), ev("B", 3, 310, "COLLGUARD_BROADCAST"),
          ev("E", 3, 410), ev("E", 3, 410, args={"dtype": "u8",
                                                 "shape": "[1000]"})]
    t += [ev("i", 0, 350, "PRESSURE_WARN", {"from": "ok", "to": "warn",
                                            "free_bytes": 512 * MIB}),
          ev("i", 0, 351, "CHUNK_RESIZE", {"from": 4 * MIB, "to": MIB}),
          ev("i", 0, 355, "ALLOC_RETRY", {"category": "fusion",
                                          "failed_bytes": 64 * MIB,
                                          "next_bytes": 32 * MIB}),
          ev("i", 0, 360, "OOM_EARLY_WARNING", {"eta_s": 2.5,
                                                "free_bytes": 512 * MIB})]
    t += counters(400, 512 * MIB, 400 * MIB, 16 * MIB, MIB, 1)
    t += negotiation(1, "ALLREDUCE", 500, 520)
    t += [ev("B", 1, 530, "ALLREDUCE"), ev("B", 1, 530, "MPI_ALLREDUCE"),
          ev("E", 1, 630), ev("E", 1, 630, args={"dtype": "f32",
                                                 "shape": "[2, 3]"})]
    t += [ev("i", 0, 650, "PRESSURE_OK", {"from": "warn", "to": "ok",
                                          "free_bytes": 900 * MIB}),
          ev("i", 0, 651, "CHUNK_RESIZE", {"from": MIB, "to": 4 * MIB})]
    t += counters(700, 900 * MIB, 700 * MIB, 64 * MIB, 4 * MIB, 0)
    return t


def run(*args):
    p = subprocess.run(["/usr/bin/python3", TOOL] + list(args),
                       capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def write(d, name, content):
    path = os.path.join(d, name)
    with open(path, "w") as f:
        f.write(content if isinstance(content, str) else json.dumps(content))
    return path


EXPECTED_LINES = [
    "  ALLREDUCE            2        3       80 B   0.100 ms   0.240 ms   "
    "0.240 ms",
    "  BROADCAST            1        1     1000 B   0.100 ms   0.100 ms   "
    "0.100 ms",
    "  ALLREDUCE  1.50 tensors per collective (max 2), 40 B per collective "
    "(max 56 B), 1 of 2 collectives fused",
    "  BROADCAST  1.00 tensors per collective (max 1), 1000 B per collective "
    "(max 1000 B), 0 of 1 collectives fused",
    "top 2 tensors by time (of 3)",
    "  a      ALLREDUCE     2     0.330 ms     0.040 ms       24 B",
    "  b      ALLREDUCE     1     0.240 ms     0.010 ms       32 B",
    "  negotiation  sum 0.052 ms  wall 0.042 ms (6.0% of the run)  4 spans",
    "  execution    sum 0.670 ms  wall 0.440 ms (63.3% of the run)  4 spans",
    "  free           min 512.00 MiB  max 1.00 GiB  last 900.00 MiB  "
    "(3 samples)",
    "  chunk          min 1.00 MiB  max 4.00 MiB  last 4.00 MiB  (3 samples)",
    "  pressure changes: 2",
    "      0.350 ms  ok -> warn, free 512.00 MiB",
    "      0.650 ms  warn -> ok, free 900.00 MiB",
    "  early warnings: 1",
    "      0.360 ms  OOM in 2.500 s projected, free 512.00 MiB",
    "  allocation retries: 1",
    "      0.355 ms  fusion: 64.00 MiB failed, retrying with 32.00 MiB",
    "  degrade events: 1 (chunk shrinks; the chunk grew back 1 times)",
    "      0.351 ms  chunk 4.00 MiB -> 1.00 MiB",
    "  fusion buffer drops between counter samples: 1",
    "      0.400 ms  fusion buffer 64.00 MiB -> 16.00 MiB",
]


def small_case(d):
    trace = small_trace()
    path = write(d, "small.json", trace)
    rc, out, err = run(path, "--top", "2", "--json",
                       os.path.join(d, "small.summary.json"))
    check(rc == 0, "small trace: exit %d (%s)" % (rc, err.strip()))
    lines = [l.rstrip() for l in out.splitlines()]
    for want in EXPECTED_LINES:
        check(want in lines, "small trace: line missing: %r" % want)
    check("  %d events, 3 tensors, 0.695 ms from first to last event"
          % len(trace) in lines, "small trace: the header line")
    with open(os.path.join(d, "small.summary.json")) as f:
        s = json.load(f)
    ar = s["ops"]["ALLREDUCE"]
    check((ar["collectives"], ar["tensors"], ar["bytes"], ar["max_bytes"])
          == (2, 3, 80, 56), "small trace: allreduce numbers %r" % ar)
    check(ar["latency_us"] == {"p50": 100, "p90": 240, "max": 240,
                               "mean": 170.0},
          "small trace: latency %r" % ar["latency_us"])
    check(s["time"] == {"negotiation_sum_us": 52, "negotiation_wall_us": 42,
                        "negotiations": 4, "execution_sum_us": 670,
                        "execution_wall_us": 440, "executions": 4},
          "small trace: time %r" % s["time"])
    png = os.path.join(d, "small.png")
    check(os.path.exists(png), "small trace: no PNG at the default path")
    check("plot: %s (3 collectives, 12 counter points, 2 pressure changes, "
          "1 early warnings)" % png in lines, "small trace: the plot line")
    # Cut while an operation ran (still valid JSON): the open span is left
    # out and said so.
    cut = trace + [ev("B", 2, 710, "ALLREDUCE")]
    rc, out, err = run(write(d, "open.json", cut), "--no-plot")
    check(rc == 0 and "  1 spans still open at the end of the file (left "
          "out)" in out and "  ALLREDUCE            2        3" in out,
          "open span: rc %d, %s" % (rc, out[:400] + err))


def bad_cases(d):
    good = json.dumps(small_trace())
    cases = [
        ([os.path.join(d, "missing.json")],
         "cannot read %s: No such file or directory"
         % os.path.join(d, "missing.json"), 1),
        ([write(d, "empty.json", "\n")], "is empty", 1),
        ([write(d, "cut.json", good[:len(good) // 2])],
         "the file ends before the JSON does", 1),
        ([write(d, "garbled.json", good.replace('"ph"', '"ph', 1))],
         "is not valid JSON", 1),
        ([write(d, "object.json", {"a": 1})], "not a Chrome trace", 1),
        ([write(d, "other.json", {"traceEvents": [
            meta(1, "python"), ev("X", 1, 1, "step", {"n": 1})]})],
         "holds no collguard events (2 events", 1),
        ([write(d, "unbalanced.json", [meta(0, "collguard"), meta(1, "a"),
                                       ev("E", 1, 5)])],
         "event 2 (tensor a) ends a span at ts 5 that never began", 1),
        ([write(d, "header.json", [meta(0, "collguard")])],
         "nothing recorded yet", 1),
        ([write(d, "nopid.json", [{"ph": "B", "ts": 1}])],
         "event 0 is not an object with a string ph and an integer pid", 1),
        ([write(d, "ok.json", good), "--png",
          os.path.join(d, "no", "such", "dir.png")], "cannot write", 1),
        ([write(d, "ok.json", good), "--top", "-1"], "--top must be", 2),
    ]
    for args, want, code in cases:
        rc, out, err = run(*args)
        check(rc == code and want in err and "Traceback" not in err,
              "%s: want exit %d and %r, got %d: %s" % (
                  os.path.basename(args[0]), code, want, rc, err.strip()))
        if code == 1:
            check(len(err.splitlines()) == 1 and
                  err.startswith("timeline_report: "),
                  "%s: not one timeline_report: line: %r" % (args[0], err))


def dtype_case():
    sys.path.insert(0, os.path.dirname(os.path.abspath(TOOL)))
    import timeline_trace
    with open(TYPES_H) as f:
        rows = re.findall(r'X\(CG_DTYPE_\w+,\s*\d+,\s*(\d+),\s*"(\w+)"\)',
                          f.read())
    header = {name: int(n) for n, name in rows}
    check(len(header) >= 10 and header == timeline_trace.DTYPE_BYTES,
          "dtype sizes: types.h %r, the tool %r" % (
              header, timeline_trace.DTYPE_BYTES))


def fuse_case():
    """a, b, c fused into one COLLGUARD_ALLREDUCE 50..250, c's span begun
    1 us late by the writer (its negotiation ended in the packing
    microsecond); d alone 52..250 is another collective (2 us off); then
    a alone with the same span times as nothing else."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(TOOL)))
    import timeline_trace
    X = timeline_trace.Execution
    xs = [X(n, "ALLREDUCE", b, 270, "COLLGUARD_ALLREDUCE", b, 250, True,
            "f32", "[1]", 4)
          for n, b in (("a", 50), ("b", 50), ("c", 51), ("d", 52))]
    xs.append(X("a", "ALLREDUCE", 300, 400, "COLLGUARD_ALLREDUCE", 300, 400,
                False, "f32", "[1]", 4))
    got = [sorted(f.tensors) for f in timeline_trace._fuse(xs)]
    check(got == [["a", "b", "c"], ["d"], ["a"]],
          "a span begun 1 us late stays in its collective: %r" % got)


with tempfile.TemporaryDirectory(prefix="cg_tl_report.") as d:
    small_case(d)
    bad_cases(d)
    dtype_case()
    fuse_case()
if failures:
    print("%d checks failed" % len(failures))
    sys.exit(1)
print("timeline report: the hand-checked trace, an open span, 11 bad "
      "inputs, the dtype sizes and a fused span begun 1 us late all as "
      "expected")
