"""The figure scripts (scripts/plot_*.py, print_summary.py) on the folders the studies can leave:
a figure never misstates a result. A folder whose run.json status is not "complete" says so in
the figure's title (red) and on stderr; n is a range when the drawn rows differ; a condition
without a value is an "n/a" mark at its place, not a missing (zero) bar; a figure with nothing
to draw is not written (exit 1, a message naming why); no folder gives a traceback.

Most folders are written by hand in the documented formats (the scripts read only the summaries
and run.json); two come from the real tool with tiny counts (HYLENS_CLI)."""

import csv
import json
import os
import subprocess
import sys

import pytest

from conftest import SOURCE_DIR, run_cli, script_module

matplotlib = pytest.importorskip("matplotlib")  # the figure scripts import it at the top
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
MODEL = SOURCE_DIR / "models" / "qwen35-tiny"
RED = matplotlib.colors.to_rgba("#c00000")


def script(name, *args):
    r = subprocess.run([PYTHON, str(SOURCE_DIR / "scripts" / f"{name}.py"), *map(str, args)],
                       capture_output=True, text=True, timeout=120)
    assert "Traceback" not in r.stderr, r.stderr
    return r


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


@pytest.fixture(scope="module")
def tp():
    return script_module("plot_transplant")


@pytest.fixture(scope="module")
def ch():
    return script_module("plot_channels")


@pytest.fixture(scope="module")
def st():
    return script_module("plot_stitch")


@pytest.fixture(scope="module")
def ci():
    return script_module("plot_circuit")


def write_json(path, obj):
    path.write_text(json.dumps(obj, indent=1))


def na_texts(fig):
    return [t for ax in fig.axes for t in ax.texts if t.get_text() == "n/a"]


def suptitle(fig):
    return fig._suptitle.get_text() if fig._suptitle is not None else ""


INCOMPLETE = {"status": "incomplete", "missing_shards": ["1/2"],
              "merged_from": [{"folder": "s0", "shard": "0/2", "status": "complete"}]}


# ---- transplant / query-map ---------------------------------------------------------------

def cell(mean, n, lo=None, hi=None):
    return {"mean": mean, "lo": mean if lo is None else lo, "hi": mean if hi is None else hi,
            "n": n if mean is not None else 0,
            "per_seed": [mean], "sd_seeds": None}


def tp_row(condition, kind, block, n, ans, att=None, positions=None, **extra):
    r = {"condition": condition, "kind": kind, "block": block, "n": n, "task": "transplant:chat8", "order": 0,
         "seeds": [1], "ansA": cell(ans, n), "ansB": cell(1 - ans if ans is not None else None, n),
         "dAB": cell(3.0 if ans is not None else None, n, 2.0, 4.0), "attA": cell(att, n), "attB": cell(att, n)}
    if positions:
        r["positions"] = positions
    r.update(extra)
    return r


def transplant_folder(root, name, rows, kind="transplant", reader=None, **run):
    d = root / name
    d.mkdir()
    write_json(d / "summary.json", rows)
    write_json(d / "run.json", {"kind": kind, "status": "complete", "model": "/m/qwen35-tiny",
                                "study": {"reader": reader, "shard": "0/1"}, **run})
    return d


def transplant_rows(n_b=8, att=None):
    return [tp_row("A", "baseline", "A", 8, 1.0, att), tp_row("B", "baseline", "B", n_b, 0.0, att),
            tp_row("mixer:G0@final", "mixer", "G0", 8, 1.0, att, "final"),
            tp_row("mixer:0@final", "mixer", "0", 8, None, None, "final"),
            tp_row("state:G0", "state", "G0", 8, 0.75, att)]


def query_rows(att=None):
    rows = [tp_row("A", "baseline", "A", 8, 1.0, att), tp_row("B", "baseline", "B", 8, 0.0, att)]
    for fit in (10, 25):
        rows.append(tp_row(f"map:G0@{fit}", "map", "G0", 8, 0.5, att, fit_items=fit))
        rows.append(tp_row(f"map:1@{fit}", "map", "1", 8, 0.6, att, fit_items=fit))
    rows.append(tp_row("map:G0", "map", "G0", 8, 0.9, att, fit_items=30))
    rows[-1]["condition"] = "map:G0"
    return rows


def test_transplant_metric_without_values_is_not_drawn(tmp_path):
    """attA with no reader head: every row n = 0. query-map crashed in fill_between, transplant
    wrote a blank figure titled "n = 8 pairs" with exit 0."""
    for kind, rows, png in (("query-map", query_rows(), "query_map.png"),
                            ("transplant", transplant_rows(), "transplant.png")):
        d = transplant_folder(tmp_path, kind, rows, kind=kind)
        r = script("plot_transplant", d, "--metric", "attA")
        assert r.returncode == 1
        assert "attA: no row has items (n = 0)" in r.stderr and "without a reader head" in r.stderr, r.stderr
        assert not (d / png).exists()
        assert script("plot_transplant", d).returncode == 0  # ansA has values
        assert (d / png).exists()


def test_transplant_title_gives_the_n_range_and_the_state(tp, tmp_path):
    """The title showed rows[0]["n"] (8) though B has 7; an incomplete merge was not flagged."""
    rows = transplant_rows(n_b=7)
    run = {"kind": "transplant", "model": "/m/qwen35-tiny", "study": {"reader": {"layer": 3, "head": 1}},
           **INCOMPLETE}
    fig = tp.plot_transplant(rows, run, "ansA", str(tmp_path / "t.png"))
    title = suptitle(fig)
    assert "INCOMPLETE: shard 1/2 missing" in title
    assert "n = 7-8 pairs" in title and "unequal n" in title
    assert fig._suptitle.get_color() in ("#c00000", RED)
    # the row without a value: an n/a cell of its heat map and no number
    assert len(na_texts(fig)) == 1
    # the same through the script: the warning on stderr, the figure's path on stdout
    d = transplant_folder(tmp_path, "inc", rows, **INCOMPLETE)
    r = script("plot_transplant", d)
    assert r.returncode == 0
    assert "INCOMPLETE: shard 1/2 missing" in r.stderr and "unequal n across conditions (n = 7-8)" in r.stderr
    assert r.stdout.strip() == str(d / "transplant.png")


def test_transplant_complete_folder_title(tp, tmp_path):
    fig = tp.plot_query_map(query_rows(att=0.5), {"kind": "query-map", "model": "/m/q", "status": "complete"},
                            "ansA", str(tmp_path / "q.png"))
    assert suptitle(fig) == "query map q -> q, transplant:chat8, n = 8 pairs"
    assert fig._suptitle.get_color() != RED
    # a learning curve with a missing value: no crash (None as NaN), the bars' n/a marks
    rows = query_rows(att=0.5)
    rows[2]["attA"] = cell(None, 0)
    rows[1]["attA"] = cell(None, 0)
    fig = tp.plot_query_map(rows, {"kind": "query-map", "model": "/m/q"}, "attA", str(tmp_path / "q2.png"))
    assert len(na_texts(fig)) == 1  # B's bar
    assert "n = 8 pairs" in suptitle(fig)


def test_transplant_folders_with_nothing_to_draw(tmp_path):
    """No summary.json was a FileNotFoundError traceback; a finished shard with 0 items a blank
    figure with exit 0."""
    d = tmp_path / "running"
    d.mkdir()
    write_json(d / "run.json", {"kind": "transplant", "status": "running", "study": {"shard": "0/2"}})
    (d / "items.jsonl").write_text("")
    r = script("plot_transplant", d)
    assert r.returncode == 1 and "has no summary.json" in r.stderr and "RUNNING" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    e = transplant_folder(tmp_path, "empty", [], study={"reader": None, "shard": "5/8"})
    r = script("plot_transplant", e)
    assert r.returncode == 1 and "has no items" in r.stderr and "shard 5/8" in r.stderr, r.stderr
    assert not (e / "transplant.png").exists()
    x = tmp_path / "none"
    x.mkdir()
    r = script("plot_transplant", x)
    assert r.returncode == 1 and "run.json does not exist" in r.stderr


# ---- channels -------------------------------------------------------------------------------

CSV_COLUMNS = ["task", "group", "metric", "condition", "base", "layers", "n", "mean", "ci_lo", "ci_hi", "rel_full",
               "rel_full_lo", "rel_full_hi", "seeds", "min_seed_n", "wilson_lo", "wilson_hi"]


def ch_row(task, condition, mean, n=10, rel=None, metric="score"):
    f = lambda x: "" if x is None else ("inf" if x == float("inf") else "-inf" if x == float("-inf") else f"{x:.6f}")
    return {"task": task, "group": "all", "metric": metric, "condition": condition, "base": condition.split("@")[0],
            "layers": "all", "n": n, "mean": f(mean), "ci_lo": f(None if mean is None else max(0.0, mean - 0.1)),
            "ci_hi": f(None if mean is None else min(1.0, mean + 0.1)), "rel_full": f(rel), "rel_full_lo": "",
            "rel_full_hi": ""}


def channels_folder(root, name, rows, **run):
    d = root / name
    d.mkdir()
    with open(d / "summary.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=CSV_COLUMNS)
        w.writeheader()
        w.writerows(rows)
    write_json(d / "run.json", {"status": "complete", "num_layers": 4, "layer_sweeps": [], **run})
    return d


def test_channels_missing_condition_is_marked_na(ch, tmp_path):
    """A condition without a row (REC_ONLY of t1) or with a NaN mean (NONE of t2) was skipped:
    no bar, read as 0 beside the legend."""
    rows = [ch_row("t1", "FULL", 1.0), ch_row("t1", "KV_ONLY", 0.5, rel=0.5), ch_row("t1", "NONE", 0.0, rel=0.0),
            ch_row("t2", "FULL", 1.0), ch_row("t2", "KV_ONLY", 1.0, rel=1.0), ch_row("t2", "REC_ONLY", 0.2, rel=0.2),
            ch_row("t2", "NONE", None)]
    d = channels_folder(tmp_path, "na", rows)
    summary = ch.read_summary(str(d / "summary.csv"))
    fig = ch.plot_split(summary, ["t1", "t2"], "score", "all", str(tmp_path / "c.png"), {}, keep=True)
    ax = fig.axes[0]
    marks = na_texts(fig)
    width = 0.8 / 4
    xs = sorted(round(t.get_position()[0], 6) for t in marks)
    assert xs == [round(0 + 0.5 * width, 6), round(1 + 1.5 * width, 6)]  # REC_ONLY of t1, NONE of t2
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["FULL", "KV_ONLY", "REC_ONLY", "NONE"]
    assert len(ax.patches) == 6  # the bars with a value
    assert [t.get_text() for t in ax.get_xticklabels()] == ["t1\nn = 10", "t2\nn = 10"]


def test_channels_inf_ratio_is_labelled(ch, tmp_path):
    """rel_full inf (FULL's mean 0: an unbounded ratio) lost its "% of FULL" label."""
    rows = [ch_row("t", "FULL", 0.0), ch_row("t", "KV_ONLY", 0.5, rel=float("inf")),
            ch_row("t", "REC_ONLY", 0.0, rel=None), ch_row("t", "NONE", 0.25, rel=2.5)]
    d = channels_folder(tmp_path, "inf", rows)
    fig = ch.plot_split(ch.read_summary(str(d / "summary.csv")), ["t"], "score", "all", str(tmp_path / "c.png"), {},
                        keep=True)
    labels = [t.get_text() for t in fig.axes[0].texts]
    assert "∞" in labels and "250%" in labels
    assert ch.read_summary(str(d / "summary.csv"))[1]["rel_full"] == float("inf")


def test_channels_swaps_only_skips_channels_png(tmp_path):
    """A study of swap conditions only wrote an empty channels.png and printed its path."""
    rows = [ch_row("dictionary", c, 1.0, n=4) for c in ("KV_A+REC_B", "KV_B+REC_A")]
    rows += [ch_row("dictionary", c, v, n=4, metric="first_token")
             for c, v in (("KV_A+REC_B", 1.0), ("KV_B+REC_A", 0.0))]
    d = channels_folder(tmp_path, "sw", rows)
    r = script("plot_channels", d)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [str(d / "swaps.png")]
    assert not (d / "channels.png").exists()
    assert "channels.png not written: no split-prefill condition" in r.stderr


def test_channels_incomplete_and_unequal_n_are_flagged(ch, tmp_path):
    """A merge of an unfinished shard (status incomplete) with one condition at n = 10, the others
    at 11: the figures said neither."""
    rows = [ch_row("dictionary", c, 1.0, n=10 if c == "REC_ONLY" else 11) for c in ch.SPLIT]
    rows += [ch_row("dictionary", c, 1.0, n=11) for c in ch.SWAPS]
    d = channels_folder(tmp_path, "inc", rows, **INCOMPLETE)
    summary = ch.read_summary(str(d / "summary.csv"))
    run = json.loads((d / "run.json").read_text())
    fig = ch.plot_split(summary, ["dictionary"], "score", "all", str(tmp_path / "c.png"), run, keep=True)
    assert "INCOMPLETE: shard 1/2 missing" in suptitle(fig)
    assert "unequal n across conditions (dictionary: n = 10-11)" in suptitle(fig).replace("\n", " ")
    tick = fig.axes[0].get_xticklabels()[0]
    assert tick.get_text() == "dictionary\nn = 10-11" and matplotlib.colors.to_rgba(tick.get_color()) == RED
    fig = ch.plot_swaps(summary, ["dictionary"], "score", "all", str(tmp_path / "s.png"), run, keep=True)
    assert suptitle(fig).startswith("INCOMPLETE: shard 1/2 missing")
    assert fig.axes[0].get_title() == "dictionary, n = 11"
    r = script("plot_channels", d)
    assert r.returncode == 0
    assert "warning" in r.stderr and "INCOMPLETE: shard 1/2 missing" in r.stderr
    assert "unequal n across conditions (dictionary: n = 10-11)" in r.stderr
    assert r.stdout.split() == [str(d / "channels.png"), str(d / "swaps.png")]
    # print_summary says the same on stderr
    p = script("print_summary", d)
    assert p.returncode == 0 and "INCOMPLETE: shard 1/2 missing" in p.stderr and "dictionary: n = 10-11" in p.stderr


def test_channels_nothing_to_draw_exits(tmp_path):
    rows = [ch_row("t", c, None) for c in ("FULL", "NONE")]
    d = channels_folder(tmp_path, "nan", rows)
    r = script("plot_channels", d)
    assert r.returncode == 1
    assert "nothing to draw for metric 'score'" in r.stderr
    assert not (d / "channels.png").exists()
    p = script("print_summary", d)  # a NaN mean (an empty cell) was a ValueError
    assert p.returncode == 0 and "n/a" in p.stdout


def test_print_summary_marks_point_intervals_and_few_items_per_seed(tmp_path):
    """A [1.00, 1.00] interval read as certainty: the table marks it and gives Wilson's interval
    of the cell; a cell from 1 item per seed (an interval of no width, whatever the scores) is
    named. Older summaries without the columns still print."""
    full = dict(ch_row("t", "FULL", 1.0, n=36), ci_lo="1.000000", ci_hi="1.000000", seeds=3, min_seed_n=12,
                wilson_lo="0.903600", wilson_hi="1.000000")
    kv = dict(ch_row("t", "KV_ONLY", 0.5, n=36), seeds=3, min_seed_n=12, wilson_lo="0.339000", wilson_hi="0.661000")
    rec = dict(ch_row("t", "REC_ONLY", 1 / 3, n=3), ci_lo="0.333333", ci_hi="0.333333", seeds=3, min_seed_n=1,
               wilson_lo="0.061500", wilson_hi="0.792300")
    d = channels_folder(tmp_path, "points", [full, kv, rec])
    p = script("print_summary", d)
    assert p.returncode == 0, p.stderr
    row = p.stdout.splitlines()[1]
    assert "1.00 [1.00, 1.00]*" in row and "0.50 [0.40, 0.60] " in row and "0.33 [0.33, 0.33]*" in row
    assert ("Wilson's 95 % interval there: mean 0.33, n = 3: [0.06, 0.79]; "
            "mean 1.00, n = 36: [0.90, 1.00]") in p.stdout
    assert "intervals well below 95 % (the fewer, the further): t REC_ONLY (1)" in p.stdout
    old = tmp_path / "old"
    old.mkdir()
    rows = [{k: v for k, v in r.items() if k not in ("seeds", "min_seed_n", "wilson_lo", "wilson_hi")} for r in (full, kv)]
    with open(old / "summary.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=CSV_COLUMNS[:13])
        w.writeheader()
        w.writerows(rows)
    p = script("print_summary", old)
    assert p.returncode == 0 and "* the interval is a point (every resample gave the same mean)\n" in p.stdout


def test_save_figure_never_leaves_a_cut_png(tmp_path):
    """A script killed while writing its PNG left a 0-byte file under the figure's name: the
    figure goes to a temporary file, renamed into place once whole."""
    fc = script_module("figure_common")
    out = tmp_path / "f.png"
    out.write_bytes(b"the earlier figure")
    fig = plt.figure()

    def cut(path, **kw):
        with open(path, "wb") as f:
            f.write(b"\x89PNG")
        raise KeyboardInterrupt

    real = fig.savefig
    fig.savefig = cut
    with pytest.raises(KeyboardInterrupt):
        fc.save_figure(fig, str(out), 100)
    assert out.read_bytes() == b"the earlier figure"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.png"]
    fig.savefig = real
    fc.save_figure(fig, str(out), 100)
    assert out.read_bytes().startswith(b"\x89PNG") and sorted(p.name for p in tmp_path.iterdir()) == ["f.png"]


# ---- stitch ---------------------------------------------------------------------------------

def st_row(task, condition, metric, value, n):
    return {"task": task, "condition": condition, "metric": metric, "value": value, "lo": value, "hi": value,
            "n": n if value is not None else 0, "per_seed": [value], "sd_seeds": None, "seeds": [1]}


def stitch_folder(root, name, rows, **run):
    d = root / name
    d.mkdir()
    write_json(d / "summary.json", {"kind": "stitch", "rows": rows, "bootstrap": {}})
    write_json(d / "run.json", {"kind": "stitch", "status": "complete", "host": "/m/granite-h-tiny",
                                "donor": "/m/qwen35-tiny",
                                "study": {"conditions": ["intact", "removed", "stitched"], "host_blocks": ["0-1"],
                                          "donor_blocks": ["0-2"], "seeds": [1], "ppl_seqs": 2, "ppl_len": 24,
                                          "shard": "3/4"}, **run})
    return d


def test_stitch(st, tmp_path):
    """A shard with 0 items wrote an empty figure with exit 0; an incomplete merge and unequal n
    were not flagged; a condition without rows was left out of the bars."""
    e = stitch_folder(tmp_path, "empty", [], records=0)
    r = script("plot_stitch", e)
    assert r.returncode == 1 and "has no items" in r.stderr and "shard 3/4" in r.stderr, r.stderr
    assert not (e / "stitch.png").exists()
    rows = []
    for c, n in (("intact", 5), ("removed", 4)):  # "stitched" has no rows
        rows += [st_row("lookup:chat8", c, m, v, n) for m, v in (("acc", 0.8), ("cacc", 0.9), ("margin", 2.0))]
        rows.append(st_row("ppl", c, "ppl", 30.0, 2))
    d = stitch_folder(tmp_path, "inc", rows, **INCOMPLETE)
    fig = st.draw(str(d), str(tmp_path / "s.png"))
    assert suptitle(fig).startswith("INCOMPLETE: shard 1/2 missing")
    assert "unequal n" in suptitle(fig)
    assert fig.axes[0].get_title() == "lookup:chat8: accuracy (95% CI), n = 4-5"
    assert fig.axes[2].get_title().endswith("tokens), n = 2")
    assert len(na_texts(fig)) == 4  # "stitched": acc, cacc, margin, ppl
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["intact", "removed", "stitched"]
    r = script("plot_stitch", d, "--out", tmp_path / "s2.png")
    assert r.returncode == 0 and "INCOMPLETE: shard 1/2 missing" in r.stderr
    assert r.stdout.strip() == str(tmp_path / "s2.png")


# ---- circuit --------------------------------------------------------------------------------

def ci_cond(condition, block, gap, n=33):
    v = lambda x: {"value": x, "lo": None if x is None else x - 1, "hi": None if x is None else x + 1,
                   "per_seed": [x], "sd_seeds": None}
    return {"condition": condition, "block": block, "n": n, "seeds": [1], "gap": v(gap), "acc": v(0.5),
            "cacc": v(0.5)}


def circuit_folder(root, name, gaps, **run):
    d = root / name
    d.mkdir()
    conds = [ci_cond(c, b, g, n) for c, b, g, n in gaps]
    write_json(d / "summary.json", {"conditions": conds})
    write_json(d / "circuit.json", {
        "baseline": {"gap": 10.0, "acc": 1.0, "n": 33}, "items": 33, "seeds": [1],
        "reader": {"layer": 3, "head": 1}, "encode": {"group": 0, "layers": [0, 1, 2]},
        "address": {"group": 0, "layers": [0, 1, 2]},
        "reader_candidates": [{"layer": 3, "head": h, "target_mass": 0.5} for h in (1, 0)]})
    write_json(d / "run.json", {"kind": "circuit", "status": "complete", "model": "/m/qwen35-tiny/", "records": 66,
                                "study": {"variant": "chat8", "critical": 0.6, "shard": "0/1"}, **run})
    return d


def test_circuit(ci, tmp_path):
    gaps = [("baseline", "B1", 10.0, 33), ("group:G0", "B2", 0.0, 33), ("layer:L0", "B3", None, 33),
            ("head:L3H1", "B4", 2.0, 33)]
    d = circuit_folder(tmp_path, "ok", gaps)
    fig = ci.draw(str(d), str(tmp_path / "c.png"))
    assert suptitle(fig) == "circuit: qwen35-tiny, chat8, n = 33 pairs; Encode G0 [0, 1, 2], Address G0 [0, 1, 2]"
    assert len(na_texts(fig)) == 1  # the NaN gap of layer:L0 (a null value was a TypeError)
    gaps[1] = ("group:G0", "B2", 0.0, 30)
    inc = circuit_folder(tmp_path, "inc", gaps, **INCOMPLETE)
    fig = ci.draw(str(inc), str(tmp_path / "c2.png"))
    assert suptitle(fig).startswith("INCOMPLETE: shard 1/2 missing")
    assert "n = 30-33 pairs" in suptitle(fig)
    r = script("plot_circuit", inc, "--out", tmp_path / "c3.png")
    assert r.returncode == 0 and "INCOMPLETE" in r.stderr and r.stdout.strip() == str(tmp_path / "c3.png")


# ---- folders of the real tool ---------------------------------------------------------------

def test_tool_folders(cli, tmp_path):
    """A finished circuit shard with no items was "not a finished circuit result folder"; a
    query map without a reader head crashed on attA."""
    c = tmp_path / "c"
    run_cli(cli, "experiment", "circuit", "--model", MODEL, "--per-config", 1, "--seed", 1, "--shard", "5/8",
            "--no-progress", "--out", c)
    assert json.loads((c / "run.json").read_text())["status"] == "complete"
    r = script("plot_circuit", c)
    assert r.returncode == 1 and "has no items" in r.stderr and "not a finished" not in r.stderr, r.stderr
    q = tmp_path / "q"
    run_cli(cli, "experiment", "query-map", "--model", MODEL, "--address", "G0", "--sources", "G0", "--variant",
            "chat4", "--fit", 30, "--curve", 15, "--per-config", 1, "--seed", 1, "--no-progress", "--out", q)
    r = script("plot_transplant", q, "--metric", "attA")
    assert r.returncode == 1 and "attA: no row has items (n = 0)" in r.stderr, r.stderr
    assert not (q / "query_map.png").exists()
    r = script("plot_transplant", q, "--metric", "dAB")
    assert r.returncode == 0 and (q / "query_map.png").exists()
