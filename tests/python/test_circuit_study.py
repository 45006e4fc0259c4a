"""hylens.circuit_study: the circuit study from Python on the shipped organism models/qwen35-tiny
(its tokenizer keeps chat8 pairs): the files are those `hylens experiment circuit` writes with the
same options, byte for byte; the result objects read them back; several seeds give each seed's
roles; bad arguments are refused before anything runs."""

import json

import pytest

import hylens
from conftest import run_cli, same_files


@pytest.fixture
def organism(organisms):
    return organisms[0]  # a copy of models/qwen35-tiny (conftest)


def test_circuit_study_equals_the_cli(organism, tmp_path, cli):
    model = hylens.load(str(organism))
    r = hylens.circuit_study(model, organism / "tokenizer.json", tmp_path / "py", per_config=2, seeds=[5, 7], top=3,
                             frames=False)
    run_cli(cli, "experiment", "circuit", "--model", organism, "--per-config", 2, "--seeds", "5,7", "--top", 3,
            "--no-progress", "--out", tmp_path / "cli")
    same_files(tmp_path / "py", tmp_path / "cli", ("items.jsonl", "summary.csv", "summary.json", "circuit.json"))
    # the run.json definitions agree (the default group size, 3 for Qwen3.5, included)
    assert r.run["study"] == json.loads((tmp_path / "cli" / "run.json").read_text())["study"]
    assert r.run["study"]["group_size"] == 3 and r.run["via"] == "python"


def test_circuit_study_result(organism, tmp_path):
    model = hylens.load(str(organism))
    r = hylens.circuit_study(model, organism / "tokenizer.json", tmp_path / "py", per_config=2, seeds=[5, 7], top=3,
                             frames=False)
    # the result object: what the files hold
    assert r.stats["records"] == r.stats["written"] == len(r.records) and r.stats["resumed"] == 0
    assert r.stats["items"] == r.circuit["items"] == sum(p["kept"] for p in r.run["pairs"].values())
    assert r.circuit == json.loads((tmp_path / "py" / "circuit.json").read_text())
    assert {rec["seed"] for rec in r.records} == {5, 7}
    assert r.circuit["seeds"] == [5, 7] and [p["seed"] for p in r.circuit["per_seed"]] == [5, 7]
    assert len(r.summary) == len(json.loads((tmp_path / "py" / "summary.json").read_text())["conditions"])
    reader = r.circuit["reader"]
    assert f"reader L{reader['layer']}H{reader['head']}" in repr(r)
    # the baseline row of summary.csv is the mean of the baseline records' gaps
    base = [x for x in r.summary if x["condition"] == "baseline"][0]
    gaps = [rec["gap"] for rec in r.records if rec["condition"] == "baseline"]
    assert int(base["n"]) == len(gaps) and int(base["seeds"]) == 2
    assert abs(float(base["gap"]) - sum(gaps) / len(gaps)) <= 1e-8 * max(1.0, abs(float(base["gap"])))

    # resume writes nothing twice
    again = hylens.circuit_study(model, organism / "tokenizer.json", tmp_path / "py", per_config=2, seeds=[5, 7], top=3,
                                 resume=True, frames=False)
    assert again.stats["written"] == 0 and again.stats["resumed"] == len(r.records)
    assert again.records == r.records and again.circuit == r.circuit

    # a shard without items has records of no pair and no summary
    empty = hylens.circuit_study(model, organism / "tokenizer.json", tmp_path / "shard", per_config=1, seeds=[5],
                                 top=3, shard="99/100", frames=False)
    assert empty.records == [] and empty.circuit == {} and "no summary" in repr(empty)

    # pandas view of the same files (scripts/install-deps.sh installs pandas; skipped without it)
    pd = pytest.importorskip("pandas")
    frames = hylens.circuit_study(model, organism / "tokenizer.json", tmp_path / "py", per_config=2, seeds=[5, 7],
                                  top=3, resume=True)
    assert isinstance(frames.records, pd.DataFrame) and len(frames.records) == len(r.records)
    assert isinstance(frames.summary, pd.DataFrame) and frames.summary["gap_sd_seeds"].notna().all()


def test_circuit_study_refuses_bad_arguments(organism, tmp_path):
    model = hylens.load(str(organism))
    tok = organism / "tokenizer.json"
    for bad in (dict(per_config=2.5), dict(seeds="12"), dict(seeds=[1.5]), dict(top=True), dict(group_size=1.5),
                dict(filler_tokens=2.5)):
        with pytest.raises(TypeError, match="whole number"):
            hylens.circuit_study(model, tok, tmp_path / "x", **{"per_config": 1, **bad})
    with pytest.raises(ValueError, match="a seed is listed twice"):
        hylens.circuit_study(model, tok, tmp_path / "x", per_config=1, seeds=[1, 1])
    with pytest.raises(TypeError, match="out must be a folder path"):
        hylens.circuit_study(model, tok, None, per_config=1)
    with pytest.raises(TypeError, match="critical must be a number"):
        hylens.circuit_study(model, tok, tmp_path / "x", per_config=1, critical="0.5")
    with pytest.raises(TypeError, match="corpus must be a file path"):
        hylens.circuit_study(model, tok, tmp_path / "x", variant="long", per_config=1, corpus=3)
    # the library's checks, as ValueErrors naming the option
    for kwargs, message in ((dict(unit="group"), "unit must be 'mixer' or 'layer'"),
                            (dict(critical=1.5), r"critical must be in \[0, 1\]"),
                            (dict(top=0), r"top must be in \[1, 100000\]"),
                            (dict(variant="chat9"), "chat9"),
                            (dict(corpus=str(tok)), "corpus and filler_tokens are read by the 'long' variant alone"),
                            (dict(filler_tokens=24), "corpus and filler_tokens are read by the 'long' variant alone"),
                            (dict(variant="long", corpus=""), "corpus is an empty path"),
                            (dict(seeds=[]), "need at least one seed"),
                            (dict(per_config=10**6), r"per_config must be in \[1, 100000\]"),
                            (dict(shard="3/3"), "need 0 <= I < N")):
        with pytest.raises(ValueError, match=message):
            hylens.circuit_study(model, tok, tmp_path / "x", **{"per_config": 1, **kwargs})
    assert not (tmp_path / "x").exists()


def test_circuit_study_long_variant(organism, tmp_path):
    """The long variant's filler from a corpus file: its first filler_tokens tokens of held-out
    text sit between the dictionary and the question, and run.json says where they came from."""
    model = hylens.load(str(organism))
    corpus = tmp_path / "corpus.txt"
    # paragraphs long enough for the fit corpus's chunks (every fifth chunk is held out)
    corpus.write_text("\n\n".join(f"Paragraph {i} of plain words, " + "a sentence to fill the prompt. " * 30
                                  for i in range(40)))
    r = hylens.circuit_study(model, organism / "tokenizer.json", tmp_path / "long", variant="long", per_config=1,
                             top=3, corpus=corpus, filler_tokens=24, frames=False)
    assert r.run["study"]["variant"] == "long" and "filler" in r.run["study"]
    assert r.run["filler_source"].startswith(str(corpus.resolve())) and "first 24 tokens" in r.run["filler_source"]
    assert all(rec["task"] == "long" for rec in r.records)
    # the filler's tokens sit between the last entry and the question (their count, give or take
    # the wrapping newlines merging with their neighbours)
    chat = hylens.circuit_study(model, organism / "tokenizer.json", tmp_path / "chat", per_config=1, top=3,
                                frames=False)

    def gap(rec):
        return rec["qstart"] - rec["entries"][-1][1]

    assert min(gap(x) for x in r.records) >= max(gap(x) for x in chat.records) + 24 - 4


def test_transplant_study_equals_the_cli(organism, tmp_path, cli):
    """hylens.transplant_study reading the reader from a CircuitResult: the tool's files with the
    same options (--circuit the same circuit.json), byte for byte."""
    model = hylens.load(str(organism))
    tok = organism / "tokenizer.json"
    c = hylens.circuit_study(model, tok, tmp_path / "circuit", per_config=2, top=3, frames=False)
    t = hylens.transplant_study(model, tok, tmp_path / "py", circuit=c, blocks=["G0", "1"], kinds="mixer,state",
                                positions=["final", "question"], watch=[(3, 0)], per_config=1, seeds=[1, 2],
                                frames=False)
    run_cli(cli, "experiment", "transplant", "--model", organism, "--circuit", tmp_path / "circuit" / "circuit.json",
            "--blocks", "G0,1", "--kind", "mixer,state", "--positions", "final,question", "--watch", "3:0",
            "--per-config", 1, "--seeds", "1,2", "--no-progress", "--out", tmp_path / "cli")
    same_files(tmp_path / "py", tmp_path / "cli", ("items.jsonl", "summary.csv", "summary.json"))
    assert t.run["study"] == json.loads((tmp_path / "cli" / "run.json").read_text())["study"]
    assert t.run["circuit"] == str((tmp_path / "circuit" / "circuit.json").resolve())


def test_transplant_study_result_and_arguments(organism, tmp_path):
    model = hylens.load(str(organism))
    tok = organism / "tokenizer.json"
    t = hylens.transplant_study(model, tok, tmp_path / "a", reader=(3, 1), kinds=["mixer"], positions="final",
                                watch=(3, 0), per_config=1, frames=False)
    assert t.run["study"]["watch"] == ["L3H0"]  # one (layer, head) pair is one head
    reader = t.run["study"]["reader"]
    assert reader == {"layer": 3, "head": 1}
    assert t.stats["records"] == t.stats["written"] == len(t.records) > 0
    assert t.stats["items"] == sum(p["kept"] for p in t.run["pairs"].values())
    assert {rec["condition"] for rec in t.records} >= {"A", "B", "mixer:G0@final"}
    # the reader as a string is the same study; the default blocks are every layer group (G0)
    same = hylens.transplant_study(model, tok, tmp_path / "b", reader="3:1", blocks="G0", kinds="mixer",
                                   positions=["final"], watch="3:0", per_config=1, frames=False)
    assert (tmp_path / "a" / "items.jsonl").read_bytes() == (tmp_path / "b" / "items.jsonl").read_bytes()
    assert same.summary == t.summary
    # resume writes nothing twice
    again = hylens.transplant_study(model, tok, tmp_path / "a", reader=(3, 1), kinds=["mixer"], positions="final",
                                    watch=[(3, 0)], per_config=1, resume=True, frames=False)
    assert again.stats["written"] == 0 and again.stats["resumed"] == len(t.records)

    def call(**kwargs):
        return hylens.transplant_study(model, tok, tmp_path / "x", **{"per_config": 1, "kinds": "mixer", **kwargs})

    with pytest.raises(ValueError, match="circuit or reader, not both"):
        call(circuit=tmp_path / "c.json", reader="3:1")
    for bad, message in ((dict(reader=3.5), "must be 'LAYER:HEAD' or a \\(layer, head\\) pair"),
                         (dict(reader=(3, 1.5)), "whole number"),
                         (dict(kinds=[1]), "list of strings"),
                         (dict(watch=[3]), "must be 'LAYER:HEAD'"),
                         (dict(circuit=3), "circuit must be a circuit.json path"),
                         (dict(group_size=True), "whole number"),
                         (dict(kinds={"mixer"}), "list of strings"),  # a set: its order is the hash's
                         (dict(watch=3), "list of heads")):
        with pytest.raises(TypeError, match=message):
            call(**bad)
    for bad, message in ((dict(reader="3-1"), "is not LAYER:HEAD"),
                         (dict(reader="3:9"), "is not a head of layer 3"),
                         (dict(reader="9:0"), "the reader layer 9 is not a layer of the model \\(4 layers, 0-3\\)"),
                         (dict(watch=[(9, 0)], reader="3:1"), "transplant --watch\\] the reader layer 9 is not a layer"),
                         (dict(kinds="mixer,teleport"), "teleport"),
                         (dict(kinds="upstream", reader="3:1"), "the upstream kind needs the blocks to remove"),
                         (dict(upstream="G0", reader="3:1"), "are read by the upstream kind alone"),
                         (dict(blocks="G7", reader="3:1"), "G7"),
                         (dict(variant="perm8", reader="3:1"), "has no donor/host pairs"),
                         (dict(circuit=tmp_path / "missing.json"), "cannot read the circuit file"),
                         (dict(circuit=tmp_path), "is a folder"),
                         (dict(circuit=""), "circuit is an empty path"),
                         (dict(reader=""), "reader is empty"),
                         (dict(kinds="", reader="3:1"), "kinds is empty"),
                         (dict(positions=[], reader="3:1"), "positions is empty"),
                         (dict(per_config=10**6, reader="3:1"), r"per_config must be in \[1, 100000\]"),
                         (dict(group_size=5000, reader="3:1"), r"group_size must be in \[0, 1000\]")):
        with pytest.raises(ValueError, match=message):
            call(**bad)
    assert not (tmp_path / "x").exists()


def test_study_names_the_folder_loaded(organism, tmp_path, monkeypatch):
    """A model loaded by a relative path: run.json names its folder, whatever the working directory
    is when the study runs."""
    monkeypatch.chdir(organism.parent)
    model = hylens.load(organism.name)
    assert model.path == str(organism)
    monkeypatch.chdir(tmp_path)
    r = hylens.circuit_study(model, organism / "tokenizer.json", tmp_path / "run", per_config=1, top=3, frames=False)
    assert r.run["model"] == str(organism)


def test_encode_swap_study(organism, tmp_path, cli):
    """hylens.encode_swap_study with the Encode block of a CircuitResult: the tool's items.jsonl and
    summaries with the same options (--circuit the same circuit.json), byte for byte; bad
    arguments refused before anything runs."""
    model = hylens.load(str(organism))
    tok = organism / "tokenizer.json"
    c = hylens.circuit_study(model, tok, tmp_path / "circuit", per_config=2, top=3, frames=False)
    e = hylens.encode_swap_study(model, tok, tmp_path / "py", c, other_layers=[1], per_config=2, seed=5,
                                 frames=False)
    run_cli(cli, "experiment", "encode-swap", "--model", organism, "--circuit", tmp_path / "circuit" / "circuit.json",
            "--other-layers", "1", "--per-config", 2, "--seed", 5, "--no-progress", "--out", tmp_path / "cli")
    same_files(tmp_path / "py", tmp_path / "cli", ("items.jsonl", "summary.csv", "summary.json"))
    assert e.run["study"] == json.loads((tmp_path / "cli" / "run.json").read_text())["study"]
    assert e.stats["records"] == e.stats["written"] == len(e.records) > 0
    assert e.run["study"]["encode"] == c.circuit["encode"]["layers"]
    # bad arguments
    for bad, message in ((dict(circuit=3), "circuit must be a circuit.json path"),
                         (dict(other_layers="1"), "list of layer numbers"),
                         (dict(other_layers=[1.5]), "whole number"),
                         (dict(seed=True), "whole number")):
        with pytest.raises(TypeError, match=message):
            hylens.encode_swap_study(model, tok, tmp_path / "x", **{"circuit": c, **bad})
    for bad, message in ((dict(circuit=""), "circuit is an empty path"),
                         (dict(circuit=tmp_path), "is a folder"),
                         (dict(circuit=c, other_layers=[99]), "control layer 99"),
                         (dict(circuit=c, per_config=0), r"per_config must be in \[1, 100000\]"),
                         (dict(circuit=c, other_layers=[1, 1]), "control layer 1 \\(--other-layers; Python: other_layers=\\) is listed twice"),
                         (dict(circuit=c, other_layers=[]), "other_layers is empty"),
                         (dict(circuit=c, seed=-1), r"seed must be in \[0, ")):
        with pytest.raises(ValueError, match=message):
            hylens.encode_swap_study(model, tok, tmp_path / "x", **bad)
    assert not (tmp_path / "x").exists()
