#!/usr/bin/env python3
"""Overhead of the Python bindings: Model.forward called from Python against the same
forward timed inside C++ (Model._time_forward: the identical call on the same model, cache
and ids, with no Python between the repetitions), in one process, interleaved.

    PYTHONPATH=build/python /usr/bin/python3 benchmarks/bench_python.py --model DIR [--reps N]

DIR: a Qwen3.5-0.8B-shaped folder, e.g. random bf16 weights from
`tools/anchor/make_random_hf.py --preset qwen35-0.8b --dtype bf16 --out DIR` (1.5 GB, keep it
outside the repository). Cases: prefill of 128 tokens on a fresh cache (logits of every
position), and one decode step on the cache after those 128 tokens. Each repetition runs on a
fresh copy of the starting cache, copied outside the timed region on both sides; the two
calls of a pair run back to back, in alternating order. Reported: medians of each side, the
median and range of the per-pair ratio Python / C++, and the median per-pair difference (the
binding's own cost). The C++ call is the floor: the ratio stays at 1 up to the noise. --tiny adds the same two cases on
the shipped 8-layer test model, where the fixed cost of a call is most visible.
"""

import argparse
import statistics
import time
from pathlib import Path

import numpy as np

import hylens

ROOT = Path(__file__).resolve().parents[1]


def bench(model, ids, start, reps):
    """(C++ seconds, Python seconds) per repetition: pairs of the two calls, the order
    alternating from pair to pair so that a drift of the machine's load hits both sides."""
    cpp, py = [], []

    def from_python():
        c = start.clone()
        t0 = time.perf_counter()
        logits = model.forward(ids, cache=c)
        py.append(time.perf_counter() - t0)
        assert logits.shape == (len(ids), model.vocab)

    for r in range(reps):
        if r % 2:
            from_python()
        cpp.extend(model._time_forward(ids, start, 1))
        if not r % 2:
            from_python()
    return cpp, py


def report(name, cpp, py):
    mc, mp = statistics.median(cpp), statistics.median(py)
    ratios = sorted(p / c for p, c in zip(py, cpp))
    diff = statistics.median(p - c for p, c in zip(py, cpp))
    print(f"| {name} | {len(cpp)} | {mc * 1e3:.3f} | {mp * 1e3:.3f} | {statistics.median(ratios):.4f} | "
          f"{ratios[0]:.3f} - {ratios[-1]:.3f} | {diff * 1e6:+.1f} |")


def run_model(label, path, reps_prefill, reps_decode):
    model = hylens.load(str(path))
    rng = np.random.default_rng(0)
    prompt = rng.integers(0, model.vocab, 128)
    step = rng.integers(0, model.vocab, 1)
    fresh = model.new_cache()
    after = model.prefill(prompt)
    model.forward(prompt, cache=fresh.clone())  # warm-up (page in the mapped weights)
    report(f"{label}: prefill 128", *bench(model, prompt, fresh, reps_prefill))
    report(f"{label}: decode 1", *bench(model, step, after, reps_decode))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", help="Qwen3.5-0.8B-shaped model folder")
    ap.add_argument("--reps", type=int, default=7, help="repetitions of the prefill (decode: 4x)")
    ap.add_argument("--tiny", action="store_true", help="also the shipped 8-layer test model")
    args = ap.parse_args()
    print("| case | pairs | C++ median ms | Python median ms | Python / C++ (median of pairs) | range | "
          "Python - C++ (median of pairs, µs) |")
    print("|---|---|---|---|---|---|---|")
    if args.model:
        run_model("0.8B", args.model, args.reps, 4 * args.reps)
    if args.tiny:
        run_model("tiny", ROOT / "tests" / "golden" / "models" / "qwen3_5_dense", 50, 200)


if __name__ == "__main__":
    main()
