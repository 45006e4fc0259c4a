#!/usr/bin/python3
"""Figure of a `hylens experiment stitch` result folder (docs/study_stitch.md).

    /usr/bin/python3 scripts/plot_stitch.py RESULT_DIR [--out FIG.png]

Left: lookup accuracy (argmax over the vocabulary) and choice accuracy (argmax over the
dictionary's values; chance 1/N dashed) per condition with their bootstrap intervals. Middle:
the candidate margin (answer logit minus the mean logit of the other values). Right:
held-out perplexity per condition (log scale) with its interval. Everything is read from
summary.json; the title names host, donor and blocks from run.json.
"""
import argparse
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


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
    for f in ("summary.json", "run.json"):
        if not os.path.exists(os.path.join(a.result, f)):
            sys.exit(f"plot_stitch: {a.result} has no {f} (not a finished stitch result folder)")
    summary = load(os.path.join(a.result, "summary.json"))
    run = load(os.path.join(a.result, "run.json"))
    if run.get("kind") != "stitch":
        sys.exit(f"plot_stitch: {a.result}/run.json is a '{run.get('kind')}' study, not 'stitch'")
    out = a.out or os.path.join(a.result, "stitch.png")
    study = run.get("study", {})
    order = study.get("conditions", [])
    rows = summary["rows"]
    for r in rows:
        if r["condition"] not in order:
            order.append(r["condition"])

    def series(task_prefix, metric):
        got = {r["condition"]: r for r in rows if r["task"].startswith(task_prefix) and r["metric"] == metric}
        conds = [c for c in order if c in got]
        return conds, [got[c]["value"] for c in conds], [got[c]["lo"] for c in conds], [got[c]["hi"] for c in conds]

    def bars(ax, conds, vals, lo, hi, color, offset=0.0, width=0.8, label=None):
        xs = [i + offset for i in range(len(conds))]
        err = [[max(v - l, 0) for v, l in zip(vals, lo)], [max(h - v, 0) for v, h in zip(vals, hi)]]
        ax.bar(xs, vals, width, yerr=err, color=color, capsize=3, label=label)
        ax.set_xticks(range(len(conds)))
        ax.set_xticklabels(conds, rotation=40, ha="right", fontsize=8)

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.6))
    c, v, lo, hi = series("lookup", "acc")
    bars(axes[0], c, v, lo, hi, "#4c72b0", -0.2, 0.4, "acc")
    c2, v2, lo2, hi2 = series("lookup", "cacc")
    bars(axes[0], c2, v2, lo2, hi2, "#dd8452", 0.2, 0.4, "cacc")
    task = next((r["task"] for r in rows if r["task"].startswith("lookup")), "lookup")
    n_pairs = int("".join(ch for ch in task.split(":")[-1] if ch.isdigit()) or 8)
    axes[0].axhline(1.0 / n_pairs, ls="--", color="gray", lw=1, label=f"chance 1/{n_pairs}")
    axes[0].set_ylim(0, 1.05)
    axes[0].set_title(f"{task}: accuracy (95% CI)")
    axes[0].legend(fontsize=8)
    c, v, lo, hi = series("lookup", "margin")
    bars(axes[1], c, v, lo, hi, "#55a868")
    axes[1].axhline(0, color="black", lw=0.8)
    axes[1].set_title("candidate margin (answer - mean other value)")
    c, v, lo, hi = series("ppl", "ppl")
    if c:
        bars(axes[2], c, v, lo, hi, "#8172b2")
        axes[2].set_yscale("log")
        axes[2].set_title(f"held-out perplexity ({study.get('ppl_seqs')} x {study.get('ppl_len')} tokens)")
    fig.suptitle(figure_title(run))
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    print(out)


if __name__ == "__main__":
    main()
