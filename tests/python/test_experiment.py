"""hylens.experiment: the channel study from Python on a shipped golden model with a
byte-level tokenizer small enough for its 320-token vocabulary (256 byte tokens and the chat
specials, as in tests/experiments/fixtures.hpp): records per (task, seed, item, condition), the
summary means recomputed from the records, the same result as pandas DataFrames and as plain
dicts, resume writing nothing twice."""

import json
from pathlib import Path

import pytest

import hylens
from conftest import GOLDEN, run_cli


def test_channel_study_records_and_summaries(byte_tokenizer, tmp_path):
    tokenizer = byte_tokenizer
    model = hylens.load(str(GOLDEN / "models" / "qwen3_5_dense"))
    task = "drm"  # no B source: every item runs (swap tasks skip items whose A and B differ in length)
    assert task in hylens.experiment_tasks()
    conds = "FULL,KV_ONLY,REC_ONLY,NONE"
    r = hylens.experiment(model, tokenizer, [task], tmp_path / "run", conditions=conds, items=2, seeds=[1],
                          max_new=2, frames=False)
    n = len(r.records)
    assert r.stats["records"] == n == r.stats["written"] and n > 0
    assert {rec["condition"] for rec in r.records} <= set(conds.split(","))
    # every summary mean of the score is the mean of the records it summarises
    checked = 0
    for row in r.summary:
        if row["metric"] != "score" or row["group"] != "all":
            continue
        recs = [x for x in r.records if x["task"] == row["task"] and x["condition"] == row["condition"]]
        assert int(row["n"]) == len(recs)
        mean = sum(float(x["score"]) for x in recs) / len(recs)
        assert abs(float(row["mean"]) - mean) <= 5e-7 * max(1.0, abs(mean)), row  # summary.csv has 6 decimals
        checked += 1
    assert checked >= 1
    # a resumed run writes nothing twice and reads back the same records
    again = hylens.experiment(model, tokenizer, [task], tmp_path / "run", conditions=conds, items=2, seeds=[1],
                              max_new=2, resume=True, frames=False)
    assert again.stats["written"] == 0 and again.stats["resumed"] == n
    assert again.records == r.records and again.summary == r.summary
    with pytest.raises(ValueError, match="unknown task 'no_such_task'"):
        hylens.experiment(model, tokenizer, ["no_such_task"], tmp_path / "x", items=1, seeds=[1])
    with pytest.raises(ValueError):  # the C++ condition parser's hylens::Error, as a ValueError
        hylens.experiment(model, tokenizer, [task], tmp_path / "y", conditions="FULL,SIDEWAYS", items=1, seeds=[1])
    # arguments the call coerced or took twice: items=2.7 ran 2 items, seeds="12" seeds 1 and 2,
    # a repeated seed or task doubled its records in the summaries, out=None ran into ./None
    for bad in (dict(items=2.7), dict(seeds="12"), dict(seeds=[1.5]), dict(max_new=True)):
        with pytest.raises(TypeError, match="whole number"):
            hylens.experiment(model, tokenizer, [task], tmp_path / "z", **{"items": 1, "seeds": [1], **bad})
    with pytest.raises(ValueError, match="a seed is listed twice"):
        hylens.experiment(model, tokenizer, [task], tmp_path / "z", items=1, seeds=[1, 1])
    with pytest.raises(ValueError, match="a task is listed twice"):
        hylens.experiment(model, tokenizer, [task, task], tmp_path / "z", items=1, seeds=[1])
    with pytest.raises(TypeError, match="out must be a folder path"):
        hylens.experiment(model, tokenizer, [task], None, items=1, seeds=[1])
    # out checked as the tool checks --out, before anything runs (it was a filesystem error)
    (tmp_path / "a_file").write_text("")
    for out, problem in ((tmp_path / "a_file", "is a file, not a folder"),
                         (tmp_path / "a_file" / "run", "a_file is a file, not a folder")):
        with pytest.raises(ValueError, match=f"experiment: out: '.*'.*{problem}"):
            hylens.experiment(model, tokenizer, [task], out, items=1, seeds=[1])
        with pytest.raises(ValueError, match=problem):
            hylens.circuit_study(model, tokenizer, out, per_config=1)
    # the tool's ranges, and the model's type, named (they were a TypeError on the private call)
    for bad, message in ((dict(items=0), "items must be in \\[1,"), (dict(items=-1), "items must be in"),
                         (dict(max_new=4097), "max_new must be in \\[0, 4096\\]"), (dict(max_new=-1), "max_new must be in"),
                         (dict(batch=0), "batch must be in \\[1, 1024\\]"), (dict(batch=5000), "batch must be in")):
        with pytest.raises(ValueError, match=message):
            hylens.experiment(model, tokenizer, [task], tmp_path / "z", **{"items": 1, "seeds": [1], **bad})
    with pytest.raises(TypeError, match="experiment: model must be a hylens.Model"):
        hylens.experiment("x", tokenizer, [task], tmp_path / "z", items=1, seeds=[1])
    # the three single-model studies said pybind's signature error of their private function
    for study, args in ((hylens.circuit_study, ()), (hylens.transplant_study, ()), (hylens.encode_swap_study, ("c.json",))):
        with pytest.raises(TypeError, match=f"{study.__name__}: model must be a hylens.Model \\(hylens.load\\), got str"):
            study("x", tokenizer, tmp_path / "z", *args)
    assert not (tmp_path / "z").exists()
    # run.json names the library's version, as the tool's does
    assert r.run["hylens_version"] == hylens.__version__ and r.run["via"] == "python"
    # resuming with another model is refused (its records would mix with this model's)
    other = hylens.load(str(GOLDEN / "models" / "granite_h_dense"))
    with pytest.raises(ValueError, match="differ in model"):
        hylens.experiment(other, tokenizer, [task], tmp_path / "run", conditions=conds, items=2, seeds=[1],
                          max_new=2, resume=True, frames=False)
    # ... and with another tokenizer: run.json names the tokenizer's file and its fingerprint, so
    # a copy of the same bytes elsewhere resumes and a tokenizer of other contents is refused
    run_json = json.loads((tmp_path / "run" / "run.json").read_text())
    assert run_json["tokenizer"] == str(Path(tokenizer.path).resolve())
    assert len(run_json["tokenizer_fingerprint"]) == 16
    copy_path = tmp_path / "copy_tokenizer.json"
    copy_path.write_text(Path(tokenizer.path).read_text())
    again = hylens.experiment(model, hylens.Tokenizer(str(copy_path)), [task], tmp_path / "run", conditions=conds,
                              items=2, seeds=[1], max_new=2, resume=True, frames=False)
    assert again.stats["written"] == 0
    other = json.loads(Path(tokenizer.path).read_text())
    other["added_tokens"].append({"id": 265, "content": "<|other|>", "single_word": False, "lstrip": False,
                                  "rstrip": False, "normalized": False, "special": True})
    other_path = tmp_path / "other_tokenizer.json"
    other_path.write_text(json.dumps(other))
    with pytest.raises(ValueError, match="differ in tokenizer"):
        hylens.experiment(model, hylens.Tokenizer(str(other_path)), [task], tmp_path / "run", conditions=conds,
                          items=2, seeds=[1], max_new=2, resume=True, frames=False)
    # pandas view of the same files (scripts/install-deps.sh installs pandas; skipped without it)
    pd = pytest.importorskip("pandas")
    frames = hylens.experiment(model, tokenizer, [task], tmp_path / "run", conditions=conds, items=2, seeds=[1],
                               max_new=2, resume=True)
    assert frames.stats["written"] == 0 and frames.stats["resumed"] == n
    assert isinstance(frames.records, pd.DataFrame) and len(frames.records) == n
    assert isinstance(frames.summary, pd.DataFrame) and len(frames.summary) == len(r.summary)


def test_experiment_judge_as_the_tool(byte_tokenizer, cli, tmp_path):
    """judge= scores the persona task with a second model exactly as the tool's --judge: the same
    records and the same run.json "judge"; without it the rule rubric decides."""
    model = hylens.load(str(GOLDEN / "models" / "qwen3_5_dense"))
    judge_dir = GOLDEN / "models" / "granite_h_dense"
    judge = hylens.load(str(judge_dir))
    study = dict(conditions="FULL,NONE", items=3, seeds=[1], max_new=4, frames=False)
    r = hylens.experiment(model, byte_tokenizer, ["persona"], tmp_path / "py", judge=judge,
                          judge_tokenizer=byte_tokenizer.path, **study)
    assert len(r.records) == 6
    assert {rec["scored_by"] for rec in r.records} == {"judge"}
    assert all("judge" in rec["score_fields"] for rec in r.records)
    named = {k: v for k, v in r.run["judge"].items() if k.endswith("_contents")}
    assert r.run["judge"] == {"model": str(judge_dir.resolve()), "model_type": judge.model_type,
                              "tokenizer": str(Path(byte_tokenizer.path).resolve()), **named}
    assert set(named) == {"model_contents", "tokenizer_contents"}
    # the definition names the judge by content, not by path
    assert r.run["study"]["judge"] == {"model_type": judge.model_type, **named}
    run_cli(cli, "experiment", "channels", "--model", GOLDEN / "models" / "qwen3_5_dense", "--tokenizer",
            byte_tokenizer.path, "--task", "persona", "--conditions", "FULL,NONE", "--items", 3, "--seeds", 1,
            "--max-new", 4, "--judge", judge_dir, "--judge-tokenizer", byte_tokenizer.path, "--no-progress",
            "--out", tmp_path / "tool")
    assert (tmp_path / "py" / "items.jsonl").read_bytes() == (tmp_path / "tool" / "items.jsonl").read_bytes()
    assert json.loads((tmp_path / "tool" / "run.json").read_text())["judge"] == r.run["judge"]
    ruled = hylens.experiment(model, byte_tokenizer, ["persona"], tmp_path / "ruled", **study)
    assert ruled.run["judge"] == "rubric" and {rec["scored_by"] for rec in ruled.records} == {"rubric"}
    assert [x["generated"] for x in ruled.records] == [x["generated"] for x in r.records]
    # resuming a judged run without its judge is another study
    with pytest.raises(ValueError, match="describes another study"):
        hylens.experiment(model, byte_tokenizer, ["persona"], tmp_path / "py", resume=True, **study)
    with pytest.raises(ValueError, match="judge_tokenizer is given without a judge"):
        hylens.experiment(model, byte_tokenizer, ["persona"], tmp_path / "x", judge_tokenizer=byte_tokenizer.path,
                          **study)
    with pytest.raises(TypeError, match="judge must be a hylens.Model"):
        hylens.experiment(model, byte_tokenizer, ["persona"], tmp_path / "x", judge=str(judge_dir), **study)
    with pytest.raises(ValueError, match="has no tokenizer.json"):  # the golden folders hold none
        hylens.experiment(model, byte_tokenizer, ["persona"], tmp_path / "x", judge=judge, **study)
    assert not (tmp_path / "x").exists()


def test_ctrl_c_stops_a_study_at_the_next_forward_and_resume_finishes_it(byte_tokenizer, tmp_path):
    """A SIGINT while a study runs without the GIL stops it at the next forward with
    KeyboardInterrupt (it ran to the end, and the late KeyboardInterrupt threw the result away);
    the flushed records stay, and resume=True finishes the study with the records of a run never
    stopped."""
    import _thread
    import threading

    model = hylens.load(str(GOLDEN / "models" / "qwen3_5_dense"))
    study = dict(conditions="FULL,KV_ONLY,REC_ONLY,NONE", items=60, seeds=[1], max_new=4, frames=False)
    items = tmp_path / "stopped" / "items.jsonl"

    def interrupt_after_the_first_records():
        while not (items.exists() and items.stat().st_size > 0):
            threading.Event().wait(0.005)
        _thread.interrupt_main()

    watcher = threading.Thread(target=interrupt_after_the_first_records, daemon=True)
    watcher.start()
    with pytest.raises(KeyboardInterrupt):
        hylens.experiment(model, byte_tokenizer, ["drm"], tmp_path / "stopped", **study)
    watcher.join()
    run = json.loads((tmp_path / "stopped" / "run.json").read_text())
    kept = len(items.read_text().splitlines())
    assert run["status"] == "running" and 0 < kept < 4 * 60  # stopped part-way, the flushed records kept
    resumed = hylens.experiment(model, byte_tokenizer, ["drm"], tmp_path / "stopped", resume=True, **study)
    assert resumed.stats["resumed"] == kept and resumed.run["status"] == "complete"
    whole = hylens.experiment(model, byte_tokenizer, ["drm"], tmp_path / "whole", **study)
    assert items.read_bytes() == (tmp_path / "whole" / "items.jsonl").read_bytes()
    assert len(whole.records) == 4 * 60


def test_summary_rows_hold_numbers_as_the_frames_do(tmp_path):
    """frames=False gave every cell as a string ('12', '1.000000', '' for a NaN mean, 'inf'), so
    float(row['mean']) failed on a mean over no items; the columns of numbers are numbers, as in
    the frames."""
    (tmp_path / "summary.csv").write_text(
        "task,condition,layers,n,mean,ci_lo,rel_full,sd\n"
        "drm,FULL,all,12,1.000000,0.5,1,\n"
        "drm,NONE,3,0,,,inf,\n")
    (tmp_path / "items.jsonl").write_text("")
    (tmp_path / "run.json").write_text("{}")
    rows = hylens.ExperimentResult(tmp_path, {}, False).summary
    assert rows[0]["task"] == "drm" and rows[0]["layers"] == "all" and rows[1]["layers"] == "3"  # a column of text
    assert rows[0]["n"] == 12 and isinstance(rows[0]["n"], int) and rows[0]["mean"] == 1.0
    assert rows[1]["mean"] != rows[1]["mean"] and rows[1]["rel_full"] == float("inf")  # nan, inf
    assert all(r["sd"] != r["sd"] for r in rows)  # a column of empty cells: nan, as in the frames
    pd = pytest.importorskip("pandas")
    df = hylens.ExperimentResult(tmp_path, {}, True).summary
    assert isinstance(df, pd.DataFrame)
    for col in ("n", "mean", "ci_lo", "rel_full", "sd"):
        assert [x if x == x else "nan" for x in df[col].tolist()] == [x if x == x else "nan" for x in (r[col] for r in rows)]
