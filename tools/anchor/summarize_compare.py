#!/usr/bin/env python3
"""Ratio table from compare_llamacpp.sh output: hylens / llama.cpp median tokens/s per
(preset, dtype, test, threads), and hylens's fraction of the floor measured in its own run.

usage: summarize_compare.py OUT.jsonl   (prints a Markdown table)
"""
import json
import statistics
import sys
from collections import defaultdict


def main(path):
    med = defaultdict(dict)   # (preset, dtype, test, threads) -> engine -> median t/s
    frac = {}
    for line in open(path):
        line = line.strip()
        if not line.startswith("{"):
            continue
        r = json.loads(line)
        if r["engine"] == "llama.cpp":
            test = f"pp{r['n_prompt']}" if r["n_gen"] == 0 else f"tg{r['n_gen']}"
            key = (r["preset"], r["dtype"], test, r["n_threads"])
            med[key]["llama.cpp"] = statistics.median(r["samples_ts"])
        else:
            key = (r["preset"], r["dtype"], r["test"], r["threads"])
            med[key]["hylens"] = r["median_ts"]
            frac[key] = (r["fraction_of_floor"], r["floor_name"], r["floor_rate"])
    print("| model | dtype | test | threads | llama.cpp t/s | hylens t/s | hylens / llama.cpp | hylens of floor (floor) |")
    print("|---|---|---|---|---|---|---|---|")
    for key in sorted(med, key=lambda k: (k[3], k[0], k[1], k[2])):  # threads, model, dtype, test
        e = med[key]
        if "llama.cpp" not in e or "hylens" not in e:
            continue
        f, fname, frate = frac[key]
        unit = "GFLOP/s" if fname.endswith("gflops") else "GB/s"
        print(f"| {key[0]} | {key[1]} | {key[2]} | {key[3]} | {e['llama.cpp']:.2f} | {e['hylens']:.2f} | "
              f"{e['hylens'] / e['llama.cpp']:.2f}x | {f:.2f} ({frate:.1f} {unit}) |")


if __name__ == "__main__":
    main(sys.argv[1])
