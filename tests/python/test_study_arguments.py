"""Arguments every study wrapper hands to the library as strings (variant, shard, unit, layers)
are checked in Python: a number or a list there is a TypeError naming the argument, raised
before the result folder is made (pybind's own error listed the whole signature instead)."""

import re

import pytest

import hylens


def _studies(qwen, granite, tok):
    model = hylens.load(str(qwen))
    donor = hylens.load(str(granite))
    return {
        "experiment": lambda out, **kw: hylens.experiment(model, tok, ["dictionary"], out, items=1, seeds=[1], **kw),
        "circuit_study": lambda out, **kw: hylens.circuit_study(model, tok, out, per_config=1, **kw),
        "transplant_study": lambda out, **kw: hylens.transplant_study(model, tok, out, reader=(3, 1), per_config=1,
                                                                      **kw),
        "encode_swap_study": lambda out, **kw: hylens.encode_swap_study(model, tok, out, qwen / "circuit.json",
                                                                        per_config=1, **kw),
        "query_map_study": lambda out, **kw: hylens.query_map_study(model, tok, out, reader=(3, 1), fit=30,
                                                                    per_config=1, **kw),
        "stitch_study": lambda out, **kw: hylens.stitch_study(donor, model, out, "0-1", "0-1", test_items=1, **kw),
    }


def test_string_arguments_refuse_other_types(organisms, tmp_path):
    qwen, granite = organisms
    studies = _studies(qwen, granite, qwen / "tokenizer.json")
    out = tmp_path / "never"
    for who, run in studies.items():
        bad = [("shard", 1), ("shard", ["0/2"])]
        if who != "experiment":
            bad.append(("variant", 8))
        if who == "experiment":
            bad.append(("layers", 3))
        if who == "circuit_study":
            bad.append(("unit", None))
        for name, value in bad:
            with pytest.raises(TypeError, match=re.escape(f"{who}: {name} must be a string, got {value!r}")):
                run(out, **{name: value})
    assert not out.exists()


def test_channel_study_conditions_as_a_list(byte_tokenizer, tmp_path):
    from conftest import GOLDEN

    model = hylens.load(str(GOLDEN / "models" / "qwen3_5_dense"))
    run = lambda out, conds: hylens.experiment(model, byte_tokenizer, ["drm"], tmp_path / out, conditions=conds,
                                               items=1, seeds=[1], max_new=1, frames=False)
    listed = run("list", ["FULL", "KV_ONLY@0"])
    assert listed.records == run("string", "FULL,KV_ONLY@0").records
    assert {r["condition"] for r in listed.records} == {"FULL", "KV_ONLY@0"}
    for bad, exc in (([], ValueError), (["FULL", 3], TypeError), (5, TypeError)):
        with pytest.raises(exc, match="conditions"):
            run("bad", bad)
    assert not (tmp_path / "bad").exists()


def test_channel_study_layers_left_out_warn_and_sets_that_run_nothing_raise(byte_tokenizer, tmp_path):
    from conftest import GOLDEN

    model = hylens.load(str(GOLDEN / "models" / "qwen3_5_dense"))  # attention at 3 and 7
    run = lambda out, conds, layers: hylens.experiment(model, byte_tokenizer, ["drm"], tmp_path / out, conditions=conds,
                                                       items=1, seeds=[1], max_new=1, layers=layers, frames=False)
    with pytest.warns(UserWarning, match=re.escape("experiment: KV_ONLY@3 left out: no layer of 3 holds a recurrent "
                                                   "state, which KV_ONLY edits")):
        r = run("noted", "KV_ONLY,REC_ONLY", "3")
    assert {x["condition"] for x in r.records} == {"KV_ONLY", "REC_ONLY", "REC_ONLY@3"}
    assert r.run["layers_left_out"] == ["KV_ONLY@3 left out: no layer of 3 holds a recurrent state, which KV_ONLY edits"]
    with pytest.raises(ValueError, match="--layers set 0-2 runs for no listed condition"):
        run("none", "REC_ONLY", "0-2")
    with pytest.raises(ValueError, match="asks for layer sweeps, but no listed condition edits a channel"):
        run("full", "FULL", "single")


def test_paths_are_str_or_pathlike_and_tokenizers_are_checked(organisms, tmp_path):
    qwen, _ = organisms
    model = hylens.load(qwen)  # a pathlib.Path, as the studies take
    assert model.path == str(qwen.resolve())
    tok = hylens.Tokenizer(qwen / "tokenizer.json")
    cache = model.prefill([1, 2, 3])
    cache.save(tmp_path / "c.safetensors")
    assert model.load_cache(tmp_path / "c.safetensors") == cache
    with pytest.raises(TypeError, match="experiment: tokenizer must be a hylens.Tokenizer or a tokenizer.json path, got int"):
        hylens.experiment(model, 5, ["dictionary"], tmp_path / "never", items=1, seeds=[1])
    with pytest.raises(TypeError, match="tokenizer must be .* got Model"):
        hylens.circuit_study(model, model, tmp_path / "never", per_config=1)
    assert tok.vocab_size == hylens.Tokenizer(str(qwen / "tokenizer.json")).vocab_size
    assert not (tmp_path / "never").exists()


def test_load_warns_of_tensors_the_config_does_not_use(organisms, tmp_path):
    import json
    import shutil

    qwen, _ = organisms
    assert hylens.load(qwen).unused_tensors == []
    fewer = tmp_path / "fewer"
    shutil.copytree(qwen, fewer)
    cfg = json.loads((qwen / "config.json").read_text())
    text = cfg.get("text_config", cfg)
    n = text["num_hidden_layers"]
    text["num_hidden_layers"] = n - 1
    text["layer_types"] = text["layer_types"][:-1]
    (fewer / "config.json").write_text(json.dumps(cfg))
    with pytest.warns(UserWarning, match="tensor\\(s\\) of the checkpoint are not used by its config.json") as caught:
        m = hylens.load(fewer)
    assert str(caught[0].message) == m.unused_tensors_warning
    assert m.unused_tensors_warning.startswith(f"{m.path}: {len(m.unused_tensors)} tensor(s)")
    assert hylens.load(qwen).unused_tensors_warning == ""
    assert m.unused_tensors and all(f"layers.{n - 1}." in t for t in m.unused_tensors)
