#!/usr/bin/python3
"""Figure of a `hylens experiment circuit` result folder (docs/study_circuit.md).

    /usr/bin/python3 scripts/plot_circuit.py RESULT_DIR [--out FIG.png]

Left: the gap D(clean) - D(corrupted) with its bootstrap interval for the baseline (B1), each
layer group removed (B2), each linear layer removed (B3) and each value head of the first linear
layer removed (B5, when the folder has it); the dashed line is the critical
threshold (critical x baseline gap). Middle: accuracy over the 2n prompts (argmax over the vocabulary, and over the
dictionary's values) for the same conditions, with the chance line. Right: the head scan (B4): every softmax head's attention mass on the target entry
(bars) and the gap with that head removed (dots, right axis); the reader is marked.
Everything is read from summary.json and circuit.json.
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


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("result", help="result folder of hylens experiment circuit")
    ap.add_argument("--out", help="figure file (default: RESULT/circuit.png)")
    a = ap.parse_args()
    for f in ("summary.json", "circuit.json", "run.json"):
        if not os.path.exists(os.path.join(a.result, f)):
            sys.exit(f"plot_circuit: {a.result} has no {f} (not a finished circuit result folder)")
    summary = load(os.path.join(a.result, "summary.json"))
    circuit = load(os.path.join(a.result, "circuit.json"))
    run = load(os.path.join(a.result, "run.json"))
    out = a.out or os.path.join(a.result, "circuit.png")

    rows = [r for r in summary["conditions"] if r["block"] in ("B1", "B2", "B3", "B5")]
    labels = [r["condition"].replace("group:", "-").replace("layer:", "-").replace("vhead:", "-v ") for r in rows]
    colors = {"B1": "0.4", "B2": "tab:blue", "B3": "tab:orange", "B5": "tab:cyan"}
    scans = "B1-B3, B5" if any(r["block"] == "B5" for r in rows) else "B1-B3"

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    x = list(range(len(rows)))

    def bars(ax, metric, offset, width, color, label=None):
        vals = [r[metric]["value"] for r in rows]
        err = [[v - r[metric]["lo"] for v, r in zip(vals, rows)], [r[metric]["hi"] - v for v, r in zip(vals, rows)]]
        ax.bar([i + offset for i in x], vals, width, yerr=err, capsize=3, color=color, label=label)

    bars(axes[0], "gap", 0.0, 0.8, [colors[r["block"]] for r in rows])
    axes[0].set_title(f"gap ({scans})")
    bars(axes[1], "acc", -0.2, 0.4, "tab:purple", "acc (argmax over the vocabulary)")
    bars(axes[1], "cacc", 0.2, 0.4, "tab:olive", "cacc (argmax over the values)")
    n_pairs = int("".join(ch for ch in run["study"]["variant"] if ch.isdigit()) or 8)
    axes[1].axhline(1.0 / n_pairs, color="0.5", ls=":", lw=0.8, label=f"chance 1/{n_pairs}")
    axes[1].set_ylim(0, 1.05)
    axes[1].legend(fontsize=8)
    axes[1].set_title(f"accuracy over the 2n prompts ({scans})")
    for ax in axes[:2]:
        ax.set_xticks(x)
        ax.set_xticklabels(labels, rotation=45, ha="right", fontsize=8)
        ax.axhline(0, color="k", lw=0.6)
    crit = run["study"]["critical"] * circuit["baseline"]["gap"]
    if circuit["baseline"]["gap"] > 0:
        axes[0].axhline(crit, color="tab:red", ls="--", lw=0.8, label=f"critical ({run['study']['critical']} x baseline)")
        axes[0].legend(fontsize=8)
    axes[0].set_ylabel("D(clean) - D(corrupted), 95 % CI")

    cands = circuit["reader_candidates"]
    names = [f"L{c['layer']}H{c['head']}" for c in cands]
    ax = axes[2]
    ax.bar(range(len(cands)), [c["target_mass"] for c in cands], color="tab:green", alpha=0.7, label="target mass")
    ax.set_xticks(range(len(cands)))
    ax.set_xticklabels(names, rotation=45, ha="right", fontsize=8)
    ax.set_ylabel("attention on the target entry")
    ax2 = ax.twinx()
    head_gap = {r["condition"]: r["gap"]["value"] for r in summary["conditions"] if r["block"] == "B4"}
    ys = [head_gap.get(f"head:L{c['layer']}H{c['head']}", float("nan")) for c in cands]
    ax2.plot(range(len(cands)), ys, "o", color="k", label="gap, head removed")
    ax2.axhline(circuit["baseline"]["gap"], color="0.5", ls=":", lw=0.8)
    ax2.set_ylabel("gap with the head removed")
    reader = circuit["reader"]
    ri = next(i for i, c in enumerate(cands) if c["layer"] == reader["layer"] and c["head"] == reader["head"])
    ax.get_xticklabels()[ri].set_color("tab:red")
    ax.set_title(f"head scan (B4): reader L{reader['layer']}H{reader['head']}")

    model = os.path.basename(run.get("model", "").rstrip("/"))
    seeds = circuit.get("seeds", [])
    pooled = ""
    if len(seeds) > 1:  # several seeds: how many give the pooled reader
        a = circuit["agreement"]  # its counts are over the seeds with roles
        pooled = f" over seeds {','.join(map(str, seeds))} (reader in {a['reader']} of {a['seeds']}"
        if a.get("without_roles"):
            pooled += f"; seeds {','.join(map(str, a['without_roles']))} without roles"
        pooled += ")"
    fig.suptitle(
        f"circuit: {model}, {run['study']['variant']}, n = {circuit['items']} pairs{pooled}; "
        f"Encode G{circuit['encode']['group']} {circuit['encode']['layers']}, "
        f"Address G{circuit['address']['group']} {circuit['address']['layers']}"
    )
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print(out)


if __name__ == "__main__":
    main()
