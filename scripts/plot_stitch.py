#!/usr/bin/python3
"""Figure of a `hylens experiment stitch` result folder (docs/study_stitch.md).

    /usr/bin/python3 scripts/plot_stitch.py RESULT_DIR [--out FIG.png]

Left: lookup accuracy (argmax over the vocabulary) and choice accuracy (argmax over the
dictionary's values; chance 1/N dashed) per condition with their bootstrap intervals. Middle:
the candidate margin (answer logit minus the mean logit of the other values). Right:
held-out perplexity per condition (log scale) with its interval. Everything is read from
summary.json; the title names host, donor and blocks from run.json. Each panel's title gives n
(a range "n = 4-5", in red, when its conditions differ); a condition without a value is an "n/a"
mark at its place; the figure's title says, in red, when run.json's status is not "complete"
(a merge of unfinished shards), and so does stderr. A folder with nothing to draw (a shard that
got no items, a run that never finished) gives a one-line message and exit status 1.
"""
import argparse
import json
import os
import sys
import warnings

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import figure_common as fc  # noqa: E402

SCRIPT = "plot_stitch"


def load(path):
    with open(path) as f:
        return json.load(f)


def figure_title(run):
    """Host, donor, blocks, seeds and the number of values, from run.json. The definition names
    its seeds as "seeds" (a list) since 2026-12-06, as "seed" before."""
    study = run.get("study", {})
    host = os.path.basename(str(run.get("host", "host")).rstrip("/"))
    donor = os.path.basename(str(run.get("donor", "donor")).rstrip("/"))
    seeds = study.get("seeds", [study.get("seed")])
    values = run.get("vocabulary", {}).get("values")
    return (f"stitch: {donor} blocks {','.join(study.get('donor_blocks', []))} -> {host} blocks "
            f"{','.join(study.get('host_blocks', []))} ({'seed' if len(seeds) == 1 else 'seeds'} "
            f"{','.join(str(s) for s in seeds)}" + (f", {values} values" if values else "") + ")")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("result", help="result folder of hylens experiment stitch")
    ap.add_argument("--out", help="figure file (default: RESULT/stitch.png)")
    a = ap.parse_args()
    fig = draw(a.result, a.out)
    print(fig.hylens_out)


def draw(result, out=None):
    """Writes the figure of the folder and returns it (open; its path as fig.hylens_out), or
    exits with a one-line message when the folder has nothing to draw."""
    for f in ("summary.json", "run.json"):
        if not os.path.exists(os.path.join(result, f)):
            state = fc.status_warning(fc.read_run(SCRIPT, result, required=False))
            sys.exit(f"plot_stitch: {result} has no {f} (" + (f"{state}: " if state else "") +
                     "not a finished stitch result folder)")
    summary = fc.read_json(SCRIPT, os.path.join(result, "summary.json"))
    run = fc.read_run(SCRIPT, result)
    if run.get("kind") != "stitch":
        sys.exit(f"plot_stitch: {result}/run.json is a '{run.get('kind')}' study, not 'stitch'")
    if not isinstance(summary, dict) or not isinstance(summary.get("rows"), list):
        sys.exit(f"plot_stitch: {result}/summary.json is not a stitch summary (no rows)")
    out = out or os.path.join(result, "stitch.png")
    study = run.get("study", {})
    order = list(study.get("conditions", []))
    rows = summary["rows"]
    if not any(fc.is_num(r.get("value")) for r in rows):
        shard = fc.shard_of(run)
        fc.fail(SCRIPT, f"{result} has no items (summary.json has " + ("no rows" if not rows else "no values") +
                (f"; shard {shard} got none" if shard else "") + "): nothing to draw")
    state = fc.status_warning(run)
    if state:
        fc.warn(SCRIPT, f"{result}: {state}")
    for r in rows:
        if r["condition"] not in order:
            order.append(r["condition"])

    nan = {"value": None, "lo": None, "hi": None, "n": None}

    def series(task_prefix, metric):
        """Every condition of the study (those without a row of the metric are NaN: "n/a")."""
        got = {r["condition"]: r for r in rows if r["task"].startswith(task_prefix) and r["metric"] == metric}
        conds = order if got else []
        cells = [got.get(c, nan) for c in conds]
        return (conds, [fc.num(r["value"]) for r in cells], [fc.num(r["lo"]) for r in cells],
                [fc.num(r["hi"]) for r in cells], [r.get("n") for r in cells])

    def bars(ax, conds, vals, lo, hi, color, offset=0.0, width=0.8, label=None):
        xs = [i + offset for i in range(len(conds))]
        err = fc.error_bars(vals, lo, hi)
        with warnings.catch_warnings():  # all values NaN: matplotlib's "All-NaN axis"
            warnings.simplefilter("ignore", RuntimeWarning)
            ax.bar(xs, vals, width, yerr=err, color=color, capsize=3, label=label)
        for x, v in zip(xs, vals):
            if v != v:
                fc.na_mark(ax, x)
        ax.set_xticks(range(len(conds)))
        ax.set_xticklabels(conds, rotation=40, ha="right", fontsize=8)
        ax.set_xlim(-0.6, len(conds) - 0.4)

    uneven = []

    def title(ax, text, ns):
        ns = [n for n, v in ns if v == v]  # the n of the drawn values
        t = ax.set_title(f"{text}, {fc.n_range(ns)}" if ns else text)
        if fc.unequal(ns):
            t.set_color(fc.WARN_COLOR)
            uneven.append(f"{text.split(':')[0]}: {fc.n_range(ns)}")

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.6))
    c, v, lo, hi, n = series("lookup", "acc")
    bars(axes[0], c, v, lo, hi, "#4c72b0", -0.2, 0.4, "acc")
    c2, v2, lo2, hi2, n2 = series("lookup", "cacc")
    bars(axes[0], c2, v2, lo2, hi2, "#dd8452", 0.2, 0.4, "cacc")
    task = next((r["task"] for r in rows if r["task"].startswith("lookup")), "lookup")
    n_pairs = int("".join(ch for ch in task.split(":")[-1] if ch.isdigit()) or 8)
    axes[0].axhline(1.0 / n_pairs, ls="--", color="gray", lw=1, label=f"chance 1/{n_pairs}")
    axes[0].set_ylim(0, 1.05)
    title(axes[0], f"{task}: accuracy (95% CI)", list(zip(n, v)) + list(zip(n2, v2)))
    axes[0].legend(fontsize=8)
    c, v, lo, hi, n = series("lookup", "margin")
    bars(axes[1], c, v, lo, hi, "#55a868")
    axes[1].axhline(0, color="black", lw=0.8)
    title(axes[1], "candidate margin (answer - mean other value)", list(zip(n, v)))
    c, v, lo, hi, n = series("ppl", "ppl")
    if not c and study.get("ppl_seqs"):  # the study measures perplexity, the folder has none
        c, n = order, [None] * len(order)
        v = lo = hi = [float("nan")] * len(order)
    if c:
        bars(axes[2], c, v, lo, hi, "#8172b2")
        if any(x == x and x > 0 for x in v):
            axes[2].set_yscale("log")
        title(axes[2], f"held-out perplexity ({study.get('ppl_seqs')} x {study.get('ppl_len')} tokens)",
              list(zip(n, v)))
    if uneven:
        fc.warn(SCRIPT, f"{result}: unequal n across conditions ({'; '.join(uneven)})")
    fc.flag_figure(fig, figure_title(run), [state, "unequal n across conditions (" + "; ".join(uneven) + ")"
                                            if uneven else None])
    fig.tight_layout()
    fc.save_figure(fig, out, 120)
    fig.hylens_out = out
    return fig


if __name__ == "__main__":
    main()
