"""hylens.task_items, hylens.StudyPrompt and hylens.score_answer: every record of a channel
study, rebuilt one item at a time through the public calls (the item, its two segments,
split_prefill or state_swap + generate, the answer cut at the stop id, the scorer), is the
record the study wrote: the same item text, token counts, query position, generated ids,
answer text, score and score fields. The study batches items and builds its caches with
condition_cache; the rebuild runs each item alone through split_prefill and state_swap."""

import json

import pytest

import hylens
from conftest import GOLDEN, run_cli

SPLIT = ("FULL", "KV_ONLY", "REC_ONLY", "NONE")
SWAP = ("KV_A+REC_B", "KV_B+REC_A")


def rebuilt(model, prompt, item, condition, max_new):
    """(answer ids, stopped, query position) of one item under one condition, by hand."""
    seg = prompt.segments(item)
    if condition in SPLIT:
        r = model.split_prefill(seg["context"], seg["query"], condition, max_new=max_new, stop=prompt.stop_ids)
        ids, position = [int(i) for i in r.run.ids], r.position
    else:
        a, b = model.prefill(seg["context"]), model.prefill(seg["alt_context"])
        kv_from, rec_from = (a, b) if condition == "KV_A+REC_B" else (b, a)
        c = hylens.state_swap(kv_from, rec_from)
        position = c.next_position
        g = model.generate(seg["query"], cache=c, max_new=max_new, stop=prompt.stop_ids)
        ids = [int(i) for i in g.ids]
    cut, stopped = prompt.until_stop(ids)
    return cut, stopped, position


@pytest.mark.parametrize("model_dir", ["qwen3_5_dense", "granite_h_dense", "falcon_h1"])
def test_records_rebuilt_by_hand(byte_tokenizer, tmp_path, model_dir):
    model = hylens.load(str(GOLDEN / "models" / model_dir))
    max_new = 6
    r = hylens.experiment(model, byte_tokenizer, ["drm", "dictionary"], tmp_path / "run",
                          conditions=",".join(SPLIT + SWAP), items=3, seeds=[4], max_new=max_new, frames=False)
    prompt = hylens.StudyPrompt(byte_tokenizer, model.model_type)
    assert r.records, "the study wrote no record"
    swap_records = 0
    for rec in r.records:
        (item,) = hylens.task_items(rec["task"], seeds=[rec["seed"]], items=1, start=rec["item"])
        for key in ("context", "query", "expected"):
            assert item[key] == rec[key], (rec["task"], rec["item"], key)
        assert item["fields"] == rec["item_fields"]
        seg = prompt.segments(item)
        assert len(seg["context"]) == rec["context_tokens"] and len(seg["query"]) == rec["query_tokens"]
        ids, stopped, position = rebuilt(model, prompt, item, rec["condition"], max_new)
        where = f"{model_dir} {rec['task']} item {rec['item']} {rec['condition']}"
        assert ids == rec["generated_ids"], where
        assert stopped == rec["stopped"] and position == rec["query_position"], where
        text = prompt.decode(ids)
        assert text == rec["generated"], where
        s = hylens.score_answer(item, text, rec["condition"])
        assert s["score"] == rec["score"] and s["score_fields"] == rec["score_fields"], where
        assert s.get("scored_by") == rec.get("scored_by"), where
        if "first_token" in rec:
            assert rec["first_token"] == (len(ids) > 0 and ids[0] == seg["first_token"]), where
        swap_records += rec["condition"] in SWAP
    assert swap_records > 0, "no swap item ran (every one skipped for its lengths): choose other items"


def test_task_items_match_the_tool(cli):
    items = hylens.task_items("conjunction", seeds=[2, 5], items=3, start=7)
    out = run_cli(cli, "tasks", "--task", "conjunction", "--seeds", "2,5", "--items", "3", "--start", "7", "--json").stdout
    assert items == [json.loads(line) for line in out.splitlines()]
    assert [(i["seed"], i["index"]) for i in items] == [(2, 7), (2, 8), (2, 9), (5, 7), (5, 8), (5, 9)]
    info = hylens.task_info("dictionary")
    assert info["swap"] is True and info["max_new"] > 0 and "dictionary" in info["description"]
    assert hylens.task_info("drm")["swap"] is False


def test_scorer_reads_the_condition():
    """The dictionary scorer takes the value of the source the KV channel came from: A's answer
    is correct under FULL and wrong under KV_B+REC_A, B's the other way round."""
    (item,) = hylens.task_items("dictionary", seeds=[1], items=1)
    a, b = item["expected"][0], item["alt_expected"][0]
    assert a != b
    assert hylens.score_answer(item, a, "FULL")["score"] == 1.0
    assert hylens.score_answer(item, b, "FULL")["score"] == 0.0
    assert hylens.score_answer(item, b, "KV_B+REC_A")["score"] == 1.0
    assert hylens.score_answer(item, a, "KV_B+REC_A")["score"] == 0.0


def test_bad_input(byte_tokenizer, tmp_path):
    with pytest.raises(ValueError, match="unknown task 'nope'"):
        hylens.task_items("nope")
    with pytest.raises(TypeError, match="task_info: task must be a task name"):
        hylens.task_info(3)
    with pytest.raises(TypeError, match="seeds must be a list"):
        hylens.task_items("drm", seeds=3)
    with pytest.raises(ValueError, match="a seed is listed twice"):
        hylens.task_items("drm", seeds=[1, 1])
    with pytest.raises(TypeError, match="items must be a whole number"):
        hylens.task_items("drm", items=1.5)
    (drm,) = hylens.task_items("drm", items=1)
    with pytest.raises(ValueError, match="needs a B context"):
        hylens.score_answer(drm, "yes", "KV_A+REC_B")
    with pytest.raises(ValueError, match="SIDEWAYS"):
        hylens.score_answer(drm, "yes", "SIDEWAYS")
    with pytest.raises(TypeError, match="dict of hylens.task_items"):
        hylens.score_answer("drm", "yes")
    with pytest.raises(hylens.FormatError, match="missing member 'query'"):
        hylens.score_answer({k: v for k, v in drm.items() if k != "query"}, "yes")
    # an item's task fields missing or mistyped: named (it was the JSON library's "key 'persona'
    # not found"), for each task whose scorer reads them (from fuzzing the scorers)
    for task, field in (("persona", "persona"), ("language", "language_code"), ("mixed", "value"), ("label", "condition")):
        (item,) = hylens.task_items(task, items=1)
        assert field in item["fields"]
        for bad in ({k: v for k, v in item["fields"].items() if k != field}, {**item["fields"], field: 3}):
            with pytest.raises(hylens.FormatError, match=rf"\[{task}\] item 0 has no text field '{field}'"):
                hylens.score_answer({**item, "fields": bad}, "x")
    # a float where a whole number goes: refused (the JSON library converted 3.3e122 to an
    # integer without a check, undefined behaviour; found by fuzzing)
    for bad in ({**drm, "index": 1.5}, {**drm, "seed": -1},
                {**drm, "spans": [{**drm["spans"][0], "begin": 3.3e122}]} if drm["spans"] else {**drm, "index": 3.3e122}):
        with pytest.raises(hylens.FormatError, match="must be a whole number >= 0"):
            hylens.score_answer(bad, "yes")
    deep = {}
    for _ in range(600):  # deeper than the readers take (512): refused before it is copied
        deep = {"x": deep}
    with pytest.raises(hylens.FormatError, match="JSON nested deeper than 512"):
        hylens.score_answer({**drm, "fields": deep}, "yes")
    prompt = hylens.StudyPrompt(byte_tokenizer, "qwen35")
    with pytest.raises(ValueError, match="out of range"):
        prompt.decode([2**40])
    with pytest.raises(ValueError, match="chat family 'llama'"):
        hylens.StudyPrompt(byte_tokenizer, "llama")
    # a tokenizer without a special token of the format: the study's check, naming the token
    j = json.loads(open(byte_tokenizer.path).read())
    j["added_tokens"] = [t for t in j["added_tokens"] if t["content"] != "<|im_start|>"]
    (tmp_path / "tokenizer.json").write_text(json.dumps(j))
    with pytest.raises(ValueError, match="<\\|im_start\\|>"):
        hylens.StudyPrompt(hylens.Tokenizer(str(tmp_path / "tokenizer.json")), "qwen35")
