#!/usr/bin/python3
"""Figure of a transplant or query-map result folder (hylens experiment transplant / query-map).

    /usr/bin/python3 scripts/plot_transplant.py RESULT_DIR [--out FILE] [--metric ansA | L3H0:attA]

Reads RESULT_DIR/summary.json (the means and 95 % bootstrap intervals computed from
items.jsonl) and run.json ("kind"), and writes RESULT_DIR/transplant.png or query_map.png.

transplant: one heat map per kind that copies rows (mixer, layer, mixer_in, resid_pre, and the
upstream kind once per removed block) of the metric over blocks x position sets, and a bar chart
of the baselines (A, B, A/without:U) and the state transplants (split, state, state+conv per
block) with their intervals. A metric HEAD:attA or HEAD:attB (HEAD as "L3H0") reads a head the
study watched (--watch).
query-map: a bar chart of every condition at the full fit size (A, B, in_family, mean, and per
source map / self / shuffled), and the learning curves (metric against the number of fit
prompts, per source; the full fit size is the last point).
The title gives n (the pairs behind the drawn metric; a range "n = 6-7" when the rows differ, in
red) and, in red, the folder's state when run.json's status is not "complete" (a merge of
unfinished shards); a condition without a value is an "n/a" mark (bars) or cell (heat maps).
A folder with nothing to draw (no summary.json yet, no items, a metric no row has: attA without
a reader head) gives a one-line message and exit status 1. Prints the figure's path.
"""

import argparse
import os
import sys
import warnings

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import figure_common as fc  # noqa: E402

SCRIPT = "plot_transplant.py"


def load(folder):
    """summary.json's rows and run.json, or a one-line exit (no traceback) for a folder the
    studies can leave: not a result folder, a run that never finished, a summary not a list."""
    run = fc.read_run(SCRIPT, folder)
    path = os.path.join(folder, "summary.json")
    if not os.path.exists(path):
        state = fc.status_warning(run)
        fc.fail(SCRIPT, "%s has no summary.json (%s): nothing to draw" % (
            folder, state or "not a finished transplant or query-map result folder"))
    rows = fc.read_json(SCRIPT, path)
    if not isinstance(rows, list):
        fc.fail(SCRIPT, "%s is not a transplant or query-map summary (not a list of rows)" % path)
    return rows, run


def cell(row, metric):
    """The metric's cell of a row ({mean, lo, hi, n}), or None (a watched head the row lacks)."""
    if ":" in metric:  # a watched head's attA / attB
        head, score = metric.split(":", 1)
        for w in row.get("watch", []):
            if w["head"] == head:
                return w.get(score)
        return None
    return row.get(metric)


def value(row, metric):
    m = cell(row, metric)
    if not isinstance(m, dict):
        return None, None, None
    return m.get("mean"), m.get("lo"), m.get("hi")


def metric_n(row, metric):
    """The number of pairs behind the row's metric (0 when it has no value)."""
    m = cell(row, metric)
    if not isinstance(m, dict) or not fc.is_num(m.get("mean")):
        return 0
    return m.get("n", row.get("n", 0))


def unit(metric):
    """Whether the metric is a share or an attention mass in [0, 1]."""
    return metric.split(":")[-1] in ("ansA", "ansB", "attA", "attB")


def bars(ax, rows, metric, title):
    names = [r["condition"] for r in rows]
    vals = [value(r, metric) for r in rows]
    mean = [fc.num(v[0]) for v in vals]
    err_lo, err_hi = fc.error_bars(mean, [fc.num(v[1]) for v in vals], [fc.num(v[2]) for v in vals])
    with warnings.catch_warnings():  # all values NaN: matplotlib's "All-NaN axis"
        warnings.simplefilter("ignore", RuntimeWarning)
        ax.bar(range(len(rows)), mean, yerr=[err_lo, err_hi], color="#4c72b0", capsize=3)
    for i, m in enumerate(mean):
        if m != m:
            fc.na_mark(ax, i)
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels(names, rotation=60, ha="right", fontsize=8)
    ax.set_ylabel(metric)
    ax.set_title(title, fontsize=10)
    if unit(metric):
        ax.set_ylim(0, 1.05)


ROW_KINDS = ("mixer", "layer", "mixer_in", "resid_pre", "upstream")


def title_parts(rows, run, metric):
    """The n of the drawn metric (a range when the rows differ) and the warnings: the folder's
    state and unequal n."""
    ns = [metric_n(r, metric) for r in rows if metric_n(r, metric)]
    warnings = [fc.status_warning(run)]
    if fc.unequal(ns):
        warnings.append("unequal n across conditions (%s)" % fc.n_range(ns))
    return fc.n_range(ns), [w for w in warnings if w]


def plot_transplant(rows, run, metric, out):
    rep = [r for r in rows if r.get("kind") in ROW_KINDS]
    other = [r for r in rows if r.get("kind") not in ROW_KINDS]
    # One heat map per kind, and per removed block for the upstream kind, in study order.
    panels = list(dict.fromkeys((r["kind"], r.get("without", "")) for r in rep))
    cols = min(len(panels) + 1, 4)
    rows_n = (len(panels) + cols) // cols
    fig, grid_axes = plt.subplots(rows_n, cols, figsize=(4.2 * cols + 1, 4.2 * rows_n), squeeze=False)
    axes = [ax for line in grid_axes for ax in line]
    for ax in axes[len(panels) + 1:]:
        ax.axis("off")
    axes = axes[:len(panels) + 1]
    for ax, (kind, without) in zip(axes, panels):
        rs = [r for r in rep if r["kind"] == kind and r.get("without", "") == without]
        blocks = list(dict.fromkeys(r["block"] for r in rs))
        sets = list(dict.fromkeys(r["positions"] for r in rs))
        grid = [[float("nan")] * len(sets) for _ in blocks]
        for r in rs:
            grid[blocks.index(r["block"])][sets.index(r["positions"])] = fc.num(value(r, metric)[0])
        vmin, vmax = (0, 1) if unit(metric) else (None, None)
        im = ax.imshow(grid, cmap="viridis", vmin=vmin, vmax=vmax, aspect="auto")
        ax.set_xticks(range(len(sets)))
        ax.set_xticklabels(sets, fontsize=8)
        ax.set_yticks(range(len(blocks)))
        ax.set_yticklabels(blocks, fontsize=8)
        for i in range(len(blocks)):
            for j in range(len(sets)):
                if grid[i][j] == grid[i][j]:
                    ax.text(j, i, "%.2f" % grid[i][j], ha="center", va="center", color="w", fontsize=8)
                else:  # no row, or no value: not a colour of the scale
                    ax.text(j, i, "n/a", ha="center", va="center", color=fc.WARN_COLOR, fontsize=8,
                            fontweight="bold", gid="na")
        title = "mixer transplant, donor without %s" % without if kind == "upstream" else "%s transplant" % kind
        ax.set_title("%s: %s" % (title, metric), fontsize=10)
        fig.colorbar(im, ax=ax, fraction=0.046)
    bars(axes[-1], other, metric, "baselines and state transplants")
    reader = run.get("study", {}).get("reader")
    who = os.path.basename(str(run.get("model", "")))
    n, warnings = title_parts(rows, run, metric)
    fc.flag_figure(fig, "%s, %s, reader %s, %s pairs" % (
        who, rows[0]["task"] if rows else "", "L%dH%d" % (reader["layer"], reader["head"]) if reader else "none",
        n), warnings, fontsize=10)
    fig.tight_layout()
    fc.save_figure(fig, out, 120)
    return fig


def plot_query_map(rows, run, metric, out):
    full = [r for r in rows if "@" not in r["condition"]]
    curves = {}
    for r in rows:
        if r.get("kind") == "map":
            curves.setdefault(r["block"], []).append((r.get("fit_items", 0), value(r, metric)))
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2))
    bars(axes[0], full, metric, "conditions (every fit prompt)")
    for src, pts in curves.items():
        pts.sort(key=lambda p: p[0])
        xs = [p[0] for p in pts]
        ys = [fc.num(p[1][0]) for p in pts]
        lo = [fc.num(p[1][1]) for p in pts]
        hi = [fc.num(p[1][2]) for p in pts]
        drawn = any(y == y for y in ys)
        line, = axes[1].plot(xs, ys, marker="o", label=src if drawn else "%s (n/a)" % src)
        axes[1].fill_between(xs, lo, hi, alpha=0.2, color=line.get_color())
    axes[1].set_xscale("log")
    axes[1].set_xlabel("fit prompts")
    axes[1].set_ylabel(metric)
    axes[1].set_title("learning curves of the map", fontsize=10)
    if unit(metric):
        axes[1].set_ylim(0, 1.05)
    if curves:
        axes[1].legend(fontsize=8)
    who = os.path.basename(str(run.get("model", "")))
    donor = os.path.basename(str(run.get("donor") or run.get("model", "")))
    n, warnings = title_parts(rows, run, metric)
    fc.flag_figure(fig, "query map %s -> %s, %s, %s pairs" % (donor, who, rows[0]["task"] if rows else "", n),
                         warnings, fontsize=10)
    fig.tight_layout()
    fc.save_figure(fig, out, 120)
    return fig


def nothing_to_draw(folder, rows, run, metric):
    """Why the folder has nothing to draw for the metric, or None."""
    if not rows:
        shard = fc.shard_of(run)
        return "%s has no items (summary.json has no rows%s): nothing to draw" % (
            folder, "; shard %s got none" % shard if shard else "")
    if any(metric_n(r, metric) for r in rows):
        return None
    why = "no condition has a value of it"
    if metric in ("attA", "attB") and not run.get("study", {}).get("reader"):
        why = "the study ran without a reader head (--reader, or --circuit)"
    return "%s: no row has items (n = 0) in %s: %s" % (metric, folder, why)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder")
    ap.add_argument("--out")
    ap.add_argument("--metric", default="ansA",
                    help="ansA, ansB, dAB, attA, attB, or a watched head's HEAD:attA / HEAD:attB (e.g. L3H0:attA)")
    a = ap.parse_args()
    if a.metric not in ("ansA", "ansB", "dAB", "attA", "attB"):
        head, _, score = a.metric.partition(":")
        if score not in ("attA", "attB") or not head:
            ap.error("--metric %s: not ansA, ansB, dAB, attA, attB or HEAD:attA / HEAD:attB" % a.metric)
    rows, run = load(a.folder)
    kind = run.get("kind")
    if kind not in ("transplant", "query-map"):
        sys.exit("plot_transplant.py: %s/run.json is a '%s' study, not transplant or query-map" % (a.folder, kind))
    if ":" in a.metric and rows:
        watched = list(dict.fromkeys(w["head"] for r in rows for w in r.get("watch", [])))
        if a.metric.split(":")[0] not in watched:
            sys.exit("plot_transplant.py: --metric %s: %s watched no head %s (watched: %s)" % (
                a.metric, a.folder, a.metric.split(":")[0], ", ".join(watched) or "none"))
    why = nothing_to_draw(a.folder, rows, run, a.metric)
    if why:
        fc.fail(SCRIPT, why)
    state = fc.status_warning(run)
    if state:
        fc.warn(SCRIPT, "%s: %s" % (a.folder, state))
    ns = [metric_n(r, a.metric) for r in rows if metric_n(r, a.metric)]
    if fc.unequal(ns):
        fc.warn(SCRIPT, "%s: unequal n across conditions (%s)" % (a.folder, fc.n_range(ns)))
    if kind == "transplant":
        out = a.out or os.path.join(a.folder, "transplant.png")
        plot_transplant(rows, run, a.metric, out)
    else:
        out = a.out or os.path.join(a.folder, "query_map.png")
        plot_query_map(rows, run, a.metric, out)
    print(out)


if __name__ == "__main__":
    main()
