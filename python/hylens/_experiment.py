"""hylens.experiment, hylens.circuit_study, hylens.transplant_study, hylens.encode_swap_study,
hylens.query_map_study, hylens.stitch_study and hylens.merge: the channel study (split-prefill and state swap
over task items), the circuit study (the Encode / Address / reader battery), the transplant study
(exp22 / exp32), the Encode sufficiency swaps (exp29), the query-vector transfer (exp26) and the
block stitching (exp27 / exp34) from Python, and the merge of any study's shard folders. Each run
is the C++ runner of the
matching `hylens experiment` command (crash-safe items.jsonl, resume, shards); the records and
summaries are read back from the files it writes, so what a notebook sees is exactly what is on
disk."""

import csv
import json
import math
import numbers
import os
import warnings
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
    rows = _numeric_columns(rows)
    pd = _pandas(frames)
    return pd.DataFrame(rows) if pd else rows


def _number(cell):
    """A summary.csv cell as a number: int for an integer, float otherwise ('inf', '-inf'; an
    empty cell, a NaN mean, is nan); None when it is not a number."""
    if cell == "":
        return math.nan
    try:
        return int(cell)
    except ValueError:
        pass
    try:
        return float(cell)
    except ValueError:
        return None


def _numeric_columns(rows):
    """The rows (dicts of strings, as csv reads them) with every column whose cells are all
    numbers or empty as numbers (the frames are made from them): '' is nan, 'inf' inf. The rows
    were strings, and float('') failed on a NaN mean."""
    if not rows:
        return rows
    numeric = []
    for col in rows[0]:
        cells = [_number(r[col]) for r in rows]
        if all(c is not None for c in cells):
            numeric.append((col, cells))
    for col, cells in numeric:
        for r, c in zip(rows, cells):
            r[col] = c
    return rows


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
    if isinstance(seeds, (set, frozenset)):
        raise TypeError(f"{who}: seeds must be a list or tuple (their order is the study's), got a set")
    seeds = [_count(s, "a seed", who, 0, 2**64 - 1) for s in seeds]
    if not seeds:
        raise ValueError(f"{who}: seeds is empty (need at least one seed)")
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"{who}: a seed is listed twice in {seeds} (its records would count twice)")
    return seeds


def _text(x, what, who):
    """x when it is a string (a variant, shard 'I/N', unit or layer sweep), else a TypeError
    naming the argument."""
    if not isinstance(x, str):
        raise TypeError(f"{who}: {what} must be a string, got {x!r}")
    return x


def _folder_path(path, who, what):
    """A folder path as a str (str or os.PathLike, not empty)."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"{who}: {what} must be a folder path, got {type(path).__name__}")
    if not os.fspath(path):
        raise ValueError(f"{who}: {what} is an empty path")
    return os.fspath(path)


def _out_path(out, who, what="out"):
    """out as a str, checked as the tool checks --out before anything runs: a file, a file on
    the way, a link to nothing or a folder above it this user cannot write is a ValueError."""
    from . import _core

    out = _folder_path(out, who, what)
    problem = _core._result_folder_problem(out)
    if problem:
        raise ValueError(f"{who}: {what}: {problem}")
    return out


def _corpus_path(corpus, who):
    """The corpus file's path, or "" for None (the default corpus)."""
    if corpus is None:
        return ""
    if not isinstance(corpus, (str, os.PathLike)):
        raise TypeError(f"{who}: corpus must be a file path or None, got {type(corpus).__name__}")
    if not os.fspath(corpus):
        raise ValueError(f"{who}: corpus is an empty path (None takes the default corpus)")
    return os.fspath(corpus)


def _tokenizer_of(tokenizer, who):
    from . import _core

    if tokenizer is None:
        raise TypeError(f"{who}: tokenizer must be a hylens.Tokenizer or a tokenizer.json path, got None")
    if isinstance(tokenizer, _core.Tokenizer):
        return tokenizer
    if not isinstance(tokenizer, (str, os.PathLike)):  # 5 was read as the file '5'
        raise TypeError(f"{who}: tokenizer must be a hylens.Tokenizer or a tokenizer.json path, got {type(tokenizer).__name__}")
    if not os.fspath(tokenizer):
        raise ValueError(f"{who}: the tokenizer path is empty")
    return _core.Tokenizer(os.fspath(tokenizer))


def experiment(model, tokenizer, tasks, out, conditions=DEFAULT_CONDITIONS, items=600, seeds=(1, 2, 3),
               max_new=0, layers="", shard="", resume=False, batch=16, progress=False, frames=None, judge=None,
               judge_tokenizer=None):
    """Runs the channel study of `tasks` on `model` into the folder `out` and returns an
    ExperimentResult. tokenizer: a hylens.Tokenizer or a tokenizer.json path. conditions: a
    comma list as for `hylens experiment channels` (e.g. "FULL,KV_ONLY@0-3") or a list of
    condition names; layers: a layer
    sweep spec; shard: "I/N". frames: None = pandas DataFrames when pandas is importable,
    True = require pandas, False = plain lists of dicts. judge: None (the persona task's rule
    rubric) or a hylens.Model that answers the rubric's yes/no question, as the tool's --judge;
    judge_tokenizer: its hylens.Tokenizer or tokenizer.json path (None: the judge folder's)."""
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
    model = _model_of(model, "model", "experiment")
    out = _out_path(out, "experiment")
    seeds = _seed_list(seeds, "experiment")
    tokenizer = _tokenizer_of(tokenizer, "experiment")
    conditions = ",".join(_names(conditions, "conditions", "experiment", required=True))
    # the tool's ranges: --items >= 1, --max-new 1-4096 (0 here: each task's own), --batch 1-1024
    items = _count(items, "items", "experiment", 1, 2**63 - 1)
    max_new = _count(max_new, "max_new", "experiment", 0, 4096)
    batch = _count(batch, "batch", "experiment", 1, 1024)
    if judge is not None:
        judge = _model_of(judge, "judge", "experiment")
        judge_tokenizer = _folder_tokenizer(judge, judge_tokenizer, "judge_tokenizer", "experiment")
    elif judge_tokenizer is not None:
        raise ValueError("experiment: judge_tokenizer is given without a judge")
    stats = _core._channel_study(model, tokenizer, tasks, conditions, out, items, seeds, max_new,
                                 _text(layers, "layers", "experiment"), _text(shard, "shard", "experiment"),
                                 bool(resume), batch, bool(progress), judge, judge_tokenizer)
    result = ExperimentResult(out, stats, frames)
    # The --layers sets left out for a condition (the tool prints them on stderr, which a
    # notebook does not show).
    for note in result.run.get("layers_left_out", []):
        warnings.warn(f"experiment: {note}", stacklevel=2)
    return result


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
    model = _model_of(model, "model", who)  # the binding's TypeError named its private function
    out = _out_path(out, who)
    seeds = _seed_list(seeds, who)
    tokenizer = _tokenizer_of(tokenizer, who)
    if group_size is not None:
        group_size = _count(group_size, "group_size", who, 0, 1000)
    if isinstance(critical, bool) or not isinstance(critical, numbers.Real):
        raise TypeError(f"{who}: critical must be a number in [0, 1], got {critical!r}")
    long_filler = corpus is not None or filler_tokens is not None
    corpus = _corpus_path(corpus, who)
    filler_tokens = 512 if filler_tokens is None else _count(filler_tokens, "filler_tokens", who, 1, 100000)
    stats = _core._circuit_study(model, tokenizer, out, _text(variant, "variant", who),
                                 _count(per_config, "per_config", who, 1, 100000), seeds,
                                 group_size, _count(top, "top", who, 1, 100000), _text(unit, "unit", who),
                                 float(critical), corpus, filler_tokens, long_filler, _text(shard, "shard", who),
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
    model = _model_of(model, "model", who)  # the binding's TypeError named its private function
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
        model, tokenizer, out, _text(variant, "variant", who), _count(per_config, "per_config", who, 1, 100000), seeds,
        "" if circuit is None else circuit, "" if reader is None else _head(reader, "reader", who),
        ",".join(_names(blocks, "blocks", who)), group_size, _names(positions, "positions", who, required=True),
        _names(kinds, "kinds", who, required=True), ",".join(_names(upstream, "upstream", who)),
        _heads(watch, "watch", who),
        _text(shard, "shard", who), bool(resume), bool(progress))
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
    model = _model_of(model, "model", who)  # the binding's TypeError named its private function
    out = _out_path(out, who)
    tokenizer = _tokenizer_of(tokenizer, who)
    circuit = _circuit_path(circuit, who)
    if other_layers is not None:
        if isinstance(other_layers, (str, bytes)) or not isinstance(other_layers, (list, tuple)):
            raise TypeError(f"{who}: other_layers must be a list of layer numbers, got {other_layers!r}")
        other_layers = [_count(layer, "a layer of other_layers", who, 0, 100000) for layer in other_layers]
        if not other_layers:
            raise ValueError(f"{who}: other_layers is empty (None: the circuit's Address block)")
    stats = _core._encode_swap_study(model, tokenizer, out, circuit, other_layers, _text(variant, "variant", who),
                                     _count(per_config, "per_config", who, 1, 100000),
                                     _count(seed, "seed", who, 0, 2**64 - 1), _text(shard, "shard", who), bool(resume),
                                     bool(progress))
    return EncodeSwapResult(out, stats, frames)


class _FittedResult(_StudyResult):
    """A study that fits maps: fits is run.json's record of every fitted map."""

    def __init__(self, out, stats, frames):
        super().__init__(out, stats, frames)
        self.fits = self.run.get("fits", {})


class QueryMapResult(_FittedResult, TransplantResult):
    """As TransplantResult (the same records and summary columns), plus fits: run.json's held-out
    R², λ and dimensions of every fitted map."""


def _model_of(model, what, who):
    from . import _core

    if not isinstance(model, _core.Model):
        raise TypeError(f"{who}: {what} must be a hylens.Model (hylens.load), got {type(model).__name__}")
    return model


def _folder_tokenizer(model, tokenizer, what, who):
    """tokenizer, or the tokenizer.json of the model's folder when None (the tool's default)."""
    if tokenizer is not None:
        return _tokenizer_of(tokenizer, who)
    path = Path(model.path) / "tokenizer.json"
    if not path.is_file():
        raise ValueError(f"{who}: {what} is None and {model.path} has no tokenizer.json; pass one")
    return _tokenizer_of(path, who)


def query_map_study(model, tokenizer, out, donor=None, donor_tokenizer=None, circuit=None, address="", reader=None,
                    sources="", embedding=True, group_size=None, fit=2000, curve=(), variant="chat8", per_config=20,
                    seeds=(1,), shard="", resume=False, progress=False, frames=None):
    """Runs the query-vector transfer (exp26: ridge maps from a donor's final-position features to
    the receiver's Address-layer mixer outputs, with the self, shuffled, mean and embedding
    controls and learning curves) with `model` as the receiver into the folder `out`, as `hylens
    experiment query-map` does, and returns a QueryMapResult. donor: another hylens.Model (None:
    the receiver itself, an in-family map); donor_tokenizer: its tokenizer (None: its folder's
    tokenizer.json). circuit: the receiver's circuit file (a path or a CircuitResult), whose
    Address layers and reader head are taken unless address / reader are given; address: one
    block ('G1', '3-5', '3+4'); sources: donor blocks as a list or comma-separated ('' = every
    donor layer group); embedding: also the donor's key embedding as a source; fit: fit prompts;
    curve: learning-curve fit sizes, each in [10, fit). frames: as for hylens.experiment."""
    from . import _core

    who = "query_map_study"
    model = _model_of(model, "model", who)
    out = _out_path(out, who)
    seeds = _seed_list(seeds, who)
    tokenizer = _tokenizer_of(tokenizer, who)
    if donor is None:
        if donor_tokenizer is not None:
            raise ValueError(f"{who}: donor_tokenizer without a donor (the receiver reads both prompts)")
    else:
        donor = _model_of(donor, "donor", who)
        donor_tokenizer = _folder_tokenizer(donor, donor_tokenizer, "donor_tokenizer", who)
    circuit = None if circuit is None else _circuit_path(circuit, who)
    if reader == "":
        raise ValueError(f"{who}: reader is empty (None: the circuit's, or no reader head)")
    if group_size is not None:
        group_size = _count(group_size, "group_size", who, 0, 1000)
    if not isinstance(address, str):
        raise TypeError(f"{who}: address must be one block as a string ('G1', '3-5', '3+4'), got {address!r}")
    if not isinstance(embedding, bool):
        raise TypeError(f"{who}: embedding must be True or False, got {embedding!r}")
    fit = _count(fit, "fit", who, 10, 1000000)
    if isinstance(curve, (str, bytes)) or not isinstance(curve, (list, tuple)):
        raise TypeError(f"{who}: curve must be a list of fit sizes, got {curve!r}")
    curve = [_count(n, "a size of curve", who, 10, fit - 1) for n in curve]
    if len(set(curve)) != len(curve):
        raise ValueError(f"{who}: a size is listed twice in curve {curve}")
    stats = _core._query_map_study(
        model, tokenizer, out, donor, donor_tokenizer, "" if circuit is None else circuit, address,
        "" if reader is None else _head(reader, "reader", who), ",".join(_names(sources, "sources", who)), embedding,
        group_size, fit, curve, _text(variant, "variant", who), _count(per_config, "per_config", who, 1, 100000), seeds,
        _text(shard, "shard", who), bool(resume), bool(progress))
    return QueryMapResult(out, stats, frames)


class StitchResult(_FittedResult):
    """records (one per task, seed, item, condition: items.jsonl; lookup items and perplexity
    sequences), summary (summary.csv: per task, condition and metric, pooled over the seeds with
    bootstrap CIs and the sd over seeds), fits (run.json's R² and λ of every fitted map), adapters
    (the path of adapters.safetensors), run (run.json), stats (this call's counts)."""

    def __init__(self, out, stats, frames):
        super().__init__(out, stats, frames)
        self.adapters = self.out / "adapters.safetensors"


def _ranges(x, what, who):
    """Layer ranges 'A-B' as the tool's comma-separated string, from that string, one (A, B) pair
    of whole numbers, or a list of 'A-B' strings or (A, B) pairs."""
    if isinstance(x, str):
        return x
    if isinstance(x, tuple) and len(x) == 2 and all(_whole(v) is not None for v in x):
        x = [x]
    if isinstance(x, (list, tuple)):
        parts = []
        for r in x:
            if isinstance(r, str):
                parts.append(r)
            elif isinstance(r, (list, tuple)) and len(r) == 2:
                parts.append(f"{_count(r[0], what + ' start', who, 0, 100000)}-{_count(r[1], what + ' end', who, 0, 100000)}")
            else:
                raise TypeError(f"{who}: a range of {what} must be 'A-B' or an (A, B) pair, got {r!r}")
        return ",".join(parts)
    raise TypeError(f"{who}: {what} must be ranges 'A-B[,C-D]' or a list of them, got {x!r}")


def stitch_study(host, donor, out, host_block, donor_block, host_tokenizer=None, donor_tokenizer=None, corpus=None,
                 variant="chat8", fit_prompts=500, fit_tokens=30000, test_items=200, ppl_seqs=8, ppl_len=512,
                 conditions=None, other_blocks=None, reader=None, seeds=(1,), shard="", resume=False, progress=False,
                 frames=None):
    """Runs the block-stitching study (exp27 / exp34: the host's block of layers replaced by the
    donor's through ridge adapters fitted on aligned text, every condition scored on dictionary
    lookups and held-out perplexity) into the folder `out`, as `hylens experiment stitch` does,
    and returns a StitchResult. host, donor: hylens.Model; host_block, donor_block: one layer range
    per slot ('2-3', '0-0,2-3', or a list of 'A-B' strings or (A, B) pairs); host_tokenizer,
    donor_tokenizer: None = each folder's tokenizer.json; corpus: English text to fit on and
    measure perplexity on (None: the Debian Policy Manual); conditions: a list or comma-separated
    string (None: every condition that applies); other_blocks: donor ranges of the donor:A-B
    conditions; reader: the host's reader head 'LAYER:HEAD' or (layer, head). frames: as for
    hylens.experiment."""
    from . import _core

    who = "stitch_study"
    host = _model_of(host, "host", who)
    donor = _model_of(donor, "donor", who)
    out = _out_path(out, who)
    seeds = _seed_list(seeds, who)
    host_tokenizer = _folder_tokenizer(host, host_tokenizer, "host_tokenizer", who)
    donor_tokenizer = _folder_tokenizer(donor, donor_tokenizer, "donor_tokenizer", who)
    host_block = _ranges(host_block, "host_block", who)
    donor_block = _ranges(donor_block, "donor_block", who)
    if not host_block or not donor_block:
        raise ValueError(f"{who}: host_block and donor_block name one range per slot, got {host_block!r} and {donor_block!r}")
    if other_blocks is not None:
        other_blocks = _ranges(other_blocks, "other_blocks", who)
        if not other_blocks:
            raise ValueError(f"{who}: other_blocks is empty (None: every donor layer outside a one-slot donor block; "
                             "name the conditions to leave the donor:A-B conditions out)")
    conditions = [] if conditions is None else _names(conditions, "conditions", who, required=True)
    corpus = _corpus_path(corpus, who)
    if reader == "":
        raise ValueError(f"{who}: reader is empty (None: no reader head)")
    stats = _core._stitch_study(
        host, host_tokenizer, donor, donor_tokenizer, out, host_block, donor_block,
        corpus, _text(variant, "variant", who), _count(fit_prompts, "fit_prompts", who, 0, 1000000),
        _count(fit_tokens, "fit_tokens", who, 0, 100000000), _count(test_items, "test_items", who, 1, 1000000),
        _count(ppl_seqs, "ppl_seqs", who, 0, 100000), _count(ppl_len, "ppl_len", who, 2, 1000000), conditions,
        "" if other_blocks is None else other_blocks, "" if reader is None else _head(reader, "reader", who), seeds,
        _text(shard, "shard", who), bool(resume), bool(progress))
    return StitchResult(out, stats, frames)


_RESULTS = {"channels": ExperimentResult, "circuit": CircuitResult, "encode-swap": EncodeSwapResult,
            "transplant": TransplantResult, "query-map": QueryMapResult, "stitch": StitchResult}


def merge(folders, out, frames=None):
    """Merges the shard folders of one study into the folder `out`, as `hylens experiment merge`
    does: the records of every folder (each at most once), the summaries recomputed from them, so
    the merge of all of a study's shards is the unsharded run's folder. The study is the first
    folder's (run.json "kind": the channel study, circuit, encode-swap, transplant, query-map or
    stitch); every folder must hold the same study run on the same inputs. Returns the study's
    result class over `out` (ExperimentResult, CircuitResult, ...); stats: kind, folders,
    records, incomplete (folders whose run had not finished), missing_shards (a merge of some
    shards is a partial result: run.json status "incomplete"). frames: as for hylens.experiment."""
    from . import _core

    who = "merge"
    if isinstance(folders, (str, bytes, os.PathLike, set, frozenset, dict)) or not hasattr(folders, "__iter__"):
        raise TypeError(f"{who}: folders must be a list of result folders, got {folders!r}")
    folders = [_folder_path(f, who, "a folder to merge") for f in folders]
    if not folders:
        raise ValueError(f"{who}: no result folder given")
    out = _out_path(out, who)
    stats = _core._merge(folders, out)
    return _RESULTS.get(stats["kind"], _StudyResult)(out, stats, frames)
