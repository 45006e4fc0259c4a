#!/usr/bin/python3
"""Figures of a channel-study result folder (hylens experiment channels --out DIR).

    /usr/bin/python3 scripts/plot_channels.py DIR [--metric score] [--group all] [--out-dir DIR]

Reads DIR/summary.csv (never the model) and writes, into --out-dir (default DIR):
  channels.png  split-prefill bars: mean with its 95 % bootstrap CI per task and condition
                (FULL, KV_ONLY, REC_ONLY, NONE), labelled with % of FULL;
  swaps.png     state-swap panels (swap tasks): per swap condition (KV_A+REC_A, KV_A+REC_B,
                KV_B+REC_A, KV_B+REC_B) the metric, plus first_token (answer of A) and
                first_token_b (answer of B) when the summary has them;
  layers.png    layer sweeps (conditions NAME@SET), when the study has them: the metric against
                l for the single-layer sets {l}, the cumulative sets [0, l] and the
                cumulative-top sets [l, L-1] (L from DIR/run.json's num_layers), with CIs.
Each task's tick label (or panel title) gives its n, a range "n = 10-11" in red when its
conditions differ; a condition the study ran without a value for a task (no row, a NaN mean) is an
"n/a" mark at its place, never an empty bar; the title says, in red, when run.json's status is
not "complete" (a merge of unfinished shards) or n differs, and so does stderr. A figure with
nothing to draw is not written (channels.png of a study of swap conditions only); the script says
so on stderr, and exits with status 1 when it writes no figure at all.
Uses matplotlib with the Agg backend (no display needed).
"""

import argparse
import csv
import math
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import figure_common as fc  # noqa: E402

SCRIPT = "plot_channels"

SPLIT = ["FULL", "KV_ONLY", "REC_ONLY", "NONE"]
SWAPS = ["KV_A+REC_A", "KV_A+REC_B", "KV_B+REC_A", "KV_B+REC_B"]
COLORS = {
    "FULL": "#4c4c4c", "KV_ONLY": "#3b75af", "REC_ONLY": "#d1762d", "NONE": "#a0a0a0",
    "KV_A+REC_A": "#4c4c4c", "KV_A+REC_B": "#3b75af", "KV_B+REC_A": "#d1762d", "KV_B+REC_B": "#8c8c8c",
}

# The conditions that have layer sweeps, one colour each (tab10).
SWEEP_COLORS = {"KV_ONLY": "#1f77b4", "REC_ONLY": "#ff7f0e", "NONE": "#7f7f7f", "KV_A+REC_B": "#2ca02c",
                "KV_B+REC_A": "#d62728"}


def read_summary(path):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    need = {"task", "group", "metric", "condition", "base", "layers", "n", "mean", "ci_lo", "ci_hi", "rel_full"}
    if rows and not need.issubset(rows[0].keys()):
        sys.exit(f"plot_channels: {path} is not a channel-study summary.csv (columns {sorted(rows[0].keys())})")
    for r in rows:
        for k in ("mean", "ci_lo", "ci_hi", "rel_full", "rel_full_lo", "rel_full_hi"):
            r[k] = fc.num(r.get(k))
    return rows


def pick(rows, task, group, metric, condition):
    for r in rows:
        if r["task"] == task and r["group"] == group and r["metric"] == metric and r["condition"] == condition:
            return r
    return None


def bar_group(ax, x0, width, rows, conds, labels_pct):
    """One group of bars (a task, or a metric of a swap panel), a bar per condition at its place;
    a condition without a row or with a NaN mean is an "n/a" mark there (not a zero bar)."""
    for k, c in enumerate(conds):
        r = rows.get(c)
        x = x0 + (k - (len(conds) - 1) / 2) * width
        if r is None or math.isnan(r["mean"]):
            fc.na_mark(ax, x, fontsize=6)
            continue
        lo = r["ci_lo"] if not math.isnan(r["ci_lo"]) else r["mean"]
        hi = r["ci_hi"] if not math.isnan(r["ci_hi"]) else r["mean"]
        err = [[max(0.0, r["mean"] - lo)], [max(0.0, hi - r["mean"])]]
        ax.bar(x, r["mean"], width * 0.92, color=COLORS.get(c, "#777777"), yerr=err, capsize=2,
               error_kw={"elinewidth": 0.8})
        label = fc.ratio_label(r["rel_full"]) if labels_pct and c != "FULL" else None
        if label:  # % of FULL; an unbounded ratio (FULL's mean 0) as "∞" / "-∞"
            ax.text(x, min(hi, 1.05) + 0.02, label, ha="center", va="bottom", fontsize=6, rotation=90)


def ran(rows, conds, metric, group):
    """The conditions of conds the study ran (a row of the metric and group in some task)."""
    have = {r["condition"] for r in rows if r["metric"] == metric and r["group"] == group}
    return [c for c in conds if c in have]


def cell_n(cells):
    """The n of the drawn cells (those with a mean)."""
    return [int(r["n"]) for r in cells.values() if r is not None and not math.isnan(r["mean"]) and r["n"] != ""]


def drawable(cells):
    return any(r is not None and not math.isnan(r["mean"]) for r in cells.values())


def n_warning(uneven):
    """The warning of the tasks whose conditions differ in n: "unequal n across conditions
    (dictionary: n = 10-11)"."""
    if not uneven:
        return None
    return "unequal n across conditions (" + "; ".join(f"{t}: {n}" for t, n in uneven) + ")"


def run_warnings(run):
    return [w for w in (fc.status_warning(run),) if w]


def task_ticks(ax, tasks, per_task, **kw):
    """The tasks' tick labels with their n (in red when a task's conditions differ in n);
    returns the uneven tasks as (task, "n = 10-11")."""
    ns = [cell_n(cells) for cells in per_task]
    ax.set_xticks(range(len(tasks)))
    labels = ax.set_xticklabels([f"{t}\n{fc.n_range(n)}" if n else t for t, n in zip(tasks, ns)], **kw)
    uneven = []
    for lab, t, n in zip(labels, tasks, ns):
        if fc.unequal(n):
            lab.set_color(fc.WARN_COLOR)
            uneven.append((t, fc.n_range(n)))
    return uneven


def plot_split(rows, tasks, metric, group, out, run=None, keep=False):
    """channels.png; False (nothing written) when no split condition ran or none has a value
    for the metric. keep: return the figure (open) instead of True."""
    conds = ran(rows, SPLIT, metric, group)
    per_task = [{c: pick(rows, t, group, metric, c) for c in conds} for t in tasks]
    if not conds or not any(drawable(cells) for cells in per_task):
        return False
    fig, ax = plt.subplots(figsize=(max(4.0, 1.3 * len(tasks) + 1.5), 3.2))
    width = 0.8 / len(conds)
    for i, cells in enumerate(per_task):
        bar_group(ax, i, width, cells, conds, labels_pct=True)
    uneven = task_ticks(ax, tasks, per_task, rotation=30, ha="right", fontsize=8)
    ax.set_ylim(0, 1.25)
    ax.set_ylabel(f"{metric} (mean, 95 % CI)")
    ax.set_title("split-prefill: which channel carries the task", fontsize=9)
    ax.legend(handles=[plt.Rectangle((0, 0), 1, 1, color=COLORS[c]) for c in conds], labels=conds, fontsize=7,
              ncol=4, loc="upper center", frameon=False)
    fc.flag_figure(fig, None, run_warnings(run) + [n_warning(uneven)], fontsize=8)
    fig.tight_layout()
    fc.save_figure(fig, out, 150)
    if keep:
        return fig
    plt.close(fig)
    return True


def plot_swaps(rows, tasks, metric, group, out, run=None, keep=False):
    swap_tasks = [t for t in tasks if any(pick(rows, t, group, metric, c) for c in SWAPS[1:3])]
    if not swap_tasks:
        return False
    conds = ran(rows, SWAPS, metric, group)
    metrics = [m for m in (metric, "first_token", "first_token_b")
               if any(pick(rows, t, group, m, c) for t in swap_tasks for c in SWAPS)]
    panels = [[{c: pick(rows, t, group, m, c) for c in conds} for m in metrics] for t in swap_tasks]
    if not any(drawable(cells) for panel in panels for cells in panel):
        return False
    fig, axes = plt.subplots(1, len(swap_tasks), figsize=(2.6 * len(swap_tasks) + 0.8, 3.0), squeeze=False)
    uneven = []
    for ax, t, panel in zip(axes[0], swap_tasks, panels):
        width = 0.8 / len(conds)
        for j, cells in enumerate(panel):
            bar_group(ax, j, width, cells, conds, labels_pct=False)
        ax.set_xticks(range(len(metrics)))
        ax.set_xticklabels([{"first_token": "1st tok = A", "first_token_b": "1st tok = B"}.get(m, m) for m in metrics],
                           fontsize=7)
        ax.set_ylim(0, 1.1)
        ns = [n for cells in panel for n in cell_n(cells)]
        title = ax.set_title(f"{t}, {fc.n_range(ns)}" if ns else t, fontsize=9)
        if fc.unequal(ns):
            title.set_color(fc.WARN_COLOR)
            uneven.append((t, fc.n_range(ns)))
    axes[0][0].set_ylabel("mean, 95 % CI")
    ncol = 4 if len(swap_tasks) > 1 else 2  # one panel: the legend in two lines, within the figure
    fig.legend(handles=[plt.Rectangle((0, 0), 1, 1, color=COLORS[c]) for c in conds], labels=conds, fontsize=7,
               ncol=ncol, loc="lower center", frameon=False)
    fc.flag_figure(fig, "state swap: which source the answer follows", run_warnings(run) + [n_warning(uneven)],
                   fontsize=9)
    fig.tight_layout(rect=(0, 0.08 if ncol == 4 else 0.14, 1, 0.95))
    fc.save_figure(fig, out, 150)
    if keep:
        return fig
    plt.close(fig)
    return True


def sweep_points(layers, last):
    """The sweeps a layer set belongs to, as (kind, x): a single layer l is (single, l); [0, l]
    is (cumulative, l); [l, last] is (cumulative-top, l), last being the model's last layer
    (run.json's num_layers - 1; None when unknown). A set can be in two sweeps ([0, last] ends
    the cumulative one and starts the top one; {0} and {last} are their one-layer ends); other
    sets (5-7, 0-3+5) are in none."""
    if "+" in layers:
        return []
    if "-" not in layers:
        l = int(layers)
        pts = [("single", l)]
        if l == 0:
            pts.append(("cumulative", 0))
        if last is not None and l == last:
            pts.append(("cumulative-top", l))
        return pts
    a, b = (int(x) for x in layers.split("-"))
    pts = []
    if a == 0:
        pts.append(("cumulative", b))
    if last is not None and b == last:
        pts.append(("cumulative-top", a))
    return pts


def layer_series(rows, task, last=None, sweeps=None):
    """The lines of layers.png for one task: {(base, kind): [(l, row), ...]} sorted by l.
    sweeps: the sweep kinds the study ran (run.json's layer_sweeps); a set is drawn only in
    those (the [0, L-1] of a cumulative sweep is not a cumulative-top point unless that sweep
    ran). None (an older run.json): every kind a set belongs to, lines of one point left out."""
    series = {}
    for r in rows:
        if r["task"] != task or r["layers"] == "all":
            continue
        for kind, x in sweep_points(r["layers"], last):
            if sweeps is None or kind in sweeps:
                series.setdefault((r["base"], kind), []).append((x, r))
    out = {}
    for key, pts in sorted(series.items()):
        if sweeps is None and key[1] != "single" and len(pts) < 2:
            continue  # only the one-layer end of a sweep that may not have run
        out[key] = sorted(pts, key=lambda p: p[0])
    return out


def plot_layers(rows, tasks, metric, group, out, last=None, sweeps=None, run=None, keep=False):
    sweep = [r for r in rows if r["layers"] != "all" and r["metric"] == metric and r["group"] == group]
    if not sweep or all(math.isnan(r["mean"]) for r in sweep):
        return False
    fig, axes = plt.subplots(1, len(tasks), figsize=(3.0 * len(tasks) + 0.8, 3.0), squeeze=False)
    styles = {"single": "-", "cumulative": "--", "cumulative-top": ":"}
    uneven = []
    for ax, t in zip(axes[0], tasks):
        ns = []
        for (base, kind), pts in layer_series(sweep, t, last, sweeps).items():
            xs = [x for x, _ in pts]
            rs = [r for _, r in pts]
            color = SWEEP_COLORS[base] if base in SWEEP_COLORS else "#777777"
            ax.plot(xs, [r["mean"] for r in rs], marker="o", ms=2.5, lw=1, color=color,
                    ls=styles[kind], label=f"{base} ({kind})")
            ax.fill_between(xs, [r["ci_lo"] for r in rs], [r["ci_hi"] for r in rs], color=color, alpha=0.12)
            for x, r in pts:
                if math.isnan(r["mean"]):
                    fc.na_mark(ax, x, color=color, fontsize=6)
                elif r["n"] != "":
                    ns.append(int(r["n"]))
        full = pick(rows, t, group, metric, "FULL")
        if full and not math.isnan(full["mean"]):
            ax.axhline(full["mean"], color="k", lw=0.7, ls=":")
        title = ax.set_title(f"{t}, {fc.n_range(ns)}" if ns else t, fontsize=9)
        if fc.unequal(ns):
            title.set_color(fc.WARN_COLOR)
            uneven.append((t, fc.n_range(ns)))
        ax.set_xlabel("l: {l} (single), [0, l] (cumulative), [l, L-1] (cumulative-top)", fontsize=7)
        ax.set_ylim(0, 1.05)
        ax.legend(fontsize=5)
    axes[0][0].set_ylabel(f"{metric} (mean, 95 % CI)")
    fc.flag_figure(fig, None, run_warnings(run) + [n_warning(uneven)], fontsize=8)
    fig.tight_layout()
    fc.save_figure(fig, out, 150)
    if keep:
        return fig
    plt.close(fig)
    return True


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("results", help="result folder of hylens experiment channels (holds summary.csv)")
    p.add_argument("--metric", default="score", help="metric column to draw (default: score)")
    p.add_argument("--group", default="all", help="item group (default: all)")
    p.add_argument("--out-dir", default=None, help="where to write the PNGs (default: the results folder)")
    a = p.parse_args()
    path = os.path.join(a.results, "summary.csv")
    if not os.path.exists(path):
        run = fc.read_run(SCRIPT, a.results, required=False)
        state = fc.status_warning(run)
        sys.exit(f"plot_channels: {path} does not exist" + (f" ({state})" if state else ""))
    try:
        rows = read_summary(path)
    except (OSError, ValueError, KeyError, csv.Error) as e:
        sys.exit(f"plot_channels: {path} cannot be read ({type(e).__name__}: {e})")
    tasks = []
    for r in rows:
        if r["task"] not in tasks and r["metric"] == a.metric and r["group"] == a.group:
            tasks.append(r["task"])
    if not tasks:
        sys.exit(f"plot_channels: no rows with metric '{a.metric}' and group '{a.group}' in {path}")
    run = fc.read_run(SCRIPT, a.results, required=False)
    last, sweeps = None, None  # the model's last layer (for [l, L-1]); the sweeps the study ran
    n = run.get("num_layers")
    last = n - 1 if isinstance(n, int) and n > 0 else None
    if isinstance(run.get("layer_sweeps"), list):
        sweeps = set(run["layer_sweeps"])
    state = fc.status_warning(run)
    if state:
        fc.warn(SCRIPT, f"{a.results}: {state}")
    out = a.out_dir or a.results
    os.makedirs(out, exist_ok=True)
    written = []
    if plot_split(rows, tasks, a.metric, a.group, os.path.join(out, "channels.png"), run):
        written.append(os.path.join(out, "channels.png"))
    elif not ran(rows, SPLIT, a.metric, a.group):
        print(f"plot_channels: channels.png not written: no split-prefill condition ({', '.join(SPLIT)}) ran "
              f"in {a.results}", file=sys.stderr)
    else:
        print(f"plot_channels: channels.png not written: no split-prefill condition has a value of "
              f"'{a.metric}' (group '{a.group}')", file=sys.stderr)
    if plot_swaps(rows, tasks, a.metric, a.group, os.path.join(out, "swaps.png"), run):
        written.append(os.path.join(out, "swaps.png"))
    if plot_layers(rows, tasks, a.metric, a.group, os.path.join(out, "layers.png"), last, sweeps, run):
        written.append(os.path.join(out, "layers.png"))
    ns = {}
    for r in rows:
        if r["metric"] == a.metric and r["group"] == a.group and not math.isnan(r["mean"]) and r["n"] != "":
            ns.setdefault(r["task"], set()).add(int(r["n"]))
    uneven = [f"{t}: {fc.n_range(v)}" for t, v in ns.items() if len(v) > 1]
    if uneven and written:
        fc.warn(SCRIPT, f"{a.results}: unequal n across conditions ({'; '.join(uneven)})")
    if not written:
        sys.exit(f"plot_channels: nothing to draw for metric '{a.metric}' (group '{a.group}') in {path}: "
                 f"no condition has a value of it")
    for w in written:
        print(w)


if __name__ == "__main__":
    main()
