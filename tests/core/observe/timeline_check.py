# SPDX-License-Identifier: Apache-2.0
# Checks a collguard timeline (Chrome trace JSON) from the tests:
#   timeline_check.py valid FILE             parses; prints "events N"
#   timeline_check.py fusion FILE N PREFIX   N tensors named PREFIX* each
#       negotiated (NEGOTIATE_ALLREDUCE with a tick per rank) and reduced
#       (ALLREDUCE with the collective nested, between
#       MEMCPY_IN_FUSION_BUFFER and MEMCPY_OUT_FUSION_BUFFER when packed,
#       alone when staged), all in ONE fused collective (the same begin
#       and end timestamps), plus plausible counters
#   timeline_check.py names FILE A,B -C,D    tensors A and B are in the
#       file, C and D are not; CYCLE_START instants if "+cycles" follows
#   timeline_check.py spans FILE T S N [I]   tensor T has N balanced spans
#       named S; and at least one global instant named I when given
#   timeline_check.py instant FILE I         at least one global instant I
# Every mode also checks that Perfetto's importer, which re-sorts events of
# one timestamp, nests each tensor's spans as the file does.
# Exits 1 with the reason on stderr when a check fails.
import json
import sys


def fail(msg):
    sys.stderr.write("timeline_check: %s\n" % msg)
    sys.exit(1)


def load(path):
    with open(path, "rb") as f:
        data = f.read()
    try:
        events = json.loads(data.decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as e:
        fail("%s does not parse (%d bytes): %s" % (path, len(data), e))
    if not isinstance(events, list):
        fail("%s is not a JSON array" % path)
    for e in events:
        if not isinstance(e.get("pid"), int) or "ph" not in e:
            fail("event without an integer pid or ph: %r" % e)
    return events


def tensors(events):
    """pid -> name from the process_name metadata (pid 0 is collguard)."""
    names = {}
    for e in events:
        if e["ph"] == "M" and e.get("name") == "process_name" and e["pid"]:
            names[e["pid"]] = e["args"]["name"]
    return names


def spans(events, pid):
    """The B/E spans of one tensor as (name, begin, end, depth), checking
    that every E closes a B."""
    out, stack = [], []
    for e in events:
        if e["pid"] != pid or e["ph"] not in ("B", "E"):
            continue
        if e["ph"] == "B":
            stack.append((e["name"], e["ts"]))
        else:
            if not stack:
                fail("pid %d: an E at ts %d without its B" % (pid, e["ts"]))
            name, ts = stack.pop()
            if e["ts"] < ts:
                fail("pid %d: %s ends before it begins" % (pid, name))
            out.append((name, ts, e["ts"], len(stack)))
    if stack:
        fail("pid %d: spans left open: %r" % (pid, stack))
    return out


def check_fusion(events, n, prefix):
    names = tensors(events)
    mine = {p: s for p, s in names.items() if s.startswith(prefix)}
    if len(mine) != n:
        fail("%d tensor processes named %s*, expected %d"
             % (len(mine), prefix, n))
    colls, forms = set(), set()
    for pid, name in mine.items():
        sp = {s[0]: s for s in spans(events, pid)}
        for want in ("NEGOTIATE_ALLREDUCE", "ALLREDUCE"):
            if want not in sp:
                fail("%s: no %s span (has %s)" % (name, want, sorted(sp)))
        copies = [c in sp for c in ("MEMCPY_IN_FUSION_BUFFER",
                                    "MEMCPY_OUT_FUSION_BUFFER")]
        if copies[0] != copies[1]:
            fail("%s: one of the two fusion-buffer copies (has %s)"
                 % (name, sorted(sp)))
        forms.add("packed" if copies[0] else "staged")
        coll = [s for s in sp.values() if s[0].endswith("_ALLREDUCE")
                and s[0] != "NEGOTIATE_ALLREDUCE" and s[3] == 1]
        if len(coll) != 1:
            fail("%s: %d collective activities in ALLREDUCE" % (name,
                                                                 len(coll)))
        ticks = [e for e in events if e["pid"] == pid and e["ph"] == "X"]
        if sorted(t["name"] for t in ticks) != ["0", "1"]:
            fail("%s: rank ticks %r" % (name, [t["name"] for t in ticks]))
        colls.add((coll[0][0], coll[0][1], coll[0][2]))
    if len(colls) != 1:
        fail("%d distinct collective spans for %d tensors: %r"
             % (len(colls), n, sorted(colls)[:4]))
    counters = {}
    for e in events:
        if e["ph"] == "C":
            for k, v in e["args"].items():
                counters.setdefault(e["name"] + "." + k, []).append(v)
    free = counters.get("free_memory.host", counters.get("free_memory.device"))
    if not free or min(free) <= 0:
        fail("free memory counters %r" % free)
    for k in ("governor.budget", "governor.fusion_buffer", "governor.chunk"):
        if not counters.get(k) or max(counters[k]) <= 0:
            fail("counter %s: %r" % (k, counters.get(k)))
    if any(v not in (0, 1, 2) for v in counters.get("pressure.level", [-1])):
        fail("pressure levels %r" % counters.get("pressure.level"))
    if len(forms) != 1:
        fail("tensors of one fused collective both packed and staged")
    print("fusion ok: %d tensors, one %s span (%s), %d counter samples"
          % (n, list(colls)[0][0], forms.pop(), len(free)))


def check_names(events, want, absent, cycles):
    names = set(tensors(events).values())
    for n in want:
        if n not in names:
            fail("tensor %s missing (have %s)" % (n, sorted(names)))
        pid = [p for p, s in tensors(events).items() if s == n][0]
        spans(events, pid)
    for n in absent:
        if n in names:
            fail("tensor %s is in the timeline but should not be" % n)
    marks = [e for e in events if e["ph"] == "i" and
             e.get("name") == "CYCLE_START"]
    if cycles and not marks:
        fail("no CYCLE_START instants")
    print("names ok: %d tensors, %d cycle marks" % (len(names), len(marks)))


def check_spans(events, tensor, span, n, instant):
    pids = [p for p, s in tensors(events).items() if s == tensor]
    if len(pids) != 1:
        fail("%d processes named %s" % (len(pids), tensor))
    got = [s for s in spans(events, pids[0]) if s[0] == span]
    if len(got) != n:
        fail("%s: %d %s spans, expected %d" % (tensor, len(got), span, n))
    if instant:
        check_instant(events, instant)
    print("spans ok: %s has %d %s" % (tensor, n, span))


def check_instant(events, instant):
    marks = [e for e in events if e["ph"] == "i" and e.get("s") == "g"
             and e.get("name") == instant]
    if not marks:
        fail("no %s instant (instants: %s)" % (instant, sorted(set(
            e.get("name") for e in events if e["ph"] == "i"))))
    print("instant %s: %d, args %r" % (instant, len(marks),
                                        marks[0].get("args")))


def perfetto_order(events):
    """Perfetto's importer (trace_sorter.h, KeyForType) re-sorts events of
    one timestamp once the trace holds an X: E first, then X by longest
    duration, then the rest, each kind in file order. Every tensor's spans
    must come out the same in that order as in file order (an E sorted
    ahead of its B would close the wrong span, or be dropped)."""
    if not any(e["ph"] == "X" for e in events):
        return

    def key(i_e):
        i, e = i_e
        k = {"E": 0, "X": 1}.get(e["ph"], 2)
        return (e.get("ts", 0), k, -e.get("dur", 0) if k == 1 else 0, i)

    by_pid = {}
    for i, e in enumerate(events):
        if e["ph"] in ("B", "E", "X") and e["pid"]:
            by_pid.setdefault(e["pid"], []).append((i, e))
    def nest(evs, pid):
        """Spans (name, begin, end, depth) and each X's depth by index."""
        out, stack, xdepth = [], [], {}
        for i, e in evs:
            if e["ph"] == "B":
                stack.append((e["name"], e["ts"]))
            elif e["ph"] == "E":
                if not stack:
                    fail("pid %d: in Perfetto's order the E at ts %d has no "
                         "open span" % (pid, e["ts"]))
                name, ts = stack.pop()
                out.append((name, ts, e["ts"], len(stack)))
            else:
                xdepth[i] = len(stack)
        return sorted(out), xdepth

    for pid, evs in by_pid.items():
        file_nest = nest(evs, pid)
        if nest(sorted(evs, key=key), pid) != file_nest:
            fail("pid %d: Perfetto's order (E, then X, then the rest at one "
                 "timestamp) nests the spans or ticks differently from the "
                 "file" % pid)


def main():
    mode, path = sys.argv[1], sys.argv[2]
    events = load(path)
    perfetto_order(events)
    if mode == "valid":
        print("events %d" % len(events))
    elif mode == "fusion":
        check_fusion(events, int(sys.argv[3]), sys.argv[4])
    elif mode == "names":
        want = [n for n in sys.argv[3].split(",") if n]
        absent = [n for n in sys.argv[4].lstrip("-").split(",") if n]
        check_names(events, want, absent, "+cycles" in sys.argv[5:])
    elif mode == "instant":
        check_instant(events, sys.argv[3])
    elif mode == "spans":
        check_spans(events, sys.argv[3], sys.argv[4], int(sys.argv[5]),
                    sys.argv[6] if len(sys.argv) > 6 else None)
    else:
        fail("unknown mode %s" % mode)


if __name__ == "__main__":
    main()
