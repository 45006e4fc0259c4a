#!/usr/bin/env python3
"""Ratio table from compare_llamacpp.sh output: hylens / llama.cpp median tokens/s per
(preset, dtype, test, threads), hylens's fraction of the floor measured in its own run, and
llama.cpp's fraction of that same floor (its tokens/s over the floor's tokens/s: both engines
do the same work per token on these models). The last gives the ratio's ceiling: 1 / llama.cpp's
fraction is the ratio hylens would reach running at the floor, so a target ratio above it cannot
be met on that machine that day.

usage: summarize_compare.py OUT.jsonl              (prints a Markdown table)
       summarize_compare.py R1.jsonl R2.jsonl ...   (rounds of the same run: each row's ratio and
                                                    fraction per round, and their medians)

A fraction whose floor moved during its test (hylens bench's floor_spread below 0.9: the rates
measured before and after it differ by more than 10 %) is marked *, and the median of the
fractions leaves such rounds out (all of them, if no round is steady). The last column is hylens
bench's paired_fraction_of_floor (each repetition over the floor measured around it, so it holds
up when the floor moves; since session 30): per round and the median over the rounds; "-" for
rows of earlier builds.
"""
import json
import statistics
import sys
from collections import defaultdict

STEADY = 0.9  # floor_spread at or above this: the machine's rate held through the test


def read(path):
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
            # rows of hylens bench before session 21 have no floor_spread: taken as steady
            frac[key] = (r["fraction_of_floor"], r["floor_name"], r["floor_rate"], r.get("floor_spread", 1.0),
                         r["floor_value"], r.get("paired_fraction_of_floor"))
    return med, frac


def steady_or_all(values, spreads):
    """The values whose floor held (spread >= STEADY), or all of them if none did."""
    return [v for v, s in zip(values, spreads) if s >= STEADY] or list(values)


def llama_fraction(med, frac, key):
    """llama.cpp's median tokens/s over the floor (tokens/s) that hylens measured beside it."""
    return med[key]["llama.cpp"] / frac[key][4]


def rows(med):
    """The keys both engines ran, by threads, model, dtype, test."""
    keys = [k for k in med if "llama.cpp" in med[k] and "hylens" in med[k]]
    return sorted(keys, key=lambda k: (k[3], k[0], k[1], k[2]))


def paired(values):
    """The paired fractions that rows have, as "0.91 / 0.88", or "-" if none has one."""
    return " / ".join(f"{v:.2f}" for v in values if v is not None) or "-"


def one(path):
    med, frac = read(path)
    print("| model | dtype | test | threads | llama.cpp t/s | hylens t/s | hylens / llama.cpp | hylens of floor (floor) "
          "| llama.cpp of floor | ratio at the floor | hylens of the paired floor |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for key in rows(med):
        e = med[key]
        f, fname, frate, spread, _, pf = frac[key]
        unit = "GFLOP/s" if fname.endswith("gflops") else "GB/s"
        lf = llama_fraction(med, frac, key)
        print(f"| {key[0]} | {key[1]} | {key[2]} | {key[3]} | {e['llama.cpp']:.2f} | {e['hylens']:.2f} | "
              f"{e['hylens'] / e['llama.cpp']:.2f}x | {mark(f, spread)} ({frate:.1f} {unit}) | {mark(lf, spread)} | "
              f"{1 / lf:.2f}x | {paired([pf])} |")


def mark(fraction, spread):
    return f"{fraction:.2f}" + ("" if spread >= STEADY else "*")


def rounds(paths):
    runs = [read(p) for p in paths]
    common = set.intersection(*(set(rows(m)) for m, _ in runs))
    keys = [k for k in rows(runs[0][0]) if k in common]
    print("| model | dtype | test | threads | hylens / llama.cpp per round | median | hylens of floor per round "
          "(* floor moved) | median (steady rounds) | floor per round | llama.cpp of floor, median (steady rounds) "
          "| ratio at the floor | hylens of the paired floor per round (median) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for key in keys:
        ratios = [m[key]["hylens"] / m[key]["llama.cpp"] for m, _ in runs]
        spreads = [f[key][3] for _, f in runs]
        steady = steady_or_all([f[key][0] for _, f in runs], spreads)
        lf = statistics.median(steady_or_all([llama_fraction(m, f, key) for m, f in runs], spreads))
        unit = "GFLOP/s" if runs[0][1][key][1].endswith("gflops") else "GB/s"
        floors = " / ".join(f"{f[key][2]:.1f}" for _, f in runs)
        print(f"| {key[0]} | {key[1]} | {key[2]} | {key[3]} | {' / '.join(f'{x:.2f}' for x in ratios)} | "
              f"**{statistics.median(ratios):.2f}x** | {' / '.join(mark(f[key][0], f[key][3]) for _, f in runs)} | "
              f"{statistics.median(steady):.2f} | {floors} {unit} | {lf:.2f} | {1 / lf:.2f}x | {paired_rounds(runs, key)} |")


def paired_rounds(runs, key):
    """The rounds' paired fractions and, when every round has one, their median."""
    values = [f[key][5] for _, f in runs]
    if any(v is None for v in values):
        return paired(values)
    return f"{paired(values)} ({statistics.median(values):.2f})"


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    one(sys.argv[1]) if len(sys.argv) == 2 else rounds(sys.argv[1:])
