# SPDX-License-Identifier: Apache-2.0
# Checks Prometheus text-format files as node_exporter's textfile collector
# reads them together: valid metric and label names, one HELP and one TYPE
# per family (the same in every file), TYPE before the family's samples,
# samples of a family contiguous, no timestamps, values that parse, counters
# named *_total, and no series repeated within or across the files.
# Usage: prom_check.py FILE... [--expect NAME{LABELS}=VALUE ...]
import re
import sys

NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*$")
SAMPLE = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$")
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"(,|$)')
TYPES = {"counter", "gauge", "histogram", "summary", "untyped"}


def labels_of(text, where):
    out, pos = [], 0
    while pos < len(text):
        m = LABEL.match(text, pos)
        if not m:
            sys.exit(f"{where}: malformed labels {{{text}}}")
        out.append((m.group(1), m.group(2)))
        pos = m.end()
    names = [k for k, _ in out]
    if len(names) != len(set(names)):
        sys.exit(f"{where}: a label repeated in {{{text}}}")
    return tuple(sorted(out))


def check(paths):
    helps, types, series = {}, {}, {}
    for path in paths:
        with open(path) as f:
            text = f.read()
        if not text.endswith("\n"):
            sys.exit(f"{path}: does not end with a newline")
        done, current = set(), None
        for n, line in enumerate(text.split("\n")[:-1], 1):
            where = f"{path}:{n}"
            if line.startswith("# HELP ") or line.startswith("# TYPE "):
                kind, name, rest = line[2:6], *line[7:].split(" ", 1)
                if not NAME.match(name):
                    sys.exit(f"{where}: bad metric name {name!r}")
                seen = helps if kind == "HELP" else types
                if (path, name) in seen:
                    sys.exit(f"{where}: second {kind} for {name}")
                seen[(path, name)] = rest
                if kind == "TYPE" and rest not in TYPES:
                    sys.exit(f"{where}: unknown type {rest!r}")
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
            name, value = m.group(1), m.group(4)
            if name != current or (path, name) not in types:
                sys.exit(f"{where}: sample of {name} outside its family "
                         "(no TYPE line just before)")
            try:
                float(value)
            except ValueError:
                sys.exit(f"{where}: value {value!r} is not a number")
            if types[(path, name)] == "counter" and not name.endswith("_total"):
                sys.exit(f"{where}: counter {name} not named *_total")
            key = (name, labels_of(m.group(3) or "", where))
            if key in series:
                sys.exit(f"{where}: series repeated (first at "
                         f"{series[key][0]})")
            series[key] = (where, float(value))
    for (path, name), t in types.items():
        for (p2, n2), t2 in types.items():
            if n2 == name and t2 != t:
                sys.exit(f"{name}: TYPE {t} in {path} but {t2} in {p2}")
        if (path, name) not in helps:
            sys.exit(f"{path}: {name} has no HELP")
    return series


def main(argv):
    if "--expect" in argv:
        i = argv.index("--expect")
        paths, expects = argv[:i], argv[i + 1:]
    else:
        paths, expects = argv, []
    if not paths:
        sys.exit("usage: prom_check.py FILE... [--expect SERIES=VALUE ...]")
    series = check(paths)
    for e in expects:
        spec, want = e.rsplit("=", 1)
        m = SAMPLE.match(spec + " 0")
        key = (m.group(1), labels_of(m.group(3) or "", "--expect"))
        if key not in series:
            sys.exit(f"expected series {spec} is missing")
        got = series[key][1]
        if want.startswith(">") and not got > float(want[1:]) or \
           not want.startswith(">") and got != float(want):
            sys.exit(f"{spec} is {got:g}, expected {want}")
    print(f"{len(paths)} file(s), {len(series)} series: valid Prometheus "
          "text, no duplicates")


if __name__ == "__main__":
    main(sys.argv[1:])
