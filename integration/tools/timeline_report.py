#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
# timeline_report.py TIMELINE [--png FILE | --no-plot] [--top N] [--json FILE]
# Reads a collguard timeline (HOROVOD_TIMELINE's Chrome trace) and prints
# a text summary (operations and latency, fusion efficiency, top tensors by
# time, negotiation versus execution, the governor's samples, pressure
# changes, early warnings and degrade events), writes a PNG of collective
# latency against free memory and chunk size over time (default: the
# timeline's name with .png), and with --json the summary's numbers.
# Exit status: 0 done, 1 unreadable or not a collguard timeline (a one-line
# reason on stderr), 2 bad arguments. Parsing: timeline_trace.py; numbers
# and text: timeline_summary.py; picture: timeline_plot.py.
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import timeline_summary  # noqa: E402
import timeline_trace  # noqa: E402


def _args(argv):
    p = argparse.ArgumentParser(
        prog="timeline_report.py",
        description="Summarise a collguard timeline and plot it.")
    p.add_argument("timeline", help="the Chrome trace HOROVOD_TIMELINE wrote")
    p.add_argument("--png", help="where the picture goes (default: the "
                   "timeline's path with .png instead of .json)")
    p.add_argument("--no-plot", action="store_true",
                   help="only the text summary")
    p.add_argument("--top", type=int, default=10, metavar="N",
                   help="tensors listed by time (default 10)")
    p.add_argument("--json", metavar="FILE",
                   help="also write the summary's numbers as JSON")
    a = p.parse_args(argv)
    if a.top < 0:
        p.error("--top must be 0 or more, not %d" % a.top)
    if a.png and a.no_plot:
        p.error("--png and --no-plot contradict each other")
    if a.png is None and not a.no_plot:
        stem = a.timeline[:-5] if a.timeline.endswith(".json") else a.timeline
        a.png = stem + ".png"
    return a


def _fail(msg):
    sys.stderr.write("timeline_report: %s\n" % msg)
    return 1


def main(argv):
    a = _args(argv)
    try:
        tl = timeline_trace.load(a.timeline)
    except timeline_trace.TraceError as e:
        return _fail(str(e))
    summary = timeline_summary.summarize(tl)
    sys.stdout.write(timeline_summary.render(summary, a.top))
    if a.png:
        import timeline_plot
        try:
            drawn = timeline_plot.plot(tl, summary, a.png)
        except RuntimeError as e:
            return _fail(str(e))
        summary["plot"] = dict(drawn, file=a.png)
        print("\nplot: %s (%d collectives, %d counter points, %d pressure "
              "changes, %d early warnings)" % (
                  a.png, drawn["collectives"], drawn["counter_points"],
                  drawn["pressure_changes"], drawn["early_warnings"]))
    if a.json:
        try:
            with open(a.json, "w") as f:
                json.dump(summary, f, indent=1, sort_keys=True)
                f.write("\n")
        except OSError as e:
            return _fail("cannot write %s: %s" % (a.json, e.strerror or e))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
