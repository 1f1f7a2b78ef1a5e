# SPDX-License-Identifier: Apache-2.0
# Reads a collguard timeline (the Chrome trace HOROVOD_TIMELINE writes,
# core/observe/timeline.c) into plain records for timeline_report.py:
# each tensor's negotiations and executions (an operation span with its
# activities nested inside, its dtype and shape from the closing event),
# the fused collectives they form (tensors sharing one collective
# activity span), and process 0's governor counters and instants.
# Malformed input raises TraceError with a sentence naming the file and
# what is wrong; nothing here prints or exits.
import collections
import json

# Bytes per element by the names cg_dtype_name gives (include/collguard/
# types.h, CG_DTYPE_MAP; the test timeline_report_dtypes keeps them equal).
DTYPE_BYTES = {"i8": 1, "u8": 1, "i32": 4, "u32": 4, "i64": 8, "u64": 8,
               "f16": 2, "f32": 4, "f64": 8, "bf16": 2, "i16": 2, "u16": 2}
OPS = ("ALLREDUCE", "BROADCAST", "ALLGATHER")
COPIES = ("MEMCPY_IN_FUSION_BUFFER", "MEMCPY_OUT_FUSION_BUFFER")
COUNTERS = ("free_memory", "governor", "pressure")
INSTANTS = ("PRESSURE_OK", "PRESSURE_WARN", "PRESSURE_CRITICAL",
            "OOM_EARLY_WARNING", "ALLOC_RETRY", "CHUNK_RESIZE")
TIMED = ("B", "E", "X", "i", "I", "C")  # phases that carry a ts


class TraceError(Exception):
    """The timeline cannot be read or is not a collguard timeline."""


# One tensor's execution: the op span [begin, end] in microseconds,
# the collective activity inside it, and what the closing event said.
Execution = collections.namedtuple(
    "Execution", "tensor op begin end activity act_begin act_end packed "
                 "dtype shape bytes")
Negotiation = collections.namedtuple("Negotiation",
                                     "tensor op begin end ranks")
# Tensors run by one collective (one tensor alone is a group of one).
FusedOp = collections.namedtuple("FusedOp",
                                 "op activity begin end tensors bytes")
Timeline = collections.namedtuple(
    "Timeline", "path events tensors negotiations executions fused "
                "counters instants open_spans first_ts last_ts")


def _read(path):
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise TraceError("cannot read %s: %s" % (path, e.strerror or e))
    if not data.strip():
        raise TraceError("%s is empty (a timeline holds at least collguard's "
                         "header; was HOROVOD_TIMELINE=DYNAMIC never "
                         "started?)" % path)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise TraceError("%s is not UTF-8 text (byte %d): not a timeline"
                         % (path, e.start))
    try:
        return json.loads(text)
    except ValueError as e:
        cut = getattr(e, "pos", 0) >= len(text.rstrip())
        raise TraceError(
            "%s is not valid JSON (%d bytes): %s%s" % (
                path, len(data), e,
                "; the file ends before the JSON does: was it cut short "
                "(copied while being written, a full disk)? collguard "
                "keeps it complete after every cycle" if cut else ""))


def _events(path, doc):
    """The event list, each event checked for the fields used here."""
    if isinstance(doc, dict) and isinstance(doc.get("traceEvents"), list):
        doc = doc["traceEvents"]
    if not isinstance(doc, list):
        raise TraceError("%s is JSON but not a Chrome trace (an array of "
                         "events, or an object with traceEvents)" % path)
    for i, e in enumerate(doc):
        if not isinstance(e, dict) or not isinstance(e.get("ph"), str) or \
                not isinstance(e.get("pid"), int):
            raise TraceError("%s: event %d is not an object with a string ph "
                             "and an integer pid: %.120r" % (path, i, e))
        if e["ph"] in TIMED and not isinstance(e.get("ts"), (int, float)):
            raise TraceError("%s: event %d (ph %s) has no numeric ts: %.120r"
                             % (path, i, e["ph"], e))
    return doc


def _shape_elems(shape):
    """Elements of a shape written as "[2, 3]" ("[]": a scalar); None
    when it does not parse."""
    s = shape.strip()
    if not (s.startswith("[") and s.endswith("]")):
        return None
    n = 1
    for d in filter(None, (p.strip() for p in s[1:-1].split(","))):
        if not d.isdigit():
            return None
        n *= int(d)
    return n


def _bytes(args):
    size = DTYPE_BYTES.get(args.get("dtype"))
    n = _shape_elems(args.get("shape", ""))
    return size * n if size is not None and n is not None else None


def _tensor(path, pid, name, evs, negs, execs):
    """Walks one tensor's B/E/X events; returns how many spans were left
    open at the end of the file (a job stopped mid-cycle)."""
    stack = []  # [name, begin, ticks, children]
    for i, e in evs:
        if e["ph"] == "B":
            stack.append([e.get("name", ""), e["ts"], [], []])
        elif e["ph"] == "X":
            if stack:
                stack[-1][2].append(e.get("name"))
        elif e["ph"] == "E":
            if not stack:
                raise TraceError("%s: event %d (tensor %s) ends a span at ts "
                                 "%s that never began" % (path, i, name,
                                                          e["ts"]))
            what, begin, ticks, children = stack.pop()
            end = e["ts"]
            if stack:
                stack[-1][3].append((what, begin, end))
            elif what.startswith("NEGOTIATE_"):
                negs.append(Negotiation(name, what[10:], begin, end,
                                        len(ticks)))
            elif what in OPS:
                args = e.get("args") or {}
                coll = [c for c in children if c[0] not in COPIES]
                act = coll[0] if coll else (what, begin, end)
                execs.append(Execution(
                    name, what, begin, end, act[0], act[1], act[2],
                    any(c[0] in COPIES for c in children),
                    args.get("dtype"), args.get("shape"), _bytes(args)))
    return len(stack)


def _fuse(execs):
    """Groups executions by their collective span: tensors fused into one
    collective share its activity's name, begin and end. The writer may
    start one tensor's span a microsecond late (its negotiation ended in
    the microsecond the group was packed, and on one track an end never
    follows a tick of the same microsecond), so a begin within 1 us of
    the group's, with the same end, is the same collective."""
    groups, last = collections.OrderedDict(), {}
    for x in sorted(execs, key=lambda x: (x.act_begin, x.begin, x.tensor)):
        key = (x.op, x.activity, x.act_end)
        if key not in last or x.act_begin - last[key][3] > 1:
            last[key] = key + (x.act_begin,)
        groups.setdefault(last[key], []).append(x)
    out = []
    for (op, act, _, _), xs in groups.items():
        known = [x.bytes for x in xs if x.bytes is not None]
        out.append(FusedOp(op, act, min(x.begin for x in xs),
                           max(x.end for x in xs), [x.tensor for x in xs],
                           sum(known) if len(known) == len(xs) else None))
    return out


def load(path):
    """The Timeline in path; TraceError when it cannot be read, is not
    JSON, is not a Chrome trace, or holds no collguard events."""
    events = _events(path, _read(path))
    names, header = {}, False
    for e in events:
        if e["ph"] == "M" and e.get("name") == "process_name":
            pname = (e.get("args") or {}).get("name")
            if e["pid"] == 0:
                header = header or pname == "collguard"
            elif isinstance(pname, str):
                names[e["pid"]] = pname
    by_pid = collections.defaultdict(list)
    counters = collections.defaultdict(list)  # "governor.chunk" -> [(ts, v)]
    instants = []                               # (ts, name, args)
    for i, e in enumerate(events):
        if e["pid"] == 0:
            if e["ph"] == "C" and e.get("name") in COUNTERS:
                for k, v in sorted((e.get("args") or {}).items()):
                    counters["%s.%s" % (e["name"], k)].append((e["ts"], v))
            elif e["ph"] in ("i", "I") and e.get("name") in INSTANTS:
                instants.append((e["ts"], e["name"], e.get("args") or {}))
        elif e["ph"] in ("B", "E", "X") and e["pid"] in names:
            by_pid[e["pid"]].append((i, e))
    negs, execs, open_spans = [], [], 0
    for pid, evs in sorted(by_pid.items()):
        open_spans += _tensor(path, pid, names[pid], evs, negs, execs)
    if not header and not negs and not execs and not counters:
        raise TraceError(
            "%s holds no collguard events (%d events: no process 0 named "
            "collguard, no tensor negotiations or operations, no governor "
            "counters); is it a collguard timeline (HOROVOD_TIMELINE)?"
            % (path, len(events)))
    if not negs and not execs and not counters and not instants:
        raise TraceError("%s is a collguard timeline with nothing recorded "
                         "yet (no operations, counters or instants)" % path)
    stamps = [e["ts"] for e in events if e["ph"] in TIMED]
    return Timeline(path, len(events), sorted(set(names.values())), negs,
                    execs, _fuse(execs), dict(counters), instants,
                    open_spans, min(stamps), max(stamps))
