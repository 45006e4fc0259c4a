"""hylens.experiment, hylens.circuit_study, hylens.transplant_study and hylens.encode_swap_study:
the channel study (split-prefill and state swap over task items), the circuit study (the Encode /
Address / reader battery), the transplant study (exp22 / exp32) and the Encode sufficiency swaps
(exp29) from Python. Each run is the C++ runner of the
matching `hylens experiment` command (crash-safe items.jsonl, resume, shards); the records and
summaries are read back from the files it writes, so what a notebook sees is exactly what is on
disk."""

import csv
import json
import numbers
import os
from pathlib import Path

DEFAULT_CONDITIONS = "FULL,KV_ONLY,REC_ONLY,NONE,KV_A+REC_B,KV_B+REC_A,KV_A+REC_A,KV_B+REC_B"


class _StudyResult:
    """The files every study writes, read back: records (items.jsonl), summary (summary.csv), run
    (run.json), and stats (this call's counts)."""

    def __init__(self, out, stats, frames):
        self.out = Path(out)
        self.stats = stats
        self.records = _load_records(self.out / "items.jsonl", frames)
        self.summary = _load_csv(self.out / "summary.csv", frames)
        self.run = _load_json(self.out / "run.json")

    def __repr__(self):
        return f"<hylens.{type(self).__name__} {self.stats.get('records')} records in {self.out}>"


class ExperimentResult(_StudyResult):
    """records (one per task, seed, item, condition), summary and diffs (per task and
    condition, recomputable from the records), run (run.json), stats (this call's counts)."""

    def __init__(self, out, stats, frames):
        super().__init__(out, stats, frames)
        self.diffs = _load_csv(self.out / "diffs.csv", frames)


class CircuitResult(_StudyResult):
    """records (one per seed, item, condition: items.jsonl), summary (summary.csv: a row per
    score condition, pooled over the seeds, with bootstrap CIs and the sd over seeds), circuit
    (circuit.json: the roles and the scans behind them, each seed's roles and how many seeds
    agree with the pooled ones), run (run.json), stats (this call's counts). A shard without
    items has no summary: summary is empty and circuit {}."""

    def __init__(self, out, stats, frames):
        super().__init__(out, stats, frames)
        self.circuit = _load_json(self.out / "circuit.json")

    def __repr__(self):
        c = self.circuit
        if not c:
            return f"<hylens.CircuitResult no summary in {self.out}>"
        r = c["reader"]
        return (f"<hylens.CircuitResult {c['items']} pairs: encode {c['encode']['layers']}, address "
                f"{c['address']['layers']}, reader L{r['layer']}H{r['head']}, in {self.out}>")


def _load_json(path):
    return json.loads(path.read_text()) if path.exists() else {}


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


def _whole_or_raise(x, what, who="experiment"):
    v = _whole(x)
    if v is None:
        raise TypeError(f"{who}: {what} must be a whole number, got {x!r}")
    return v


def _count(x, what, who, lo, hi):
    """A whole number in [lo, hi] (the tool's range for the option)."""
    v = _whole_or_raise(x, what, who)
    if not lo <= v <= hi:
        raise ValueError(f"{who}: {what} must be in [{lo}, {hi}], got {v}")
    return v


def _seed_list(seeds, who):
    """seeds as a list of distinct ints; a bare number or string, a non-whole seed or a seed
    listed twice is an error naming `who`."""
    if isinstance(seeds, (str, bytes)) or _whole(seeds) is not None:
        raise TypeError(f"{who}: seeds must be a list of whole numbers, got {seeds!r}")
    seeds = [_count(s, "a seed", who, 0, 2**64 - 1) for s in seeds]
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"{who}: a seed is listed twice in {seeds} (its records would count twice)")
    return seeds


def _out_path(out, who):
    if not isinstance(out, (str, os.PathLike)):
        raise TypeError(f"{who}: out must be a folder path, got {type(out).__name__}")
    return os.fspath(out)


def _tokenizer_of(tokenizer, who):
    from . import _core

    if tokenizer is None:
        raise TypeError(f"{who}: tokenizer must be a hylens.Tokenizer or a tokenizer.json path, got None")
    return tokenizer if isinstance(tokenizer, _core.Tokenizer) else _core.Tokenizer(str(tokenizer))


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
    out = _out_path(out, "experiment")
    seeds = _seed_list(seeds, "experiment")
    tokenizer = _tokenizer_of(tokenizer, "experiment")
    stats = _core._channel_study(model, tokenizer, tasks, conditions, out, _whole_or_raise(items, "items"),
                                 seeds, _whole_or_raise(max_new, "max_new"), layers, shard, bool(resume),
                                 _whole_or_raise(batch, "batch"), bool(progress))
    return ExperimentResult(out, stats, frames)


def circuit_study(model, tokenizer, out, variant="chat8", per_config=20, seeds=(1,), group_size=None, top=8,
                  unit="mixer", critical=0.6, corpus=None, filler_tokens=None, shard="", resume=False, progress=False,
                  frames=None):
    """Runs the circuit study (battery B1-B7 on clean/corrupted dictionary pairs) on `model` into
    the folder `out`, as `hylens experiment circuit` does, and returns a CircuitResult.
    tokenizer: a hylens.Tokenizer or a tokenizer.json path. variant: chat4, chat8, chat16, list8,
    rev8, perm8 or long; seeds: several pool their pairs (each seed's roles beside the pooled
    ones); group_size: None = 3 for Qwen3.5, 0 (every linear layer since the previous softmax
    layer) otherwise; unit: "mixer" or "layer"; corpus, filler_tokens: the long variant's filler,
    the first filler_tokens tokens (None: 512) of the corpus's held-out chunks (corpus None: the
    Debian Policy Manual), refused with another variant. frames: as for hylens.experiment."""
    from . import _core

    who = "circuit_study"
    out = _out_path(out, who)
    seeds = _seed_list(seeds, who)
    tokenizer = _tokenizer_of(tokenizer, who)
    if group_size is not None:
        group_size = _count(group_size, "group_size", who, 0, 1000)
    if isinstance(critical, bool) or not isinstance(critical, numbers.Real):
        raise TypeError(f"{who}: critical must be a number in [0, 1], got {critical!r}")
    if corpus is not None and not isinstance(corpus, (str, os.PathLike)):
        raise TypeError(f"{who}: corpus must be a file path or None, got {type(corpus).__name__}")
    if corpus is not None and not os.fspath(corpus):
        raise ValueError(f"{who}: corpus is an empty path (None takes the default corpus)")
    long_filler = corpus is not None or filler_tokens is not None
    filler_tokens = 512 if filler_tokens is None else _count(filler_tokens, "filler_tokens", who, 1, 100000)
    stats = _core._circuit_study(model, tokenizer, out, variant, _count(per_config, "per_config", who, 1, 100000), seeds,
                                 group_size, _count(top, "top", who, 1, 100000), unit, float(critical),
                                 "" if corpus is None else os.fspath(corpus), filler_tokens, long_filler, shard,
                                 bool(resume), bool(progress))
    return CircuitResult(out, stats, frames)


class TransplantResult(_StudyResult):
    """records (one per seed, item, condition: items.jsonl), summary (summary.csv: per condition,
    ansA, ansB, dAB, attA, attB pooled over the seeds with bootstrap CIs and the sd over seeds),
    run (run.json), stats (this call's counts)."""


def _names(x, what, who, required=False):
    """A list of names from a list or tuple of strings or one comma-separated string (in that
    order: the study's conditions follow it); `required`: at least one."""
    if isinstance(x, str):
        names = x.split(",") if x else []
    elif isinstance(x, (list, tuple)) and all(isinstance(n, str) for n in x):
        names = list(x)
    else:
        raise TypeError(f"{who}: {what} must be a list of strings or a comma-separated string, got {x!r}")
    if required and not names:
        raise ValueError(f"{who}: {what} is empty")
    return names


def _head(h, what, who):
    """A head as "LAYER:HEAD" from that string or a (layer, head) pair of whole numbers."""
    if isinstance(h, str):
        return h
    if isinstance(h, (tuple, list)) and len(h) == 2:
        return f"{_whole_or_raise(h[0], what + ' layer', who)}:{_whole_or_raise(h[1], what + ' head', who)}"
    raise TypeError(f"{who}: {what} must be 'LAYER:HEAD' or a (layer, head) pair, got {h!r}")


def _heads(x, what, who):
    """Heads as "LAYER:HEAD" strings from a comma-separated string, one (layer, head) pair of
    whole numbers, or a list or tuple of heads (_head)."""
    if isinstance(x, str):
        return x.split(",") if x else []
    if isinstance(x, tuple) and len(x) == 2 and all(_whole(v) is not None for v in x):
        return [_head(x, what, who)]
    if not isinstance(x, (list, tuple)):
        raise TypeError(f"{who}: {what} must be a list of heads or a comma-separated string, got {x!r}")
    return [_head(h, "a head of " + what, who) for h in x]


def _circuit_path(circuit, who):
    """The circuit file's path from a path or a CircuitResult."""
    if isinstance(circuit, CircuitResult):
        if not circuit.circuit:
            raise ValueError(f"{who}: the circuit study in {circuit.out} has no circuit.json (a shard without items?)")
        circuit = circuit.out / "circuit.json"
    if not isinstance(circuit, (str, os.PathLike)):
        raise TypeError(f"{who}: circuit must be a circuit.json path or a CircuitResult, got {type(circuit).__name__}")
    if not os.fspath(circuit):
        raise ValueError(f"{who}: circuit is an empty path (None: none)")
    return os.fspath(circuit)


def transplant_study(model, tokenizer, out, circuit=None, reader=None, blocks="", group_size=None,
                     positions=("final", "question", "dictionary", "all"), kinds=("mixer", "layer", "state", "state+conv"),
                     upstream="", watch=(), variant="chat8", per_config=20, seeds=(1,), shard="", resume=False,
                     progress=False, frames=None):
    """Runs the transplant study (exp22 / exp32: a donor's block writes or state copied into a
    host run, read at the reader head) on `model` into the folder `out`, as `hylens experiment
    transplant` does, and returns a TransplantResult. circuit: the circuit file (a path or a
    CircuitResult of hylens.circuit_study) whose reader head is read, or reader: 'LAYER:HEAD' or
    (layer, head); blocks, upstream: block lists as the tool's ('G0,3-5,G1+G2', or a list of
    them; blocks '' = every layer group); positions, kinds: lists or comma-separated strings;
    watch: heads as for reader; group_size: None = 3 for Qwen3.5, else 0. frames: as for
    hylens.experiment."""
    from . import _core

    who = "transplant_study"
    out = _out_path(out, who)
    seeds = _seed_list(seeds, who)
    tokenizer = _tokenizer_of(tokenizer, who)
    if circuit is not None and reader is not None:
        raise ValueError(f"{who}: pass circuit or reader, not both")
    circuit = None if circuit is None else _circuit_path(circuit, who)
    if reader == "":
        raise ValueError(f"{who}: reader is empty (None: no reader head)")
    if group_size is not None:
        group_size = _count(group_size, "group_size", who, 0, 1000)
    stats = _core._transplant_study(
        model, tokenizer, out, variant, _count(per_config, "per_config", who, 1, 100000), seeds,
        "" if circuit is None else circuit, "" if reader is None else _head(reader, "reader", who),
        ",".join(_names(blocks, "blocks", who)), group_size, _names(positions, "positions", who, required=True),
        _names(kinds, "kinds", who, required=True), ",".join(_names(upstream, "upstream", who)),
        _heads(watch, "watch", who),
        shard, bool(resume), bool(progress))
    return TransplantResult(out, stats, frames)


class EncodeSwapResult(_StudyResult):
    """records (one per item and condition: items.jsonl), summary (summary.csv: per condition, the
    swap's scores with bootstrap CIs), run (run.json), stats (this call's counts)."""


def encode_swap_study(model, tokenizer, out, circuit, other_layers=None, variant="chat8", per_config=20, seed=1,
                      shard="", resume=False, progress=False, frames=None):
    """Runs the Encode sufficiency swaps (exp29: the Encode block's writes, the token embeddings,
    another block's writes or the mean write swapped in at the value / key tokens) on `model` into
    the folder `out`, as `hylens experiment encode-swap` does, and returns an EncodeSwapResult.
    circuit: the circuit file (a path or a CircuitResult of hylens.circuit_study) whose Encode
    block is swapped; other_layers: the control block's layers (None: the circuit's Address block
    when it is not the Encode block). frames: as for hylens.experiment."""
    from . import _core

    who = "encode_swap_study"
    out = _out_path(out, who)
    tokenizer = _tokenizer_of(tokenizer, who)
    circuit = _circuit_path(circuit, who)
    if other_layers is not None:
        if isinstance(other_layers, (str, bytes)) or not isinstance(other_layers, (list, tuple)):
            raise TypeError(f"{who}: other_layers must be a list of layer numbers, got {other_layers!r}")
        other_layers = [_count(layer, "a layer of other_layers", who, 0, 100000) for layer in other_layers]
        if not other_layers:
            raise ValueError(f"{who}: other_layers is empty (None: the circuit's Address block)")
    stats = _core._encode_swap_study(model, tokenizer, out, circuit, other_layers, variant,
                                     _count(per_config, "per_config", who, 1, 100000),
                                     _count(seed, "seed", who, 0, 2**64 - 1), shard, bool(resume), bool(progress))
    return EncodeSwapResult(out, stats, frames)
