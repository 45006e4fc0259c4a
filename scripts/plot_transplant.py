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
"""

import argparse
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def load(folder):
    with open(os.path.join(folder, "summary.json")) as f:
        rows = json.load(f)
    with open(os.path.join(folder, "run.json")) as f:
        run = json.load(f)
    return rows, run


def value(row, metric):
    if ":" in metric:  # a watched head's attA / attB
        head, score = metric.split(":", 1)
        for w in row.get("watch", []):
            if w["head"] == head:
                m = w[score]
                return m["mean"], m["lo"], m["hi"]
        return None, None, None
    m = row[metric]
    return m["mean"], m["lo"], m["hi"]


def unit(metric):
    """Whether the metric is a share or an attention mass in [0, 1]."""
    return metric.split(":")[-1] in ("ansA", "ansB", "attA", "attB")


def bars(ax, rows, metric, title):
    names = [r["condition"] for r in rows]
    vals = [value(r, metric) for r in rows]
    mean = [v[0] if v[0] is not None else float("nan") for v in vals]
    err_lo = [(v[0] - v[1]) if v[1] is not None else 0.0 for v in vals]
    err_hi = [(v[2] - v[0]) if v[2] is not None else 0.0 for v in vals]
    ax.bar(range(len(rows)), mean, yerr=[err_lo, err_hi], color="#4c72b0", capsize=3)
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels(names, rotation=60, ha="right", fontsize=8)
    ax.set_ylabel(metric)
    ax.set_title(title, fontsize=10)
    if unit(metric):
        ax.set_ylim(0, 1.05)


ROW_KINDS = ("mixer", "layer", "mixer_in", "resid_pre", "upstream")


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
            v = value(r, metric)[0]
            grid[blocks.index(r["block"])][sets.index(r["positions"])] = float("nan") if v is None else v
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
        title = "mixer transplant, donor without %s" % without if kind == "upstream" else "%s transplant" % kind
        ax.set_title("%s: %s" % (title, metric), fontsize=10)
        fig.colorbar(im, ax=ax, fraction=0.046)
    bars(axes[-1], other, metric, "baselines and state transplants")
    reader = run.get("study", {}).get("reader")
    who = os.path.basename(str(run.get("model", "")))
    fig.suptitle("%s, %s, reader %s, n = %s pairs" % (
        who, rows[0]["task"] if rows else "", "L%dH%d" % (reader["layer"], reader["head"]) if reader else "none",
        rows[0]["n"] if rows else 0), fontsize=10)
    fig.tight_layout()
    fig.savefig(out, dpi=120)


def plot_query_map(rows, run, metric, out):
    full = [r for r in rows if "@" not in r["condition"]]
    curves = {}
    for r in rows:
        if r.get("kind") == "map":
            curves.setdefault(r["block"], []).append((r.get("fit_items", 0), value(r, metric)))
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2))
    bars(axes[0], full, metric, "conditions (every fit prompt)")
    for src, pts in curves.items():
        pts.sort()
        xs = [p[0] for p in pts]
        ys = [p[1][0] for p in pts]
        lo = [p[1][1] for p in pts]
        hi = [p[1][2] for p in pts]
        axes[1].plot(xs, ys, marker="o", label=src)
        axes[1].fill_between(xs, lo, hi, alpha=0.2)
    axes[1].set_xscale("log")
    axes[1].set_xlabel("fit prompts")
    axes[1].set_ylabel(metric)
    axes[1].set_title("learning curves of the map", fontsize=10)
    if unit(metric):
        axes[1].set_ylim(0, 1.05)
    axes[1].legend(fontsize=8)
    who = os.path.basename(str(run.get("model", "")))
    donor = os.path.basename(str(run.get("donor") or run.get("model", "")))
    fig.suptitle("query map %s -> %s, %s, n = %s pairs" % (donor, who, rows[0]["task"] if rows else "",
                                                         rows[0]["n"] if rows else 0), fontsize=10)
    fig.tight_layout()
    fig.savefig(out, dpi=120)


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
    if ":" in a.metric:
        watched = list(dict.fromkeys(w["head"] for r in rows for w in r.get("watch", [])))
        if a.metric.split(":")[0] not in watched:
            sys.exit("plot_transplant.py: --metric %s: %s watched no head %s (watched: %s)" % (
                a.metric, a.folder, a.metric.split(":")[0], ", ".join(watched) or "none"))
    kind = run.get("kind")
    if kind == "transplant":
        plot_transplant(rows, run, a.metric, a.out or os.path.join(a.folder, "transplant.png"))
    elif kind == "query-map":
        plot_query_map(rows, run, a.metric, a.out or os.path.join(a.folder, "query_map.png"))
    else:
        sys.exit("plot_transplant.py: %s/run.json is a '%s' study, not transplant or query-map" % (a.folder, kind))


if __name__ == "__main__":
    main()
