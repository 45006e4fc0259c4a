"""hylens.experiment: the channel study (split-prefill and state swap over task items) from
Python. The run is the C++ runner of `hylens experiment channels` (crash-safe items.jsonl,
resume, shards); the records and summaries are read back from the files it writes, so what a
notebook sees is exactly what is on disk."""

import csv
import json
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
    known = _core.experiment_tasks()
    for t in tasks:
        if t not in known:
            raise ValueError(f"experiment: unknown task '{t}' (known tasks: {', '.join(known)})")
    if not isinstance(tokenizer, _core.Tokenizer):
        tokenizer = _core.Tokenizer(str(tokenizer))
    stats = _core._channel_study(model, tokenizer, list(tasks), conditions, str(out), int(items),
                                 [int(s) for s in seeds], int(max_new), layers, shard, bool(resume), int(batch),
                                 bool(progress))
    return ExperimentResult(out, stats, frames)
