#!/usr/bin/python3
"""Figure of a `hylens experiment circuit` result folder (docs/study_circuit.md).

    /usr/bin/python3 scripts/plot_circuit.py RESULT_DIR [--out FIG.png]

Left: the gap D(clean) - D(corrupted) with its bootstrap interval for the baseline (B1), each
layer group removed (B2), each linear layer removed (B3) and each value head of the first linear
layer removed (B5, when the folder has it); the dashed line is the critical
threshold (critical x baseline gap). Middle: accuracy over the 2n prompts (argmax over the vocabulary, and over the
dictionary's values) for the same conditions, with the chance line. Right: the head scan (B4): every softmax head's attention mass on the target entry
(bars) and the gap with that head removed (dots, right axis); the reader is marked.
Everything is read from summary.json and circuit.json. The title gives n (a range "n = 30-33",
in red, when the drawn conditions differ) and says, in red, when run.json's status is not
"complete" (a merge of unfinished shards), and so does stderr; a condition without a value (a
NaN gap) is an "n/a" mark at its place. A folder with nothing to draw (a run that has not
finished, a shard that got no items) gives a one-line message and exit status 1.
"""
import argparse
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import figure_common as fc  # noqa: E402

SCRIPT = "plot_circuit"


def load(path):
    return fc.read_json(SCRIPT, path)


def check_folder(result):
    """A one-line exit when the folder has nothing to draw: what run.json says of it."""
    run = fc.read_run(SCRIPT, result, required=False)
    if not run:
        sys.exit(f"plot_circuit: {result} has no run.json (not a circuit result folder)")
    if run.get("kind") not in (None, "circuit"):
        sys.exit(f"plot_circuit: {result}/run.json is a '{run.get('kind')}' study, not 'circuit'")
    missing = [f for f in ("summary.json", "circuit.json") if not os.path.exists(os.path.join(result, f))]
    if not missing:
        return
    state = fc.status_warning(run)
    if state:
        fc.fail(SCRIPT, f"{result} has no {' or '.join(missing)} ({state}): nothing to draw")
    if run.get("status") == "complete" and not run.get("records"):
        shard = fc.shard_of(run)
        fc.fail(SCRIPT, f"{result} has no items (the run finished with 0 records" +
                (f"; shard {shard} got none" if shard else "") + "): nothing to draw")
    sys.exit(f"plot_circuit: {result} has no {missing[0]} (not a finished circuit result folder)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("result", help="result folder of hylens experiment circuit")
    ap.add_argument("--out", help="figure file (default: RESULT/circuit.png)")
    a = ap.parse_args()
    fig = draw(a.result, a.out)
    print(fig.hylens_out)


def draw(result, out=None):
    """Writes the figure of the folder and returns it (open; its path as fig.hylens_out), or
    exits with a one-line message when the folder has nothing to draw."""
    check_folder(result)
    summary = load(os.path.join(result, "summary.json"))
    circuit = load(os.path.join(result, "circuit.json"))
    run = load(os.path.join(result, "run.json"))
    out = out or os.path.join(result, "circuit.png")
    if not summary.get("conditions"):
        fc.fail(SCRIPT, f"{result} has no items (summary.json has no conditions): nothing to draw")
    state = fc.status_warning(run)
    if state:
        fc.warn(SCRIPT, f"{result}: {state}")

    rows = [r for r in summary["conditions"] if r["block"] in ("B1", "B2", "B3", "B5")]
    labels = [r["condition"].replace("group:", "-").replace("layer:", "-").replace("vhead:", "-v ") for r in rows]
    colors = {"B1": "0.4", "B2": "tab:blue", "B3": "tab:orange", "B5": "tab:cyan"}
    scans = "B1-B3, B5" if any(r["block"] == "B5" for r in rows) else "B1-B3"

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    x = list(range(len(rows)))

    def bars(ax, metric, offset, width, color, label=None):
        vals = [fc.num(r[metric]["value"]) for r in rows]
        lo = [fc.num(r[metric]["lo"]) for r in rows]
        hi = [fc.num(r[metric]["hi"]) for r in rows]
        err = fc.error_bars(vals, lo, hi)
        ax.bar([i + offset for i in x], vals, width, yerr=err, capsize=3, color=color, label=label)
        for i, v in zip(x, vals):
            if v != v:  # no value: not a zero bar
                fc.na_mark(ax, i + offset)

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
    base_gap = fc.num(circuit["baseline"]["gap"])
    crit = run["study"]["critical"] * base_gap
    if base_gap > 0:
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
    ys = [fc.num(head_gap.get(f"head:L{c['layer']}H{c['head']}")) for c in cands]
    ax2.plot(range(len(cands)), ys, "o", color="k", label="gap, head removed")
    if base_gap == base_gap:
        ax2.axhline(base_gap, color="0.5", ls=":", lw=0.8)
    ax2.set_ylabel("gap with the head removed")
    reader = circuit.get("reader")
    ri = next((i for i, c in enumerate(cands) if reader and c["layer"] == reader["layer"] and
               c["head"] == reader["head"]), None)
    if ri is not None:
        ax.get_xticklabels()[ri].set_color("tab:red")
    ax.set_title(f"head scan (B4): reader L{reader['layer']}H{reader['head']}" if reader
                 else "head scan (B4): no reader")

    model = os.path.basename(run.get("model", "").rstrip("/"))
    seeds = circuit.get("seeds", [])
    pooled = ""
    if len(seeds) > 1:  # several seeds: how many give the pooled reader
        a = circuit["agreement"]  # its counts are over the seeds with roles
        pooled = f" over seeds {','.join(map(str, seeds))} (reader in {a['reader']} of {a['seeds']}"
        if a.get("without_roles"):
            pooled += f"; seeds {','.join(map(str, a['without_roles']))} without roles"
        pooled += ")"
    ns = [r["n"] for r in rows if "n" in r and fc.num(r["gap"]["value"]) == fc.num(r["gap"]["value"])]
    n = fc.n_range(ns) if fc.unequal(ns) else f"n = {circuit['items']}"
    if fc.unequal(ns):
        fc.warn(SCRIPT, f"{result}: unequal n across conditions ({n})")

    def role(name):
        r = circuit.get(name) or {}
        return f"G{r.get('group')} {r.get('layers')}" if r else "none"

    fc.flag_figure(fig, f"circuit: {model}, {run['study']['variant']}, {n} pairs{pooled}; "
                        f"Encode {role('encode')}, Address {role('address')}",
                   [state, f"unequal n across conditions ({n})" if fc.unequal(ns) else None])
    fig.tight_layout()
    fc.save_figure(fig, out, 110)
    fig.hylens_out = out
    return fig


if __name__ == "__main__":
    main()
