"""hylens.merge: the shard folders of a study run from Python, merged from Python, are the
unsharded run's folder byte for byte (the channel study on a golden model, the circuit study and
the stitch study on the shipped organisms), returned as the study's result class; bad arguments
and folders that cannot be merged are refused."""

import json

import pytest

import hylens
from conftest import GOLDEN, same_files


def test_merge_channel_study(byte_tokenizer, tmp_path):
    tokenizer = byte_tokenizer
    model = hylens.load(str(GOLDEN / "models" / "qwen3_5_dense"))
    args = dict(conditions="FULL,NONE", items=3, seeds=[1], max_new=2, frames=False)
    whole = hylens.experiment(model, tokenizer, ["drm"], tmp_path / "whole", **args)
    for i in range(2):
        hylens.experiment(model, tokenizer, ["drm"], tmp_path / f"s{i}", shard=f"{i}/2", **args)
    m = hylens.merge([tmp_path / "s1", str(tmp_path / "s0")], tmp_path / "merged", frames=False)
    assert isinstance(m, hylens.ExperimentResult)
    assert m.stats["kind"] == "channels" and m.stats["folders"] == 2 and m.stats["missing_shards"] == 0
    assert m.stats["records"] == len(whole.records)
    same_files(tmp_path / "merged", tmp_path / "whole", ("items.jsonl", "summary.csv", "diffs.csv"))


def test_merge_circuit_and_stitch(organisms, tmp_path):
    qwen, granite = organisms
    model = hylens.load(str(qwen))
    args = dict(per_config=1, seeds=[5], top=2, frames=False)
    hylens.circuit_study(model, qwen / "tokenizer.json", tmp_path / "c", **args)
    for i in range(2):
        hylens.circuit_study(model, qwen / "tokenizer.json", tmp_path / f"c{i}", shard=f"{i}/2", **args)
    m = hylens.merge([tmp_path / "c0", tmp_path / "c1"], tmp_path / "cm", frames=False)
    assert isinstance(m, hylens.CircuitResult) and m.stats["kind"] == "circuit"
    same_files(tmp_path / "cm", tmp_path / "c", ("items.jsonl", "summary.csv", "summary.json", "circuit.json"))
    assert m.circuit == json.loads((tmp_path / "c" / "circuit.json").read_text())
    # one shard alone: a partial result, said so
    part = hylens.merge([tmp_path / "c0"], tmp_path / "cp", frames=False)
    assert part.stats["missing_shards"] == 1 and part.run["status"] == "incomplete"

    host, donor = hylens.load(str(granite)), model
    sargs = dict(fit_prompts=12, fit_tokens=400, test_items=4, ppl_seqs=2, ppl_len=24, conditions="intact,stitched",
                 frames=False)
    hylens.stitch_study(host, donor, tmp_path / "st", "0-1", "0-2", **sargs)
    for i in range(2):
        hylens.stitch_study(host, donor, tmp_path / f"st{i}", "0-1", "0-2", shard=f"{i}/2", **sargs)
    s = hylens.merge((tmp_path / "st0", tmp_path / "st1"), tmp_path / "stm", frames=False)
    assert isinstance(s, hylens.StitchResult) and s.stats["kind"] == "stitch"
    same_files(tmp_path / "stm", tmp_path / "st", ("items.jsonl", "summary.csv", "summary.json", "adapters.safetensors"))
    # a run that fits no map has no adapters, nor has its merge; into the folder of another
    # study's merge it is refused (its adapters would have stayed beside the records), that
    # merge left as it was
    hylens.stitch_study(host, donor, tmp_path / "plain", "0-1", "0-2", **{**sargs, "conditions": "intact,removed"})
    assert not (tmp_path / "plain" / "adapters.safetensors").exists()
    with pytest.raises(hylens.Error, match="holds a merge of another study"):
        hylens.merge([tmp_path / "plain"], tmp_path / "stm", frames=False)
    same_files(tmp_path / "stm", tmp_path / "st", ("items.jsonl", "adapters.safetensors"))
    hylens.merge([tmp_path / "plain"], tmp_path / "plain_merged", frames=False)
    assert not (tmp_path / "plain_merged" / "adapters.safetensors").exists()


def test_merge_refuses(tmp_path):
    with pytest.raises(TypeError, match="folders must be a list of result folders"):
        hylens.merge(str(tmp_path), tmp_path / "m")
    with pytest.raises(ValueError, match="no result folder given"):
        hylens.merge([], tmp_path / "m")
    odd = tmp_path / "odd"
    odd.mkdir()
    (odd / "run.json").write_text(json.dumps({"kind": "bogus", "study": {}}))
    with pytest.raises(hylens.Error, match="holds a 'bogus' study, which has no merge"):
        hylens.merge([odd], tmp_path / "m")
    assert not (tmp_path / "m").exists()
    # an encode-swap folder whose definition lacks its sources: refused before the merged folder is made
    swap = tmp_path / "swap"
    swap.mkdir()
    (swap / "run.json").write_text(json.dumps({"kind": "encode-swap", "study": {"shard": "0/1"}}))
    (swap / "items.jsonl").write_text(json.dumps({"task": "t", "seed": 1, "item": 0, "condition": "c"}) + "\n")
    with pytest.raises(hylens.FormatError, match="has no encode-swap study definition"):
        hylens.merge([swap], tmp_path / "m")
    assert not (tmp_path / "m").exists()
    # sources that are not names: the study's conditions cannot be named
    (swap / "run.json").write_text(json.dumps({"kind": "encode-swap", "study": {"shard": "0/1", "sources": ["none", 7]}}))
    with pytest.raises(hylens.FormatError, match=r"the study's sources are not names: \["):
        hylens.merge([swap], tmp_path / "m")
    assert not (tmp_path / "m").exists()
    with pytest.raises(ValueError, match="out is an empty path"):
        hylens.merge([odd], "")
    with pytest.raises(TypeError, match="a folder to merge must be a folder path"):
        hylens.merge([1], tmp_path / "m")
    with pytest.raises(TypeError, match="folders must be a list"):
        hylens.merge({str(odd)}, tmp_path / "m")
    # values of another type than a study writes are named as such (they were the JSON library's
    # bare type_error; from fuzzing the result files): conditions not a list of names, and a
    # skipped.jsonl in a study of "items": "x"
    bad = tmp_path / "bad_conditions"
    bad.mkdir()
    (bad / "run.json").write_text(json.dumps({"study": {"conditions": 5}}))
    with pytest.raises(hylens.FormatError, match="the study's conditions are not a list of names"):
        hylens.merge([bad], tmp_path / "m")
    items = tmp_path / "bad_items"
    items.mkdir()
    study = {"conditions": ["KV_A+REC_B"], "items": "x", "tasks": ["dictionary"], "seeds": [1]}
    (items / "run.json").write_text(json.dumps({"study": study}))
    (items / "skipped.jsonl").write_text(json.dumps({"task": "dictionary", "seed": 1, "item": 0}) + "\n")
    with pytest.raises(hylens.FormatError, match="holds a value of another type or shape than the channel study writes"):
        hylens.merge([items], tmp_path / "m")


def test_resume_refuses_a_run_json_that_is_not_an_object(organisms, byte_tokenizer, tmp_path):
    qwen, _ = organisms
    for name, value in (("array", []), ("number", 5)):
        for study in ("channels", "circuit"):
            out = tmp_path / f"{study}-{name}"
            out.mkdir()
            (out / "run.json").write_text(json.dumps(value))
            with pytest.raises(hylens.FormatError, match=r"run.json is not a study's run.json \(it holds"):
                if study == "channels":
                    model = hylens.load(str(GOLDEN / "models" / "qwen3_5_dense"))
                    hylens.experiment(model, byte_tokenizer, ["drm"], out, items=1, seeds=[1], resume=True, frames=False)
                else:
                    hylens.circuit_study(hylens.load(str(qwen)), qwen / "tokenizer.json", out, per_config=1, seeds=[5],
                                         resume=True, frames=False)


def test_merge_folder_checks(organisms, tmp_path):
    qwen, _ = organisms
    model = hylens.load(str(qwen))
    args = dict(per_config=1, seeds=[5], top=2, frames=False)
    hylens.circuit_study(model, qwen / "tokenizer.json", tmp_path / "c", **args)
    with pytest.raises(hylens.Error, match="is given twice"):
        hylens.merge([tmp_path / "c", tmp_path / "c"], tmp_path / "m")
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match="merge: out: '.*file' is a file, not a folder"):  # before anything is read
        hylens.merge([tmp_path / "c"], tmp_path / "file")
    assert not (tmp_path / "m").exists()
    # a merge into the folder of an earlier merge: an empty shard leaves no summary behind
    hylens.circuit_study(model, qwen / "tokenizer.json", tmp_path / "e", shard="5/6", **args)  # no items
    assert not (tmp_path / "e" / "summary.csv").exists()
    hylens.merge(iter([tmp_path / "c"]), tmp_path / "m")
    assert (tmp_path / "m" / "circuit.json").exists()
    m = hylens.merge([tmp_path / "e"], tmp_path / "m", frames=False)
    assert m.records == [] and m.summary == [] and m.circuit == {}


def _killed_shard_with(src, dst, line=None):
    """A copy of the shard folder `src` made to look killed (status running, no items
    fingerprint), with `line` (a record) appended to its items.jsonl when given."""
    import shutil
    shutil.copytree(src, dst)
    run = json.loads((dst / "run.json").read_text())
    run["status"] = "running"
    run.pop("items_fnv1a64", None)
    (dst / "run.json").write_text(json.dumps(run))
    if line is not None:
        with open(dst / "items.jsonl", "a") as f:
            f.write(json.dumps(line, sort_keys=True) + "\n")


def test_merge_checks_the_records_of_unfinished_folders(organisms, tmp_path):
    # A killed shard's records carry no fingerprint, so a merge checks each by its names: a record
    # of another task or condition than the study's definition names (an edited line, another
    # study's) is refused, naming the line, for every study with a merge of its own; a record
    # lacking a value the summaries read is named as such (it was "key 'order' not found").
    qwen, granite = organisms
    model, tok = hylens.load(str(qwen)), qwen / "tokenizer.json"
    circuit = hylens.circuit_study(model, tok, tmp_path / "circuit", per_config=1, seeds=[5], top=2, shard="0/2",
                                   frames=False)
    whole_circuit = hylens.circuit_study(model, tok, tmp_path / "circuit_whole", per_config=1, seeds=[5], top=2,
                                         frames=False)
    circuit_file = tmp_path / "circuit_whole" / "circuit.json"
    hylens.encode_swap_study(model, tok, tmp_path / "encode-swap", circuit_file, per_config=1, shard="0/2", frames=False)
    hylens.transplant_study(model, tok, tmp_path / "transplant", circuit=circuit_file, kinds=("mixer",),
                            positions=("final",), per_config=1, shard="0/2", frames=False)
    hylens.query_map_study(model, tok, tmp_path / "query-map", circuit=circuit_file, fit=40, per_config=1, shard="0/2",
                           frames=False)
    hylens.stitch_study(hylens.load(str(granite)), model, tmp_path / "stitch", "0-1", "0-2", fit_prompts=12,
                        fit_tokens=400, test_items=4, ppl_seqs=2, ppl_len=24, conditions="intact,removed",
                        shard="0/2", frames=False)
    assert whole_circuit.records and circuit.records
    channel_line = {"task": "dictionary", "seed": 5, "item": 0, "condition": "FULL", "score": 1.0}
    for kind in ("circuit", "encode-swap", "transplant", "query-map", "stitch"):
        src = tmp_path / kind
        first = json.loads((src / "items.jsonl").read_text().splitlines()[0])
        seed = first["seed"]
        cases = {
            "task": ({**first, "task": "other:chat4"}, "holds a record of task 'other:chat4', which this"),
            "condition": ({**first, "condition": "BOGUS"}, "holds a record of condition 'BOGUS', which this"),
            "another study's": ({**channel_line, "seed": seed}, "holds a record of task 'dictionary', which this"),
        }
        for name, (line, message) in cases.items():
            dst = tmp_path / f"{kind}-{name}"
            _killed_shard_with(src, dst, line)
            with pytest.raises(hylens.FormatError, match=message):
                hylens.merge([dst], tmp_path / f"{kind}-{name}-merged", frames=False)
        # the killed shard unedited merges (the checks take every record the study wrote), marked incomplete
        plain = tmp_path / f"{kind}-plain"
        _killed_shard_with(src, plain)
        m = hylens.merge([plain], tmp_path / f"{kind}-plain-merged", frames=False)
        assert m.run["status"] == "incomplete"
    # a transplant record of its own task and condition without the values its summaries read
    first = json.loads((tmp_path / "transplant" / "items.jsonl").read_text().splitlines()[0])
    lacking = {k: first[k] for k in ("task", "seed", "item", "condition")}
    _killed_shard_with(tmp_path / "transplant", tmp_path / "lacking", {**lacking, "item": 10_000})
    with pytest.raises(hylens.FormatError, match="lacks a value the transplant study's summaries read"):
        hylens.merge([tmp_path / "lacking"], tmp_path / "lacking-merged", frames=False)
