# SPDX-License-Identifier: Apache-2.0
# Checks integration/grafana/collguard.json: it loads as JSON, every panel
# has targets, and every collguard_* series an expression names is one the
# library exports (the renderer's text, parsed strictly by prom_check;
# histogram families as their _bucket/_sum/_count series); and every
# family the library exports is plotted somewhere.
# Usage: grafana_check.py DASHBOARD.json METRICS_TEXT_FILE PROM_CHECK_DIR
import json
import re
import sys

dash_path, text_path, check_dir = sys.argv[1:4]
sys.path.insert(0, check_dir)
import prom_check  # noqa: E402

with open(text_path) as f:
    series = prom_check.check_sources([(text_path, f.read())])
exported = {name for name, _ in series}
with open(dash_path) as f:
    dash = json.load(f)
if not dash.get("panels"):
    sys.exit(f"{dash_path}: no panels")
used, nexpr = set(), 0
for p in dash["panels"]:
    targets = p.get("targets") or []
    if not targets:
        sys.exit(f"{dash_path}: panel {p.get('title')!r} has no targets")
    for t in targets:
        expr = t.get("expr", "")
        names = set(re.findall(r"\bcollguard_[a-zA-Z0-9_]+", expr))
        if not names:
            sys.exit(f"panel {p['title']!r}: expression without a "
                     f"collguard series: {expr!r}")
        for n in names:
            if n not in exported:
                sys.exit(f"panel {p['title']!r}: {n} is not a series the "
                         f"library exports (expr {expr!r})")
        used |= names
        nexpr += 1
for v in dash.get("templating", {}).get("list", []):
    for n in re.findall(r"\bcollguard_[a-zA-Z0-9_]+", v.get("query", "")):
        if n not in exported:
            sys.exit(f"variable {v['name']}: {n} is not exported")
families = {re.sub(r"_(bucket|sum|count)$", "", n)
            if n.startswith("collguard_hvd_op_duration_seconds") else n
            for n in exported}
plotted = {re.sub(r"_(bucket|sum|count)$", "", n)
           if n.startswith("collguard_hvd_op_duration_seconds") else n
           for n in used}
missing = sorted(families - plotted - {"collguard_info"})
if missing:
    sys.exit(f"{dash_path}: exported but not plotted: {', '.join(missing)}")
print(f"{dash_path}: {len(dash['panels'])} panels, {nexpr} expressions, "
      f"all {len(used)} series names exported; every family plotted")
