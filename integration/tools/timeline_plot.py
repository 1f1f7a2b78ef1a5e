# SPDX-License-Identifier: Apache-2.0
# timeline_report.py's picture: three panels over the run's time (seconds
# since the timeline started, the trace's ts 0) on one axis: each
# collective's latency (first copy in to completion, one marker per fused
# group or lone tensor, by op); free memory and the governor's budget; the
# chunk and fusion buffer sizes (log scale). Pressure changes are vertical
# lines on every panel (coloured by the new level), early warnings red
# triangles above the latency panel. Uses matplotlib's Agg backend (Debian python3-matplotlib);
# returns what it drew, so a test can hold the picture to the trace.

MIB = float(1 << 20)
LEVEL_COLOURS = {"ok": "tab:green", "warn": "tab:orange",
                 "critical": "tab:red"}
OP_MARKERS = {"ALLREDUCE": "o", "BROADCAST": "s", "ALLGATHER": "^"}


def _pyplot():
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise RuntimeError("matplotlib is needed for the PNG (%s); install "
                           "python3-matplotlib, or pass --no-plot" % e)
    return plt


def _step(ax, pts, end, label, colour):
    """A counter as steps, held from its last sample to the end."""
    if pts:
        xs = [ts / 1e6 for ts, _ in pts] + [end / 1e6]
        ys = [v / MIB for _, v in pts]
        ax.step(xs, ys + ys[-1:], where="post", label=label, color=colour)
    return len(pts)


def plot(tl, summary, path):
    """Writes the PNG to path; returns the counts of what it drew."""
    plt = _pyplot()
    end, g = tl.last_ts, summary["governor"]
    fig, (lat, mem, size) = plt.subplots(3, 1, sharex=True, figsize=(11, 8),
                                         dpi=100)
    drawn = {"collectives": 0, "counter_points": 0}
    for op in sorted({f.op for f in tl.fused}):
        fs = [f for f in tl.fused if f.op == op]
        lat.scatter([f.begin / 1e6 for f in fs],
                    [max(f.end - f.begin, 1) / 1e3 for f in fs], s=10,
                    marker=OP_MARKERS.get(op, "x"), label=op.lower())
        drawn["collectives"] += len(fs)
    if tl.fused:
        lat.set_yscale("log")
    lat.set_ylabel("collective latency (ms)")
    warn_x = [w["ts"] / 1e6 for w in g["early_warnings"]]
    if warn_x:
        lat.scatter(warn_x, [1.0] * len(warn_x), marker="v", s=60,
                    color="red", transform=lat.get_xaxis_transform(),
                    clip_on=False, label="OOM early warning", zorder=5)
    drawn["early_warnings"] = len(warn_x)
    kind = g["memory"]
    drawn["counter_points"] += _step(mem, tl.counters.get(
        "free_memory." + kind, []), end, "free %s memory" % kind, "tab:blue")
    drawn["counter_points"] += _step(mem, tl.counters.get(
        "governor.budget", []), end, "governor budget", "tab:purple")
    mem.set_ylabel("MiB")
    drawn["counter_points"] += _step(size, tl.counters.get(
        "governor.chunk", []), end, "chunk", "tab:brown")
    drawn["counter_points"] += _step(size, tl.counters.get(
        "governor.fusion_buffer", []), end, "fusion buffer", "tab:cyan")
    size.set_ylabel("MiB")
    if drawn["counter_points"]:
        size.set_yscale("log", base=2)
    size.set_xlabel("seconds since %s was started" % tl.path)
    seen = set()
    for p in g["pressure_changes"]:
        x, c = p["ts"] / 1e6, LEVEL_COLOURS.get(p["to"], "grey")
        for ax in (lat, mem, size):
            ax.axvline(x, color=c, linestyle="--", linewidth=1,
                       label=None if (ax, p["to"]) in seen
                       else "pressure %s" % p["to"])
            seen.add((ax, p["to"]))
    drawn["pressure_changes"] = len(g["pressure_changes"])
    for ax in (lat, mem, size):
        if ax.get_legend_handles_labels()[0]:
            ax.legend(loc="upper right", fontsize="small")
        ax.grid(True, alpha=0.3)
    fig.suptitle("collguard timeline: %d collectives, %d tensors, %d "
                 "pressure changes, %d early warnings" % (
                     drawn["collectives"], summary["tensors"],
                     drawn["pressure_changes"], drawn["early_warnings"]))
    fig.tight_layout()
    try:
        fig.savefig(path, format="png")
    except OSError as e:
        raise RuntimeError("cannot write %s: %s" % (path, e.strerror or e))
    finally:
        plt.close(fig)
    return drawn
