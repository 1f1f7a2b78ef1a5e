# SPDX-License-Identifier: Apache-2.0
# The numbers of timeline_report.py's text summary, computed from a
# timeline_trace.Timeline into one dict (also what --json writes), and
# the text rendered from that dict: operations and their latency, fusion
# efficiency (tensors and bytes per collective), the top tensors by time,
# time in negotiation versus execution, and the governor (samples, pressure
# changes, early warnings, degrade events: the chunk shrinks the trace's
# CHUNK_RESIZE instants record, and the fusion buffer's drops between
# counter samples). Times are microseconds, as in the trace; sizes are
# bytes.
import collections

LEVELS = {"PRESSURE_OK": "ok", "PRESSURE_WARN": "warn",
          "PRESSURE_CRITICAL": "critical"}


def _union(intervals):
    """Microseconds covered by at least one [begin, end] interval."""
    total, cur_b, cur_e = 0, None, None
    for b, e in sorted(intervals):
        if cur_e is None or b > cur_e:
            if cur_e is not None:
                total += cur_e - cur_b
            cur_b, cur_e = b, e
        else:
            cur_e = max(cur_e, e)
    return total + (cur_e - cur_b if cur_e is not None else 0)


def _rank(values, q):
    """Nearest-rank percentile of a non-empty list."""
    s = sorted(values)
    return s[max(0, -(-len(s) * q // 100) - 1)]


def _ops(tl):
    out = collections.OrderedDict()
    for op in sorted({f.op for f in tl.fused}):
        fs = [f for f in tl.fused if f.op == op]
        lat = [f.end - f.begin for f in fs]
        sizes = [len(f.tensors) for f in fs]
        known = [f.bytes for f in fs if f.bytes is not None]
        out[op] = {
            "collectives": len(fs), "tensors": sum(sizes),
            "fused_collectives": sum(1 for n in sizes if n > 1),
            "tensors_per_collective": sum(sizes) / len(fs),
            "max_tensors": max(sizes),
            "bytes": sum(known) if len(known) == len(fs) else None,
            "bytes_per_collective": (sum(known) / len(fs)
                                     if len(known) == len(fs) else None),
            "max_bytes": max(known) if known else None,
            "latency_us": {"p50": _rank(lat, 50), "p90": _rank(lat, 90),
                           "max": max(lat), "mean": sum(lat) / len(lat)},
        }
    return out


def _tensors(tl):
    per = collections.defaultdict(lambda: {"executions": 0, "exec_us": 0,
                                           "negotiations": 0, "neg_us": 0,
                                           "bytes": None, "op": None})
    for x in tl.executions:
        t = per[x.tensor]
        t["executions"] += 1
        t["exec_us"] += x.end - x.begin
        t["bytes"], t["op"] = x.bytes, x.op
    for n in tl.negotiations:
        t = per[n.tensor]
        t["negotiations"] += 1
        t["neg_us"] += n.end - n.begin
        t["op"] = t["op"] or n.op
    rows = [dict(v, name=k) for k, v in per.items()]
    return sorted(rows, key=lambda r: (-r["exec_us"], -r["neg_us"],
                                       r["name"]))


def _series(tl, key):
    vals = [v for _, v in tl.counters.get(key, [])]
    if not vals:
        return None
    return {"samples": len(vals), "min": min(vals), "max": max(vals),
            "last": vals[-1]}


def _governor(tl):
    kind = "device" if "free_memory.device" in tl.counters else "host"
    g = {"memory": kind,
         "free_bytes": _series(tl, "free_memory." + kind),
         "budget_bytes": _series(tl, "governor.budget"),
         "fusion_buffer_bytes": _series(tl, "governor.fusion_buffer"),
         "chunk_bytes": _series(tl, "governor.chunk"),
         "pressure_changes": [], "early_warnings": [], "alloc_retries": [],
         "chunk_resizes": {"down": 0, "up": 0}, "degrades": [],
         "fusion_drops": []}
    for ts, name, a in tl.instants:
        if name in LEVELS:
            g["pressure_changes"].append(
                {"ts": ts, "from": a.get("from"), "to": LEVELS[name],
                 "free_bytes": a.get("free_bytes")})
        elif name == "OOM_EARLY_WARNING":
            g["early_warnings"].append({"ts": ts, "eta_s": a.get("eta_s"),
                                        "free_bytes": a.get("free_bytes")})
        elif name == "ALLOC_RETRY":
            g["alloc_retries"].append(
                {"ts": ts, "category": a.get("category"),
                 "failed_bytes": a.get("failed_bytes"),
                 "next_bytes": a.get("next_bytes")})
        elif name == "CHUNK_RESIZE":
            down = a.get("to", 0) < a.get("from", 0)
            g["chunk_resizes"]["down" if down else "up"] += 1
            if down:
                g["degrades"].append({"ts": ts, "from": a["from"],
                                      "to": a["to"]})
    # The fusion buffer the ranks agreed on, as the counters sampled it.
    fusion = tl.counters.get("governor.fusion_buffer", [])
    for (_, a), (ts, b) in zip(fusion, fusion[1:]):
        if b < a:
            g["fusion_drops"].append({"ts": ts, "from": a, "to": b})
    return g


def summarize(tl):
    """Every number of the report, as one dict (JSON-ready)."""
    span = tl.last_ts - tl.first_ts
    negs = [(n.begin, n.end) for n in tl.negotiations]
    execs = [(x.begin, x.end) for x in tl.executions]
    return {
        "file": tl.path, "events": tl.events, "span_us": span,
        "tensors": len(tl.tensors), "open_spans": tl.open_spans,
        "unknown_bytes": sum(1 for x in tl.executions if x.bytes is None),
        "ops": _ops(tl), "top_tensors": _tensors(tl),
        "time": {"negotiation_sum_us": sum(e - b for b, e in negs),
                 "negotiation_wall_us": _union(negs),
                 "negotiations": len(negs),
                 "execution_sum_us": sum(e - b for b, e in execs),
                 "execution_wall_us": _union(execs),
                 "executions": len(execs)},
        "governor": _governor(tl),
    }


def size(n):
    """Bytes as text: 512 B, 1.50 KiB, 26.00 MiB, 2.00 GiB; '?' for None."""
    if n is None:
        return "?"
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(n) >= div:
            return "%.2f %s" % (n / div, unit)
    return "%d B" % n


def ms(us):
    return "%.3f ms" % (us / 1000.0)


def _pct(part, whole):
    return "%.1f%%" % (100.0 * part / whole) if whole else "-"


def _governor_text(g, out):
    out.append("governor (%s memory)" % g["memory"])
    for key, label in (("free_bytes", "free"), ("budget_bytes", "budget"),
                       ("fusion_buffer_bytes", "fusion buffer"),
                       ("chunk_bytes", "chunk")):
        s = g[key]
        out.append("  %-14s %s" % (label, "no samples" if s is None else
                   "min %s  max %s  last %s  (%d samples)" % (
                       size(s["min"]), size(s["max"]), size(s["last"]),
                       s["samples"])))
    pc = g["pressure_changes"]
    out.append("  pressure changes: %d" % len(pc))
    for p in pc:
        out.append("    %10s  %s -> %s, free %s" % (
            ms(p["ts"]), p["from"], p["to"], size(p["free_bytes"])))
    ew = g["early_warnings"]
    out.append("  early warnings: %d" % len(ew))
    for w in ew:
        out.append("    %10s  OOM in %.3f s projected, free %s" % (
            ms(w["ts"]), w["eta_s"] if w["eta_s"] is not None else -1,
            size(w["free_bytes"])))
    out.append("  allocation retries: %d" % len(g["alloc_retries"]))
    for r in g["alloc_retries"]:
        out.append("    %10s  %s: %s failed, retrying with %s" % (
            ms(r["ts"]), r["category"], size(r["failed_bytes"]),
            size(r["next_bytes"])))
    cr = g["chunk_resizes"]
    out.append("  degrade events: %d (chunk shrinks; the chunk grew back %d "
               "times)" % (cr["down"], cr["up"]))
    for d in g["degrades"]:
        out.append("    %10s  chunk %s -> %s" % (ms(d["ts"]), size(d["from"]),
                                                 size(d["to"])))
    out.append("  fusion buffer drops between counter samples: %d"
               % len(g["fusion_drops"]))
    for d in g["fusion_drops"]:
        out.append("    %10s  fusion buffer %s -> %s" % (
            ms(d["ts"]), size(d["from"]), size(d["to"])))


def render(s, top):
    """The text summary of summarize()'s dict, top tensors at most."""
    out = ["collguard timeline report: %s" % s["file"],
           "  %d events, %d tensors, %s from first to last event" % (
               s["events"], s["tensors"], ms(s["span_us"]))]
    if s["open_spans"]:
        out.append("  %d spans still open at the end of the file (left out)"
                   % s["open_spans"])
    if s["unknown_bytes"]:
        out.append("  %d executions of unknown dtype or shape (bytes '?')"
                   % s["unknown_bytes"])
    out.append("")
    out.append("operations (a collective: one fused group or one tensor "
               "alone; latency: first copy in to completion)")
    out.append("  %-10s %11s %8s %10s   %-10s %-10s %-10s" % (
        "op", "collectives", "tensors", "bytes", "p50", "p90", "max"))
    for op, o in s["ops"].items():
        lat = o["latency_us"]
        out.append("  %-10s %11d %8d %10s   %-10s %-10s %-10s" % (
            op, o["collectives"], o["tensors"], size(o["bytes"]),
            ms(lat["p50"]), ms(lat["p90"]), ms(lat["max"])))
    out.append("")
    out.append("fusion efficiency")
    for op, o in s["ops"].items():
        out.append("  %-10s %.2f tensors per collective (max %d), %s per "
                   "collective (max %s), %d of %d collectives fused" % (
                       op, o["tensors_per_collective"], o["max_tensors"],
                       size(o["bytes_per_collective"]), size(o["max_bytes"]),
                       o["fused_collectives"], o["collectives"]))
    out.append("")
    rows = s["top_tensors"][:top]
    out.append("top %d tensors by time (of %d)" % (len(rows), s["tensors"]))
    w = min(max([len(r["name"]) for r in rows] + [6]), 60)
    out.append("  %-*s %-9s %5s %12s %12s %10s" % (
        w, "tensor", "op", "runs", "execution", "negotiation", "bytes"))
    for r in rows:
        out.append("  %-*s %-9s %5d %12s %12s %10s" % (
            w, r["name"], r["op"] or "-", r["executions"], ms(r["exec_us"]),
            ms(r["neg_us"]), size(r["bytes"])))
    t = s["time"]
    out.append("")
    out.append("negotiation versus execution (sum over tensors; wall: time "
               "with at least one open)")
    out.append("  negotiation  sum %s  wall %s (%s of the run)  %d spans" % (
        ms(t["negotiation_sum_us"]), ms(t["negotiation_wall_us"]),
        _pct(t["negotiation_wall_us"], s["span_us"]), t["negotiations"]))
    out.append("  execution    sum %s  wall %s (%s of the run)  %d spans" % (
        ms(t["execution_sum_us"]), ms(t["execution_wall_us"]),
        _pct(t["execution_wall_us"], s["span_us"]), t["executions"]))
    out.append("")
    _governor_text(s["governor"], out)
    return "\n".join(out) + "\n"
