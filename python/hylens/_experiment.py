"""hylens.experiment: the channel study (split-prefill and state swap over task items) from
Python. The run is the C++ runner of `hylens experiment channels` (crash-safe items.jsonl,
resume, shards); the records and summaries are read back from the files it writes, so what a
notebook sees is exactly what is on disk."""

import csv
import json
import os
from pathlib import Path

DEFAULT_CONDITIONS = "FULL,KV_ONLY,REC_ONLY,NONE,KV_A+REC_B,KV_B+REC_A,KV_A+REC_A,KV_B+REC_B"


class ExperimentResult:
    """records (one per task, seed, item, condition), summary and diffs (per task and
    condition, recomputable from the records), run (run.json), stats (this call's counts)."""

    def __init__(self, out, stats, frames):
        self.out = Path(out)
        self.stats = stats
        self.records = _load_records(self.out / "items.jsonl", frames)
        self.summary = _load_csv(self.out / "summary.csv", frames)
        self.diffs = _load_csv(self.out / "diffs.csv", frames)
        run = self.out / "run.json"
        self.run = json.loads(run.read_text()) if run.exists() else {}

    def __repr__(self):
        return f"<hylens.ExperimentResult {self.stats.get('records')} records in {self.out}>"


def _pandas(frames):
    if frames is False:
        return None
    try:
        import pandas
    except ImportError:
        if frames:
            raise
        return None
    return pandas


def _load_records(path, frames):
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []
    pd = _pandas(frames)
    return pd.DataFrame(rows) if pd else rows


def _load_csv(path, frames):
    if not path.exists():
        rows = []
    else:
        with path.open(newline="") as f:
            rows = list(csv.DictReader(f))
    pd = _pandas(frames)
    if not pd:
        return rows
    df = pd.DataFrame(rows)
    for col in df.columns:  # numeric columns back to numbers (empty cells: NaN)
        conv = pd.to_numeric(df[col], errors="coerce")
        if conv.notna().sum() == (df[col] != "").sum():
            df[col] = conv
    return df


def _whole(x):
    """x as an int when it is a whole number (an int, a NumPy integer, or a float such as 2.0),
    else None (2.7, "12", a list, a bool)."""
    if isinstance(x, bool):
        return None
    if hasattr(x, "__index__"):
        try:
            return x.__index__()
        except TypeError:
            return None
    if isinstance(x, float) and x.is_integer():
        return int(x)
    return None


def _whole_or_raise(x, what):
    v = _whole(x)
    if v is None:
        raise TypeError(f"experiment: {what} must be a whole number, got {x!r}")
    return v


def experiment(model, tokenizer, tasks, out, conditions=DEFAULT_CONDITIONS, items=600, seeds=(1, 2, 3),
               max_new=0, layers="", shard="", resume=False, batch=16, progress=False, frames=None):
    """Runs the channel study of `tasks` on `model` into the folder `out` and returns an
    ExperimentResult. tokenizer: a hylens.Tokenizer or a tokenizer.json path. conditions: a
    comma list as for `hylens experiment channels` (e.g. "FULL,KV_ONLY@0-3"); layers: a layer
    sweep spec; shard: "I/N". frames: None = pandas DataFrames when pandas is importable,
    True = require pandas, False = plain lists of dicts."""
    from . import _core

    if isinstance(tasks, str):
        tasks = [tasks]
    tasks = list(tasks)
    known = _core.experiment_tasks()
    for t in tasks:
        if t not in known:
            raise ValueError(f"experiment: unknown task '{t}' (known tasks: {', '.join(known)})")
    if len(set(tasks)) != len(tasks):
        raise ValueError(f"experiment: a task is listed twice in {tasks} (its records would count twice)")
    if not isinstance(out, (str, os.PathLike)):
        raise TypeError(f"experiment: out must be a folder path, got {type(out).__name__}")
    if isinstance(seeds, (str, bytes)) or _whole(seeds) is not None:
        raise TypeError(f"experiment: seeds must be a list of whole numbers, got {seeds!r}")
    seeds = [_whole_or_raise(s, "a seed") for s in seeds]
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"experiment: a seed is listed twice in {seeds} (its records would count twice)")
    if tokenizer is None:
        raise TypeError("experiment: tokenizer must be a hylens.Tokenizer or a tokenizer.json path, got None")
    if not isinstance(tokenizer, _core.Tokenizer):
        tokenizer = _core.Tokenizer(str(tokenizer))
    stats = _core._channel_study(model, tokenizer, tasks, conditions, os.fspath(out), _whole_or_raise(items, "items"),
                                 seeds, _whole_or_raise(max_new, "max_new"), layers, shard, bool(resume),
                                 _whole_or_raise(batch, "batch"), bool(progress))
    return ExperimentResult(out, stats, frames)
