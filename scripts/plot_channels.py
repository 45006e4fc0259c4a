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
Uses matplotlib with the Agg backend (no display needed).
"""

import argparse
import csv
import json
import math
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

SPLIT = ["FULL", "KV_ONLY", "REC_ONLY", "NONE"]
SWAPS = ["KV_A+REC_A", "KV_A+REC_B", "KV_B+REC_A", "KV_B+REC_B"]
COLORS = {
    "FULL": "#4c4c4c", "KV_ONLY": "#3b75af", "REC_ONLY": "#d1762d", "NONE": "#a0a0a0",
    "KV_A+REC_A": "#4c4c4c", "KV_A+REC_B": "#3b75af", "KV_B+REC_A": "#d1762d", "KV_B+REC_B": "#8c8c8c",
}

# The conditions that have layer sweeps, one colour each (tab10).
SWEEP_COLORS = {"KV_ONLY": "#1f77b4", "REC_ONLY": "#ff7f0e", "NONE": "#7f7f7f", "KV_A+REC_B": "#2ca02c",
                "KV_B+REC_A": "#d62728"}


def num(s):
    return float(s) if s not in ("", None) else math.nan


def read_summary(path):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    need = {"task", "group", "metric", "condition", "base", "layers", "n", "mean", "ci_lo", "ci_hi", "rel_full"}
    if rows and not need.issubset(rows[0].keys()):
        sys.exit(f"plot_channels: {path} is not a channel-study summary.csv (columns {sorted(rows[0].keys())})")
    for r in rows:
        for k in ("mean", "ci_lo", "ci_hi", "rel_full", "rel_full_lo", "rel_full_hi"):
            r[k] = num(r.get(k))
    return rows


def pick(rows, task, group, metric, condition):
    for r in rows:
        if r["task"] == task and r["group"] == group and r["metric"] == metric and r["condition"] == condition:
            return r
    return None


def bar_group(ax, x0, width, rows, conds, labels_pct):
    for k, c in enumerate(conds):
        r = rows.get(c)
        if r is None or math.isnan(r["mean"]):
            continue
        x = x0 + (k - (len(conds) - 1) / 2) * width
        err = [[max(0.0, r["mean"] - r["ci_lo"])], [max(0.0, r["ci_hi"] - r["mean"])]]
        ax.bar(x, r["mean"], width * 0.92, color=COLORS.get(c, "#777777"), yerr=err, capsize=2,
               error_kw={"elinewidth": 0.8})
        if labels_pct and math.isfinite(r["rel_full"]) and c != "FULL":
            ax.text(x, min(r["ci_hi"], 1.05) + 0.02, f"{100 * r['rel_full']:.0f}%", ha="center", va="bottom",
                    fontsize=6, rotation=90)


def plot_split(rows, tasks, metric, group, out):
    fig, ax = plt.subplots(figsize=(max(4.0, 1.3 * len(tasks) + 1.5), 3.2))
    width = 0.8 / len(SPLIT)
    for i, t in enumerate(tasks):
        cells = {c: pick(rows, t, group, metric, c) for c in SPLIT}
        bar_group(ax, i, width, cells, SPLIT, labels_pct=True)
    ax.set_xticks(range(len(tasks)))
    ax.set_xticklabels(tasks, rotation=30, ha="right", fontsize=8)
    ax.set_ylim(0, 1.25)
    ax.set_ylabel(f"{metric} (mean, 95 % CI)")
    ax.set_title("split-prefill: which channel carries the task", fontsize=9)
    ax.legend(handles=[plt.Rectangle((0, 0), 1, 1, color=COLORS[c]) for c in SPLIT], labels=SPLIT, fontsize=7,
              ncol=4, loc="upper center", frameon=False)
    fig.tight_layout()
    fig.savefig(out, dpi=150)
    plt.close(fig)


def plot_swaps(rows, tasks, metric, group, out):
    swap_tasks = [t for t in tasks if any(pick(rows, t, group, metric, c) for c in SWAPS[1:3])]
    if not swap_tasks:
        return False
    metrics = [m for m in (metric, "first_token", "first_token_b")
               if any(pick(rows, t, group, m, c) for t in swap_tasks for c in SWAPS)]
    fig, axes = plt.subplots(1, len(swap_tasks), figsize=(2.6 * len(swap_tasks) + 0.8, 3.0), squeeze=False)
    for ax, t in zip(axes[0], swap_tasks):
        width = 0.8 / len(SWAPS)
        for j, m in enumerate(metrics):
            cells = {c: pick(rows, t, group, m, c) for c in SWAPS}
            bar_group(ax, j, width, cells, SWAPS, labels_pct=False)
        ax.set_xticks(range(len(metrics)))
        ax.set_xticklabels([{"first_token": "1st tok = A", "first_token_b": "1st tok = B"}.get(m, m) for m in metrics],
                           fontsize=7)
        ax.set_ylim(0, 1.1)
        ax.set_title(t, fontsize=9)
    axes[0][0].set_ylabel("mean, 95 % CI")
    fig.legend(handles=[plt.Rectangle((0, 0), 1, 1, color=COLORS[c]) for c in SWAPS], labels=SWAPS, fontsize=7,
               ncol=4, loc="lower center", frameon=False)
    fig.suptitle("state swap: which source the answer follows", fontsize=9)
    fig.tight_layout(rect=(0, 0.08, 1, 0.95))
    fig.savefig(out, dpi=150)
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


def plot_layers(rows, tasks, metric, group, out, last=None, sweeps=None):
    sweep = [r for r in rows if r["layers"] != "all" and r["metric"] == metric and r["group"] == group]
    if not sweep:
        return False
    fig, axes = plt.subplots(1, len(tasks), figsize=(3.0 * len(tasks) + 0.8, 3.0), squeeze=False)
    styles = {"single": "-", "cumulative": "--", "cumulative-top": ":"}
    for ax, t in zip(axes[0], tasks):
        for (base, kind), pts in layer_series(sweep, t, last, sweeps).items():
            xs = [x for x, _ in pts]
            rs = [r for _, r in pts]
            color = SWEEP_COLORS[base] if base in SWEEP_COLORS else "#777777"
            ax.plot(xs, [r["mean"] for r in rs], marker="o", ms=2.5, lw=1, color=color,
                    ls=styles[kind], label=f"{base} ({kind})")
            ax.fill_between(xs, [r["ci_lo"] for r in rs], [r["ci_hi"] for r in rs], color=color, alpha=0.12)
        full = pick(rows, t, group, metric, "FULL")
        if full:
            ax.axhline(full["mean"], color="k", lw=0.7, ls=":")
        ax.set_title(t, fontsize=9)
        ax.set_xlabel("l: {l} (single), [0, l] (cumulative), [l, L-1] (cumulative-top)", fontsize=7)
        ax.set_ylim(0, 1.05)
        ax.legend(fontsize=5)
    axes[0][0].set_ylabel(f"{metric} (mean, 95 % CI)")
    fig.tight_layout()
    fig.savefig(out, dpi=150)
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
        sys.exit(f"plot_channels: {path} does not exist")
    rows = read_summary(path)
    tasks = []
    for r in rows:
        if r["task"] not in tasks and r["metric"] == a.metric and r["group"] == a.group:
            tasks.append(r["task"])
    if not tasks:
        sys.exit(f"plot_channels: no rows with metric '{a.metric}' and group '{a.group}' in {path}")
    out = a.out_dir or a.results
    os.makedirs(out, exist_ok=True)
    written = [os.path.join(out, "channels.png")]
    plot_split(rows, tasks, a.metric, a.group, written[0])
    if plot_swaps(rows, tasks, a.metric, a.group, os.path.join(out, "swaps.png")):
        written.append(os.path.join(out, "swaps.png"))
    last, sweeps = None, None  # the model's last layer (for [l, L-1]); the sweeps the study ran
    run_path = os.path.join(a.results, "run.json")
    if os.path.exists(run_path):
        with open(run_path, encoding="utf-8") as f:
            run = json.load(f)
        n = run.get("num_layers")
        last = n - 1 if isinstance(n, int) and n > 0 else None
        if isinstance(run.get("layer_sweeps"), list):
            sweeps = set(run["layer_sweeps"])
    if plot_layers(rows, tasks, a.metric, a.group, os.path.join(out, "layers.png"), last, sweeps):
        written.append(os.path.join(out, "layers.png"))
    for w in written:
        print(w)


if __name__ == "__main__":
    main()
