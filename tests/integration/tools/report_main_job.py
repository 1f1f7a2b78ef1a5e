# SPDX-License-Identifier: Apache-2.0
# integration/tools/timeline_report.py on the timeline the main job
# (collguard-train-demo) wrote, held to two witnesses it does not read:
# rank 0's metrics file from the same run (the engine's own counts of
# tensors, collectives, fused collectives, bytes and early warnings) and
# the trace's raw events, counted here without the tool's code (tensors,
# counter samples, pressure instants, chunk shrinks, the tensor with the
# longest operations). Also: the squeeze shows (warn and critical), and
# the PNG is a PNG of the size drawn, with as many points as the trace.
# Usage: report_main_job.py TOOL DIR (DIR: timeline.json, metrics.rank0.prom)
import collections
import json
import os
import re
import struct
import subprocess
import sys

TOOL, DIR = sys.argv[1], sys.argv[2]
TIMELINE = os.path.join(DIR, "timeline.json")
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
    print("%s: %s" % ("ok" if cond else "FAIL", what))


def metrics(path):
    """{"name{labels}": value} of rank 0's Prometheus file."""
    out = {}
    with open(path) as f:
        for line in f:
            m = re.match(r'^(collguard_\w+)\{rank="0"(?:,op="(\w+)")?\} (\S+)$',
                         line.strip())
            if m:
                key = m.group(1) + ("." + m.group(2) if m.group(2) else "")
                out[key] = float(m.group(3))
    return out


def raw(path):
    """Counts taken straight from the events."""
    with open(path) as f:
        events = json.load(f)
    names = {e["pid"]: e["args"]["name"] for e in events
             if e["ph"] == "M" and e["name"] == "process_name" and e["pid"]}
    inst = collections.Counter(e["name"] for e in events if e["ph"] == "i")
    shrinks = sum(1 for e in events if e["ph"] == "i" and
                  e["name"] == "CHUNK_RESIZE" and
                  e["args"]["to"] < e["args"]["from"])
    samples = sum(1 for e in events if e["ph"] == "C" and
                  e["name"] == "governor")
    op_time, stacks = collections.Counter(), collections.defaultdict(list)
    for e in events:
        if e["pid"] in names and e["ph"] in ("B", "E"):
            st = stacks[e["pid"]]
            if e["ph"] == "B":
                st.append((e["name"], e["ts"]))
            else:
                name, ts = st.pop()
                if not st and name in ("ALLREDUCE", "BROADCAST"):
                    op_time[names[e["pid"]]] += e["ts"] - ts
    return {"tensors": len(names), "instants": inst, "shrinks": shrinks,
            "samples": samples, "op_time": op_time}


def png_size(path):
    with open(path, "rb") as f:
        head = f.read(24)
    if head[:8] != b"\x89PNG\r\n\x1a\n" or head[12:16] != b"IHDR":
        return None
    return struct.unpack(">II", head[16:24])


m = metrics(os.path.join(DIR, "metrics.rank0.prom"))
r = raw(TIMELINE)
png, js = os.path.join(DIR, "report.png"), os.path.join(DIR, "report.json")
p = subprocess.run(["/usr/bin/python3", TOOL, TIMELINE, "--png", png,
                    "--json", js, "--top", "5"], capture_output=True,
                   text=True)
sys.stdout.write(p.stdout)
check(p.returncode == 0 and p.stderr == "",
      "the report ran (exit %d) %s" % (p.returncode, p.stderr.strip()))
with open(js) as f:
    s = json.load(f)
ar, bc, g = s["ops"]["ALLREDUCE"], s["ops"]["BROADCAST"], s["governor"]
for got, key in ((ar["tensors"], "collguard_hvd_allreduce_tensors_total"),
                 (ar["collectives"],
                  "collguard_hvd_op_duration_seconds_count.allreduce"),
                 (ar["fused_collectives"], "collguard_hvd_fused_calls_total"),
                 (ar["max_tensors"], "collguard_hvd_max_fused_tensors"),
                 (ar["bytes"], "collguard_hvd_op_bytes_total.allreduce"),
                 (bc["collectives"], "collguard_hvd_broadcast_calls_total"),
                 (bc["bytes"], "collguard_hvd_op_bytes_total.broadcast"),
                 (len(g["early_warnings"]),
                  "collguard_governor_early_warnings_total")):
    check(got == m.get(key), "%s: report %s, metrics %s" % (key, got,
                                                           m.get(key)))
check(0 < r["shrinks"] == g["chunk_resizes"]["down"] ==
      len(g["degrades"]) <= m["collguard_governor_degrades_total"],
      "degrade events: report %d, chunk shrinks in the trace %d, governor "
      "degrade steps %d" % (len(g["degrades"]), r["shrinks"],
                            m["collguard_governor_degrades_total"]))
check(s["tensors"] == r["tensors"], "tensors: report %d, trace %d"
      % (s["tensors"], r["tensors"]))
check(g["budget_bytes"]["samples"] == r["samples"] > 2,
      "counter samples: report %d, trace %d" % (g["budget_bytes"]["samples"],
                                                r["samples"]))
levels = [c["to"] for c in g["pressure_changes"]]
check("warn" in levels and "critical" in levels and len(levels) == sum(
    r["instants"][n] for n in ("PRESSURE_OK", "PRESSURE_WARN",
                               "PRESSURE_CRITICAL")),
      "pressure changes %r match the trace's instants" % levels)
top, most = s["top_tensors"][0], max(r["op_time"].values())
check(top["exec_us"] == r["op_time"][top["name"]] == most,
      "top tensor: report %s %d us, trace %d us, the trace's longest %d us"
      % (top["name"], top["exec_us"], r["op_time"][top["name"]], most))
check(0 < s["time"]["negotiation_wall_us"] <= s["time"]["negotiation_sum_us"]
      and 0 < s["time"]["execution_wall_us"] <= s["span_us"],
      "negotiation and execution time %r within the run" % s["time"])
check(png_size(png) == (1100, 800), "PNG %s, %r pixels" % (png,
                                                           png_size(png)))
check(s["plot"]["collectives"] == ar["collectives"] + bc["collectives"] and
      s["plot"]["counter_points"] == 4 * r["samples"] and
      s["plot"]["early_warnings"] == r["instants"]["OOM_EARLY_WARNING"],
      "plotted %r" % s["plot"])
if failures:
    print("%d checks failed" % len(failures))
    sys.exit(1)
print("timeline report on the main job's timeline: every number matches "
      "the metrics file and the trace")
