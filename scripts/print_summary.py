#!/usr/bin/env python3
"""Prints a channel-study summary (summary.csv of `hylens experiment channels`) as a table:
one row per task, one column per condition, each cell `mean [ci_lo, ci_hi]` of the task's
primary score over all items and seeds (95 % percentile bootstrap, B = 10,000).

usage: print_summary.py RESULTS_DIR [--metric score] [--group all]
A cell without a value (a NaN mean, written empty) shows "n/a"; a folder whose run.json status is
not "complete" (a merge of unfinished shards) and a task whose conditions differ in n are named
on stderr. A cell whose interval is a point (every resample gave the same mean: all scores 0, or
all 1, or one item per seed) is marked `*`, and the note under the table gives Wilson's interval
of such cells (summary.csv's wilson_lo, wilson_hi) and names cells with fewer than 5 items in a
seed (min_seed_n), whose intervals fall short of 95 %.
Standard library only, so it runs wherever the study runs.
"""
import argparse
import csv
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import figure_common as fc  # noqa: E402  (standard library only)

FEW_PER_SEED = 5  # below this many items in a seed, the within-seed interval falls short (docs/experiments.md)
ORDER = ["FULL", "KV_ONLY", "REC_ONLY", "NONE", "KV_A+REC_B", "KV_B+REC_A", "KV_A+REC_A", "KV_B+REC_B"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", help="result folder of hylens experiment channels")
    ap.add_argument("--metric", default="score", help="metric column to show (default: score)")
    ap.add_argument("--group", default="all", help="item group to show (default: all)")
    args = ap.parse_args()
    path = os.path.join(args.results, "summary.csv")
    if not os.path.isfile(path):
        print(f"print_summary.py: no summary.csv in {args.results}", file=sys.stderr)
        return 1
    cells, tasks, conds = {}, [], []
    try:
        with open(path, newline="") as f:
            for row in csv.DictReader(f):
                if row["metric"] != args.metric or row["group"] != args.group or row["layers"] != "all":
                    continue
                t, c = row["task"], row["condition"]
                if t not in tasks:
                    tasks.append(t)
                if c not in conds:
                    conds.append(c)
                cells[(t, c)] = (fc.num(row["mean"]), fc.num(row["ci_lo"]), fc.num(row["ci_hi"]), int(row["n"] or 0),
                                 fc.num(row.get("wilson_lo", "")), fc.num(row.get("wilson_hi", "")),
                                 int(row["min_seed_n"]) if row.get("min_seed_n") else None)
    except (OSError, ValueError, KeyError, TypeError, csv.Error) as e:
        print(f"print_summary.py: {path} is not a channel-study summary.csv ({type(e).__name__}: {e})",
              file=sys.stderr)
        return 1
    if not cells:
        print(f"print_summary.py: no rows with metric={args.metric}, group={args.group} in {path}", file=sys.stderr)
        return 1
    conds.sort(key=lambda c: ORDER.index(c) if c in ORDER else len(ORDER))
    run = fc.read_run("print_summary.py", args.results, required=False)
    state = fc.status_warning(run)
    if state:
        fc.warn("print_summary.py", f"{args.results}: {state}")
    uneven = []
    for t in tasks:
        ns = [v[3] for (tt, _), v in cells.items() if tt == t and v[0] == v[0]]
        if fc.unequal(ns):
            uneven.append(f"{t}: {fc.n_range(ns)}")
    if uneven:
        fc.warn("print_summary.py", f"{args.results}: unequal n across conditions ({'; '.join(uneven)})")
    width = max(len(t) for t in tasks)
    head = " " * width + "".join(f"  {c:>18} " for c in conds)
    print(head.rstrip())
    points, few = {}, []
    for t in tasks:
        line = f"{t:<{width}}"
        for c in conds:
            if (t, c) in cells and cells[(t, c)][0] != cells[(t, c)][0]:
                line += f"  {'n/a':>18} "
            elif (t, c) in cells:
                m, lo, hi, n, wlo, whi, min_seed_n = cells[(t, c)]
                point = lo == hi
                line += f"  {m:5.2f} [{lo:4.2f}, {hi:4.2f}]{'*' if point else ' '}"
                if point:
                    points[(m, n)] = (wlo, whi)
                if min_seed_n is not None and min_seed_n < FEW_PER_SEED:
                    few.append(f"{t} {c} ({min_seed_n})")
            else:
                line += f"  {'-':>18} "
        print(line.rstrip())
    ns = sorted({v[3] for v in cells.values()})
    print(f"\n{args.metric}: mean [95 % CI], percentile bootstrap (B = 10,000; items resampled within each seed, "
          f"seeds pooled); n per cell: {', '.join(map(str, ns))}")
    if points:
        wilson = [f"mean {m:.2f}, n = {n}: [{lo:.2f}, {hi:.2f}]" for (m, n), (lo, hi) in sorted(points.items()) if lo == lo]
        print("* the interval is a point (every resample gave the same mean)"
              + (f"; Wilson's 95 % interval there: {'; '.join(wilson)}" if wilson else ""))
    if few:
        print(f"fewer than {FEW_PER_SEED} items in a seed (min_seed_n), intervals well below 95 % (the fewer, the "
              f"further): {', '.join(few)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
