#!/usr/bin/env python3
"""Prints a channel-study summary (summary.csv of `hylens experiment channels`) as a table:
one row per task, one column per condition, each cell `mean [ci_lo, ci_hi]` of the task's
primary score over all items and seeds (95 % percentile bootstrap, B = 10,000).

usage: print_summary.py RESULTS_DIR [--metric score] [--group all]
Standard library only, so it runs wherever the study runs.
"""
import argparse
import csv
import os
import sys

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
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            if row["metric"] != args.metric or row["group"] != args.group or row["layers"] != "all":
                continue
            t, c = row["task"], row["condition"]
            if t not in tasks:
                tasks.append(t)
            if c not in conds:
                conds.append(c)
            cells[(t, c)] = (float(row["mean"]), float(row["ci_lo"]), float(row["ci_hi"]), int(row["n"]))
    if not cells:
        print(f"print_summary.py: no rows with metric={args.metric}, group={args.group} in {path}", file=sys.stderr)
        return 1
    conds.sort(key=lambda c: ORDER.index(c) if c in ORDER else len(ORDER))
    width = max(len(t) for t in tasks)
    head = " " * width + "".join(f"  {c:>18}" for c in conds)
    print(head)
    for t in tasks:
        line = f"{t:<{width}}"
        for c in conds:
            if (t, c) in cells:
                m, lo, hi, _ = cells[(t, c)]
                line += f"  {m:5.2f} [{lo:4.2f}, {hi:4.2f}]"
            else:
                line += f"  {'-':>18}"
        print(line)
    ns = sorted({v[3] for v in cells.values()})
    print(f"\n{args.metric}: mean [95 % CI], percentile bootstrap (B = 10,000; items resampled within each seed, "
          f"seeds pooled); n per cell: {', '.join(map(str, ns))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
