"""tools/anchor/summarize_compare.py on hand-written rows of compare_llamacpp.sh's output: the
ratio, hylens's fraction of its floor, llama.cpp's fraction of the same floor and the ratio at
the floor (1 / llama.cpp's fraction), for one run and for rounds. Expected values worked out by
hand from the rows below, not by the script."""

import json
import subprocess
import sys

from conftest import SOURCE_DIR

SCRIPT = SOURCE_DIR / "tools" / "anchor" / "summarize_compare.py"


def llama_row(ts):
    # llama-bench's jsonl fields the script reads, tagged as compare_llamacpp.sh tags them
    return {"engine": "llama.cpp", "preset": "falcon-h1-0.5b", "dtype": "f32", "n_prompt": 512, "n_gen": 0,
            "n_threads": 1, "samples_ts": [ts - 1.0, ts, ts + 5.0]}


def hylens_row(ts, floor_ts, spread, paired=None):
    row = {"engine": "hylens", "preset": "falcon-h1-0.5b", "dtype": "f32", "test": "pp512", "threads": 1,
           "median_ts": ts, "fraction_of_floor": ts / floor_ts, "floor_value": floor_ts,
           "floor_name": "f32_gemm_gflops", "floor_rate": 90.0, "floor_spread": spread}
    if paired is not None:  # hylens bench since session 30
        row["paired_fraction_of_floor"] = paired
    return row


def write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def run(*paths):
    return subprocess.run([sys.executable, str(SCRIPT), *paths], capture_output=True, text=True,
                          check=True).stdout.splitlines()


def test_one_run(tmp_path):
    # llama.cpp median 50 t/s, hylens 60 t/s, floor 100 t/s: ratio 1.20, fractions 0.60 and 0.50,
    # at the floor hylens would run 100 / 50 = 2.00x
    out = run(write(tmp_path / "r.jsonl", [llama_row(50.0), hylens_row(60.0, 100.0, 0.95)]))
    assert out[2] == ("| falcon-h1-0.5b | f32 | pp512 | 1 | 50.00 | 60.00 | 1.20x | 0.60 (90.0 GFLOP/s) | 0.50 "
                      "| 2.00x | - |"), out


def test_rounds_leave_moved_floors_out(tmp_path):
    # round 1 steady: llama.cpp 40 of a floor of 100 (0.40); round 2 steady: 45 of 90 (0.50);
    # round 3 the floor moved (spread 0.5): 10 of 100 (0.10), left out of both medians.
    # llama.cpp's median fraction (0.40, 0.50) -> 0.45, the ratio at the floor 1 / 0.45 = 2.22x
    r1 = write(tmp_path / "1.jsonl", [llama_row(40.0), hylens_row(60.0, 100.0, 0.95)])
    r2 = write(tmp_path / "2.jsonl", [llama_row(45.0), hylens_row(72.0, 90.0, 0.92)])
    r3 = write(tmp_path / "3.jsonl", [llama_row(10.0), hylens_row(30.0, 100.0, 0.5)])
    out = run(r1, r2, r3)
    cells = [c.strip() for c in out[2].strip("|").split("|")]
    assert cells[4] == "1.50 / 1.60 / 3.00", out  # 60 / 40, 72 / 45, 30 / 10
    assert cells[5] == "**1.60x**"
    assert cells[6] == "0.60 / 0.80 / 0.30*"
    assert cells[7] == "0.70"  # median of the steady 0.60 and 0.80
    assert cells[9:] == ["0.45", "2.22x", "-"], out


def test_paired_fractions(tmp_path):
    # one run: the row's paired fraction as it is; rounds: each round's and their median
    # (0.70, 0.90, 0.80 -> 0.80, the moved floor of round 3 included: the pairing is what
    # makes it usable); a round without one (an earlier build) leaves the median out
    out = run(write(tmp_path / "r.jsonl", [llama_row(50.0), hylens_row(60.0, 100.0, 0.5, paired=0.77)]))
    assert out[2].endswith("| 2.00x | 0.77 |"), out
    r = [write(tmp_path / f"{i}.jsonl", [llama_row(40.0), hylens_row(60.0, 100.0, 0.95, paired=p)])
         for i, p in enumerate([0.7, 0.9, 0.8])]
    cells = [c.strip() for c in run(*r)[2].strip("|").split("|")]
    assert cells[11] == "0.70 / 0.90 / 0.80 (0.80)", cells
    old = write(tmp_path / "old.jsonl", [llama_row(40.0), hylens_row(60.0, 100.0, 0.95)])
    cells = [c.strip() for c in run(r[0], old)[2].strip("|").split("|")]
    assert cells[11] == "0.70", cells
