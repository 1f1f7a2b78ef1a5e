# SPDX-License-Identifier: Apache-2.0
# A strict checker of Prometheus' text exposition format (0.0.4), for
# collguard's metrics files (as node_exporter's textfile collector reads
# them together) and its HTTP endpoint's bodies: valid metric and label
# names, label values escaped (only \\ \" \n), HELP text escaped (only \\
# \n), one HELP and one TYPE per family (the same in every source), TYPE
# before the family's samples, samples of a family contiguous, no
# timestamps, values that parse, counters named *_total, one sample per
# series within and across the sources, and histograms consistent:
# _bucket series with an le label, cumulative, ending in le="+Inf" equal
# to _count, and a _sum.
# Usage: prom_check.py FILE... [--expect NAME{LABELS}=VALUE ...]
# (VALUE: a number, or >NUMBER.) As a module: check_sources([(where,
# text)...]) returns {(name, labels): (where, value)} or raises SystemExit.
import math
import re
import sys

NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*$")
SAMPLE = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$")
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"(,|$)')
HELP_TEXT = re.compile(r"(?:[^\\\n]|\\[\\n])*$")
TYPES = {"counter", "gauge", "histogram", "summary", "untyped"}
HIST_SUFFIXES = ("_bucket", "_sum", "_count")


def labels_of(text, where):
    out, pos = [], 0
    while pos < len(text):
        m = LABEL.match(text, pos)
        if not m:
            sys.exit(f"{where}: malformed labels {{{text}}}")
        out.append((m.group(1), m.group(2)))
        pos = m.end()
        if m.group(3) == "," and pos == len(text):
            sys.exit(f"{where}: trailing comma in {{{text}}}")
    names = [k for k, _ in out]
    if len(names) != len(set(names)):
        sys.exit(f"{where}: a label repeated in {{{text}}}")
    return tuple(sorted(out))


def parse_value(value, where):
    if value in ("+Inf", "-Inf", "NaN"):
        return float(value.replace("Inf", "inf").replace("NaN", "nan"))
    try:
        return float(value)
    except ValueError:
        sys.exit(f"{where}: value {value!r} is not a number")


def family_of(name, current, types, src):
    """The family a sample named name belongs to, given the current one."""
    if name == current:
        return current
    if current is not None and types.get((src, current)) == "histogram":
        for suf in HIST_SUFFIXES:
            if name == current + suf:
                return current
    return None


def check_histograms(hist):
    for (src, fam, base), parts in hist.items():
        where = f"{src}: {fam}{{{','.join(f'{k}={v}' for k, v in base)}}}"
        buckets = parts.get("bucket", [])
        if not buckets:
            sys.exit(f"{where}: histogram without _bucket series")
        if "sum" not in parts or "count" not in parts:
            sys.exit(f"{where}: histogram without _sum or _count")
        buckets.sort(key=lambda b: b[0])
        if not math.isinf(buckets[-1][0]):
            sys.exit(f"{where}: no le=\"+Inf\" bucket")
        last = -1.0
        for le, v in buckets:
            if v < last:
                sys.exit(f"{where}: bucket le={le:g} holds {v:g}, less than "
                         f"the bucket before ({last:g}): not cumulative")
            last = v
        if buckets[-1][1] != parts["count"]:
            sys.exit(f"{where}: +Inf bucket {buckets[-1][1]:g} != _count "
                     f"{parts['count']:g}")


def check_sources(sources):
    helps, types, series, hist = {}, {}, {}, {}
    for src, text in sources:
        if not text.endswith("\n"):
            sys.exit(f"{src}: does not end with a newline")
        done, current = set(), None
        for n, line in enumerate(text.split("\n")[:-1], 1):
            where = f"{src}:{n}"
            if line.startswith("# HELP ") or line.startswith("# TYPE "):
                kind = line[2:6]
                parts = line[7:].split(" ", 1)
                if len(parts) != 2:
                    sys.exit(f"{where}: {kind} without text")
                name, rest = parts
                if not NAME.match(name):
                    sys.exit(f"{where}: bad metric name {name!r}")
                seen = helps if kind == "HELP" else types
                if (src, name) in seen:
                    sys.exit(f"{where}: second {kind} for {name}")
                seen[(src, name)] = rest
                if kind == "TYPE" and rest not in TYPES:
                    sys.exit(f"{where}: unknown type {rest!r}")
                if kind == "HELP" and not HELP_TEXT.match(rest):
                    sys.exit(f"{where}: HELP text badly escaped: {rest!r}")
                if name in done:
                    sys.exit(f"{where}: family {name} seen before")
                if current is not None and current != name:
                    done.add(current)
                current = name
                continue
            if line == "" or line.startswith("#"):
                continue
            m = SAMPLE.match(line)
            if not m:
                sys.exit(f"{where}: not a sample (or has a timestamp): "
                         f"{line!r}")
            name, value = m.group(1), parse_value(m.group(4), where)
            fam = family_of(name, current, types, src)
            if fam is None or (src, fam) not in types:
                sys.exit(f"{where}: sample of {name} outside its family "
                         "(no TYPE line just before)")
            ftype = types[(src, fam)]
            if ftype == "counter" and not name.endswith("_total"):
                sys.exit(f"{where}: counter {name} not named *_total")
            labels = labels_of(m.group(3) or "", where)
            if ftype == "histogram":
                if name == fam:
                    sys.exit(f"{where}: histogram sample {name} without "
                             "_bucket, _sum or _count")
                suf = name[len(fam) + 1:]
                le = [v for k, v in labels if k == "le"]
                if (suf == "bucket") != bool(le):
                    sys.exit(f"{where}: le label on {name} (only _bucket "
                             "has it, and must)")
                base = tuple(kv for kv in labels if kv[0] != "le")
                h = hist.setdefault((src, fam, base), {})
                if suf == "bucket":
                    h.setdefault("bucket", []).append(
                        (parse_value(le[0], where), value))
                else:
                    h[suf] = value
            key = (name, labels)
            if key in series:
                sys.exit(f"{where}: series repeated (first at "
                         f"{series[key][0]})")
            series[key] = (where, value)
    for (src, name), t in types.items():
        for (p2, n2), t2 in types.items():
            if n2 == name and t2 != t:
                sys.exit(f"{name}: TYPE {t} in {src} but {t2} in {p2}")
        if (src, name) not in helps:
            sys.exit(f"{src}: {name} has no HELP")
    check_histograms(hist)
    return series


def check(paths):
    sources = []
    for path in paths:
        with open(path) as f:
            sources.append((path, f.read()))
    return check_sources(sources)


def expect(series, specs):
    for e in specs:
        spec, want = e.rsplit("=", 1)
        m = SAMPLE.match(spec + " 0")
        key = (m.group(1), labels_of(m.group(3) or "", "--expect"))
        if key not in series:
            sys.exit(f"expected series {spec} is missing")
        got = series[key][1]
        if want.startswith(">") and not got > float(want[1:]) or \
           not want.startswith(">") and got != float(want):
            sys.exit(f"{spec} is {got:g}, expected {want}")


def main(argv):
    if "--expect" in argv:
        i = argv.index("--expect")
        paths, expects = argv[:i], argv[i + 1:]
    else:
        paths, expects = argv, []
    if not paths:
        sys.exit("usage: prom_check.py FILE... [--expect SERIES=VALUE ...]")
    series = check(paths)
    expect(series, expects)
    print(f"{len(paths)} file(s), {len(series)} series: valid Prometheus "
          "text, no duplicates")


if __name__ == "__main__":
    main(sys.argv[1:])
