# SPDX-License-Identifier: Apache-2.0
"""The memory-guard benchmark's table and plot, from the JSON lines of
memguard.py's cases: one row per (dtype, F), one column group per mode
(completes or how it failed, step time, slowdown against the same mode
unconstrained, collguard's own peak by category and its budget, NCCL's
memory, exact results); then the rows with the ballast before the first
collective (before NCCL's communicator: what AUTO chose); then collguard
host-staged against NCCL (the step-time ratio); then the growing-ballast
trace; then the targets checked. Writes OUTDIR/table.md and, where matplotlib is installed,
OUTDIR/memguard.png. Exit 1 when a target is missed.
  report.py RESULTS.jsonl OUTDIR
"""
import json
import os
import sys

MiB = 1 << 20
MODES = ("horovod", "ddp", "collguard")
LABEL = {"horovod": "Horovod defaults", "ddp": "DDP defaults",
         "collguard": "collguard"}


def size(b):
    if b is None:
        return "-"
    if b >= 1 << 30 and b % (1 << 30) == 0:
        return "%d GiB" % (b >> 30)
    return "%.0f MiB" % (b / MiB) if b >= MiB else "%d KiB" % (b >> 10)


def load(path):
    cases = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                cases.append(json.loads(line))
    return cases


def right(c):
    """Results bit-exact; with a rank count that is not a power of two
    (the average x * n / n rounds) within 1e-6 of the input."""
    if c.get("exact") is None and c.get("max_rel_err") is not None:
        return c["max_rel_err"] <= 1e-6
    return bool(c.get("exact"))


def outcome(c):
    if c is None:
        return "not run"
    if c.get("completed"):
        return "ok" if right(c) else "WRONG RESULT"
    kind = "OOM" if c.get("oom") else "error"
    return "%s: %s" % (kind, c.get("error", "?")[:110])


def collguard_peak(c):
    """collguard's own GPU memory, peak by category since the ballast."""
    peak = (c.get("collguard") or {}).get("device_peak_bytes") or {}
    return sum(peak.values()), peak


def main_rows(cases):
    """The rows squeezed after the communicator (not --ballast-first)."""
    return [c for c in cases if c["mode"] in MODES and
            not c.get("ballast_first")]


def table(cases):
    cases = main_rows(cases)
    by = {(c["mode"], c["dtype"], c["free_req"]): c for c in cases}
    frees = sorted({c["free_req"] for c in cases if c["mode"] in MODES and
                    c["free_req"] is not None}, reverse=True)
    lines, misses = [], []
    for dtype in ("fp32", "bf16"):
        if not any(c["dtype"] == dtype for c in cases if c["mode"] in MODES):
            continue
        against = ("same process unconstrained in alternating blocks, "
                   "trimmed means; per-round range" if any(c.get("slowdown") for c in cases) else
                   "same process unconstrained" if any(
                       c.get("base_step_ms_median") for c in cases)
                   else "the unconstrained run")
        lines += ["", "#### %s gradients" % dtype, "",
                  "| free F | Horovod defaults | DDP defaults | collguard | "
                  "collguard ms/step (x %s) | " % against +
                  "collguard peak "
                  "(fusion/staging/other) | budget at end | NCCL create + "
                  "first use | exact |",
                  "|---|---|---|---|---|---|---|---|---|"]
        base = {m: by.get((m, dtype, None)) for m in MODES}
        for free in [None] + frees:
            row = {m: by.get((m, dtype, free)) for m in MODES}
            cg = row["collguard"]
            ms = "-"
            if cg and cg.get("completed"):
                b = base["collguard"]
                spread = ""
                if cg.get("slowdown"):
                    # trimmed means of alternating blocks, same process
                    ratio = cg["slowdown"]
                    rs = cg.get("round_slowdowns") or [ratio]
                    spread = " %.2f-%.2f" % (min(rs), max(rs))
                elif cg.get("base_step_ms_median"):
                    # against the same process before the ballast
                    ratio = cg["step_ms_median"] / cg["base_step_ms_median"]
                else:
                    ratio = (cg["step_ms_median"] / b["step_ms_median"]
                             if b and b.get("completed") else None)
                ms = "%.2f" % cg.get("step_ms_mean",
                                     cg["step_ms_median"]) + (
                    " (%.2fx%s)" % (ratio, spread) if ratio else "")
                if free is not None and free >= 256 * MiB and ratio and \
                        ratio > 1.10:
                    misses.append("%s F=%s: collguard slowdown %.2fx > 1.10"
                                  % (dtype, size(free), ratio))
                total, peak = collguard_peak(cg)
                budget = (cg.get("collguard") or {}).get("budget_bytes")
                other = total - peak.get("fusion", 0) - peak.get("staging", 0)
                pk = "%s / %s / %s" % (size(peak.get("fusion", 0)),
                                       size(peak.get("staging", 0)),
                                       size(other))
                if budget is None:
                    misses.append("%s F=%s: collguard reported no budget" %
                                  (dtype, size(free)))
                elif free is not None and total > budget:
                    misses.append("%s F=%s: collguard's peak %s above its "
                                  "budget %s" % (dtype, size(free),
                                                 size(total), size(budget)))
                nccl = "%s + %s" % (
                    size(cg.get("comm_create_bytes")),
                    size(max(0, (cg.get("first_use_bytes") or 0) -
                             total)))
                exact = "yes" if cg.get("exact") else \
                    ("within %.1g" % cg["max_rel_err"] if right(cg) else "NO")
                if not right(cg):
                    misses.append("%s F=%s: collguard result differs" %
                                  (dtype, size(free)))
            else:
                pk, budget, nccl, exact = "-", None, "-", "-"
            for m in MODES:
                if row[m] is not None and not row[m].get("completed") and \
                        m == "collguard":
                    misses.append("%s F=%s: collguard failed: %s" %
                                  (dtype, size(free), outcome(row[m])))
            lines.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                "unconstrained" if free is None else size(free),
                outcome(row["horovod"]), outcome(row["ddp"]),
                outcome(row["collguard"]), ms, pk, size(budget), nccl, exact))
    return lines, misses


BACKEND = {0: "COLLGUARD", 1: "MPI", 2: "NCCL", 3: "AUTO"}


def auto_cell(c):
    """What AUTO chose: the backend, NCCL's estimate against the smallest
    budget, NCCL's measured creation, fallbacks."""
    a = c.get("auto") or {}
    b = a.get("gpu_backend")
    if b is None:
        return "-"
    if b == 3:
        return "not chosen (no CUDA collective)"
    est, bud = a.get("nccl_estimate_bytes"), a.get("nccl_budget_bytes")
    text = BACKEND.get(b, str(b)) + (" host-staged" if b == 0 else "")
    if est:
        text += ": NCCL %s %s budget %s" % (
            size(est), "<=" if bud is not None and est <= bud else ">",
            size(bud))
    if b == 2 and a.get("nccl_create_bytes"):
        text += ", made %s" % size(a["nccl_create_bytes"])
    if a.get("nccl_fallbacks"):
        text += ", %d fallback(s)" % a["nccl_fallbacks"]
    return text


def auto_miss(c):
    """AUTO's choice against its rule: NCCL where its estimate fits the
    budget and its creation did not fail for memory, else COLLGUARD; on a
    CPU (no CUDA collective) nothing chosen."""
    a = c.get("auto") or {}
    b = a.get("gpu_backend")
    if b is None:
        return "collguard's core_stats() has no gpu_backend: this " \
            "module does not report what AUTO chose (mpi_lib_v2's " \
            "pt_core_stats)"
    if str(c.get("device", "")).startswith("cpu"):
        return None if b == 3 else "on a CPU AUTO chose %s" % BACKEND.get(b)
    est, bud = a.get("nccl_estimate_bytes"), a.get("nccl_budget_bytes")
    if b == 3:
        return "AUTO chose nothing at the first CUDA collective"
    if est is None or bud is None:
        return "AUTO's estimate or budget not reported"
    want = 2 if est <= bud and not a.get("nccl_fallbacks") else 0
    if b != want:
        return "AUTO chose %s, its rule says %s (NCCL %s, budget %s, %d " \
            "fallback(s))" % (BACKEND.get(b), BACKEND.get(want), size(est),
                              size(bud), a.get("nccl_fallbacks") or 0)
    return None


def first_outcome(c):
    """outcome(), with where a failed case stopped."""
    text = outcome(c)
    if c is not None and not c.get("completed") and c.get("phase"):
        text = text.replace(":", " at %s:" % c["phase"], 1)
    return text


def first_lines(cases):
    """The ballast before the first collective: nobody's NCCL
    communicator exists yet; collguard with HOROVOD_GPU_OPERATIONS unset."""
    cases = [c for c in cases if c["mode"] in MODES and
             c.get("ballast_first")]
    lines, misses = [], []
    by = {(c["mode"], c["dtype"], c["free_req"]): c for c in cases}
    for dtype in ("fp32", "bf16"):
        mine = [c for c in cases if c["dtype"] == dtype]
        if not mine:
            continue
        frees = sorted({c["free_req"] for c in mine},
                       key=lambda f: (f is not None, -(f or 0)))
        lines += ["", "#### before NCCL's communicator: %s gradients, the "
                  "ballast before the first collective" % dtype, "",
                  "| free F | Horovod defaults | DDP defaults | collguard "
                  "(AUTO) | AUTO chose | collguard ms/step (median) | "
                  "collguard peak (fusion/staging/other) | budget at end | "
                  "exact |", "|---|---|---|---|---|---|---|---|---|"]
        for free in frees:
            row = {m: by.get((m, dtype, free)) for m in MODES}
            cg = row["collguard"]
            name = "unconstrained" if free is None else size(free)
            ms = pk = exact = "-"
            budget = None
            if cg is not None and cg.get("completed"):
                ms = "%.2f" % cg["step_ms_median"]
                total, peak = collguard_peak(cg)
                other = total - peak.get("fusion", 0) - peak.get("staging", 0)
                pk = "%s / %s / %s" % (size(peak.get("fusion", 0)),
                                       size(peak.get("staging", 0)),
                                       size(other))
                budget = (cg.get("collguard") or {}).get("budget_bytes")
                if budget is not None and free is not None and total > budget:
                    misses.append("first %s F=%s: collguard's peak %s above "
                                  "its budget %s" % (dtype, name, size(total),
                                                     size(budget)))
                exact = "yes" if cg.get("exact") else \
                    ("within %.1g" % cg["max_rel_err"] if right(cg) else "NO")
                if not right(cg):
                    misses.append("first %s F=%s: collguard result differs"
                                  % (dtype, name))
            elif cg is not None:
                misses.append("first %s F=%s: collguard failed: %s" %
                              (dtype, name, first_outcome(cg)))
            if cg is not None:
                why = auto_miss(cg)
                if why:
                    misses.append("first %s F=%s: %s" % (dtype, name, why))
            lines.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                name, first_outcome(row["horovod"]),
                first_outcome(row["ddp"]), first_outcome(cg),
                auto_cell(cg) if cg is not None else "-", ms, pk,
                size(budget), exact))
    return lines, misses


def compare_lines(cases):
    """collguard host-staged against collguard over NCCL, one process,
    alternating blocks."""
    cases = [c for c in cases if c["mode"] == "compare"]
    lines, misses = [], []
    if not cases:
        return lines, misses
    cpu = any(str(c.get("device", "")).startswith("cpu") for c in cases)
    lines += ["", "#### host-staged (HOROVOD_GPU_OPERATIONS=COLLGUARD) "
              "against NCCL, collguard, same process, alternating blocks",
              ""]
    if cpu:
        lines += ["(a dry run on a CPU: host tensors on both sides, so "
                  "the ratio compares the same path; the code, not the "
                  "comparison)", ""]
    lines += ["| dtype | free F | host-staged ms/step | NCCL ms/step | "
              "host-staged / NCCL (per-round range) | backends seen | "
              "exact |", "|---|---|---|---|---|---|---|"]
    for c in cases:
        name = "unconstrained" if c["free_req"] is None else \
            size(c["free_req"])
        if not c.get("completed"):
            misses.append("compare %s F=%s: %s" % (c["dtype"], name,
                                                   first_outcome(c)))
            lines.append("| %s | %s | %s | - | - | - | - |" % (
                c["dtype"], name, first_outcome(c)))
            continue
        rs = c.get("round_ratios") or [c["ratio"]]
        seen = c.get("backends_seen") or {}
        seen_s = ", ".join("%s: %s" % (k, "/".join(
            BACKEND.get(v, str(v)) for v in vs)) for k, vs in seen.items())
        if not cpu:
            for side, want in (("COLLGUARD", 0), ("NCCL", 2)):
                if seen.get(side) != [want]:
                    misses.append("compare %s F=%s: the %s blocks ran on %s"
                                  % (c["dtype"], name, side,
                                     seen.get(side)))
        if not right(c):
            misses.append("compare %s F=%s: results differ (%s)" % (
                c["dtype"], name, c.get("side_exact")))
        lines.append("| %s | %s | %.2f | %.2f | %.2fx (%.2f-%.2f) | %s | "
                     "%s |" % (c["dtype"], name, c["staged_step_ms_mean"],
                               c["nccl_step_ms_mean"], c["ratio"], min(rs),
                               max(rs), seen_s,
                               "yes" if c.get("exact") else
                               ("within %.1g" % c["max_rel_err"]
                                if right(c) else "NO")))
    lines += ["", "trimmed means (middle 80%) of every block's steps but "
              "its first; each round a block of each, the order swapped "
              "every round; NCCL's communicator made in each NCCL block's "
              "init, outside the timed steps"]
    return lines, misses


def grow_lines(cases):
    lines, misses = [], []
    for c in cases:
        if c["mode"] != "grow":
            continue
        tr = c.get("trace") or []
        lines += ["", "#### growing ballast (%s, collguard)" % c["dtype"], "",
                  "| step | driver free | level | early warnings | fusion "
                  "allowed | fusion held | degrades | alloc failures | ms |",
                  "|---|---|---|---|---|---|---|---|---|"]
        first_warn = next((t for t in tr if t["early_warnings"] > 0), None)
        first_shrink = next((t for t in tr if tr and t["fusion_bytes"] <
                             tr[0]["fusion_bytes"]), None)
        for t in tr:
            mark = " <- early warning" if t is first_warn else ""
            lines.append("| %d | %s | %s | %d | %s | %s | %d | %d | %.2f%s |"
                         % (t["step"], size(t["driver_free"]), t["level"],
                            t["early_warnings"], size(t["fusion_bytes"]),
                            size((t.get("device_current_bytes") or {}).get("fusion")),
                            t["degrades"],
                            t["alloc_failures"], t["ms"], mark))
        if not c.get("completed"):
            misses.append("growing ballast: %s" % outcome(c))
            continue
        fails = tr[-1]["alloc_failures"] if tr else 0
        lines += ["", "early warning at free %s; first shrink at free %s; "
                  "allocation failures %d; results %s" % (
                      size(first_warn["driver_free"]) if first_warn else "-",
                      size(first_shrink["driver_free"]) if first_shrink
                      else "-", fails, "exact" if right(c) else
                      "WRONG")]
        if first_warn is None:
            misses.append("growing ballast: no early warning")
        if fails:
            misses.append("growing ballast: %d allocation failures (the "
                          "degrade was not pre-emptive)" % fails)
    return lines, misses


def plot(cases, outdir):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    cases = main_rows(cases) + [c for c in cases if c["mode"] == "grow"]
    if not any(c["free_req"] is not None for c in cases
               if c["mode"] in MODES):
        return None  # nothing squeezed (a dry run): no free-size axis
    # Step times of collguard only: the two defaults are reproduced in
    # Python for their memory behaviour, so their times say nothing about
    # Horovod's or DDP's speed. A cross marks where a default failed.
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, dtype in zip(axes, ("fp32", "bf16")):
        pts = sorted((c["free_req"], c) for c in cases
                     if c["mode"] == "collguard" and c["dtype"] == dtype and
                     c["free_req"] is not None and c.get("completed"))
        ax.plot([f / MiB for f, c in pts],
                [c.get("step_ms_mean", c["step_ms_median"]) for f, c in pts],
                "o-", label="collguard, squeezed to F")
        inter = [(f, c) for f, c in pts if c.get("base_step_ms_mean")]
        if inter:
            ax.plot([f / MiB for f, c in inter],
                    [c["base_step_ms_mean"] for f, c in inter], "s--",
                    alpha=0.6, label="collguard, same process unconstrained")
        base = [c for c in cases if c["mode"] == "collguard" and
                c["dtype"] == dtype and c["free_req"] is None and
                c.get("completed")]
        if base:
            ax.axhline(base[0]["step_ms_median"], linestyle=":",
                       color="gray", label="collguard, unconstrained")
        for k, m in enumerate(("horovod", "ddp")):
            fx = [c["free_req"] / MiB for c in cases
                  if c["mode"] == m and c["dtype"] == dtype and
                  c["free_req"] is not None and not c.get("completed")]
            if fx:
                ax.plot(fx, [0.25 * (k + 1)] * len(fx), "x", markersize=9,
                        label="%s: out of memory" % LABEL[m])
        ax.set_xscale("log", base=2)
        ax.set_ylim(bottom=0)
        ax.set_xlabel("device memory left free (MiB)")
        ax.set_ylabel("ms per step")
        ax.set_title("350M-parameter gradients, %s, 1 H200" % dtype)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    path = os.path.join(outdir, "memguard.png")
    fig.savefig(path, dpi=110)
    return path


def main():
    cases = load(sys.argv[1])
    outdir = sys.argv[2]
    t, m1 = table(cases)
    f, m3 = first_lines(cases)
    x, m4 = compare_lines(cases)
    g, m2 = grow_lines(cases)
    misses = m1 + m3 + m4 + m2
    for mode in ("horovod", "ddp"):
        for c in cases:
            first = "first " if c.get("ballast_first") else ""
            if c["mode"] == mode and not c.get("completed") and \
                    not c.get("oom"):
                misses.append("%s%s %s F=%s failed without OOM: %s" % (
                    first, mode, c["dtype"], size(c["free_req"]),
                    first_outcome(c)))
            elif c["mode"] == mode and c.get("completed") and not right(c):
                misses.append("%s%s %s F=%s: wrong result (the reproduction "
                              "or the harness is broken)" % (
                                  first, mode, c["dtype"],
                                  size(c["free_req"])))
    ranks = max((c.get("ranks") or 1) for c in cases) if cases else 1
    head = []
    if ranks > 1:
        head = ["%d ranks (a GPU each on a GPU machine): the figures are "
                "rank 0's; in every case marked ok every rank completed "
                "with right results (rank_peaks in results.jsonl: each "
                "rank's own peak)" % ranks, ""]
    lines = head + t + f + x + g + ["", "targets: " + ("all met" if not misses else
                                        "MISSED")] + \
        ["- " + s for s in misses]
    text = "\n".join(lines) + "\n"
    with open(os.path.join(outdir, "table.md"), "w") as f:
        f.write(text)
    png = plot(cases, outdir)
    print(text)
    print("plot:", png or "none (matplotlib not installed, or no case "
          "squeezed)")
    return 1 if misses else 0


if __name__ == "__main__":
    sys.exit(main())
