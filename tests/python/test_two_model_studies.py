"""hylens.query_map_study and hylens.stitch_study: the studies on two models from Python, on the
shipped organisms models/qwen35-tiny and models/granite-h-tiny: the files are those `hylens
experiment query-map` / `hylens experiment stitch` write with the same options, byte for byte;
the result objects read them back; bad arguments are refused before anything runs."""

import json

import pytest

import hylens
from conftest import run_cli, same_files


def _run(path):
    return json.loads((path / "run.json").read_text())


def test_query_map_study_equals_the_cli(organisms, tmp_path, cli):
    qwen, _ = organisms
    model = hylens.load(str(qwen))
    r = hylens.query_map_study(model, qwen / "tokenizer.json", tmp_path / "py", address="G0", reader=(3, 1),
                               sources=["G0", "1"], fit=40, curve=[20], variant="chat4", per_config=2, seeds=[5, 7],
                               frames=False)
    run_cli(cli, "experiment", "query-map", "--model", qwen, "--address", "G0", "--reader", "3:1", "--sources", "G0,1",
            "--fit", 40, "--curve", 20, "--variant", "chat4", "--per-config", 2, "--seeds", "5,7", "--no-progress",
            "--out", tmp_path / "cli")
    same_files(tmp_path / "py", tmp_path / "cli", ("items.jsonl", "summary.csv", "summary.json"))
    cli_run = _run(tmp_path / "cli")
    assert r.run["study"] == cli_run["study"] and r.run["fits"] == cli_run["fits"] and r.run["via"] == "python"
    assert r.run["donor"] is None and r.run["donor_model_type"] == "qwen3_5"
    # the result object: what the files hold
    assert r.fits == cli_run["fits"] and set(r.fits) == {"5", "7"}
    assert r.stats["records"] == r.stats["written"] == len(r.records) and r.stats["resumed"] == 0
    assert {rec["seed"] for rec in r.records} == {5, 7}
    conditions = {row["condition"] for row in r.summary}
    assert {"A", "B", "in_family", "mean", "map:G0", "self:1", "shuffled:G0", "map:G0@20", "map:embedding"} <= conditions
    # the tool resumes the Python folder, and Python the tool's, without writing a record
    out = run_cli(cli, "experiment", "query-map", "--model", qwen, "--address", "G0", "--reader", "3:1", "--sources",
                  "G0,1", "--fit", 40, "--curve", 20, "--variant", "chat4", "--per-config", 2, "--seeds", "5,7",
                  "--resume", "--no-progress", "--out", tmp_path / "py")
    assert f"(0 new, {len(r.records)} resumed)" in out.stderr
    cross = hylens.query_map_study(model, qwen / "tokenizer.json", tmp_path / "cli", address="G0", reader=(3, 1),
                                   sources=["G0", "1"], fit=40, curve=[20], variant="chat4", per_config=2,
                                   seeds=[5, 7], resume=True, frames=False)
    assert cross.stats["written"] == 0 and cross.stats["resumed"] == len(r.records)
    # resume writes nothing twice
    again = hylens.query_map_study(model, qwen / "tokenizer.json", tmp_path / "py", address="G0", reader="3:1",
                                   sources="G0,1", fit=40, curve=(20,), variant="chat4", per_config=2, seeds=[5, 7],
                                   resume=True, frames=False)
    assert again.stats["written"] == 0 and again.stats["resumed"] == len(r.records)


def test_query_map_study_across_families(organisms, tmp_path, cli):
    qwen, granite = organisms
    r = hylens.query_map_study(hylens.load(str(qwen)), qwen / "tokenizer.json", tmp_path / "py",
                               donor=hylens.load(str(granite)), reader=(3, 1), fit=30, per_config=1, frames=False)
    run_cli(cli, "experiment", "query-map", "--model", qwen, "--donor", granite, "--reader", "3:1", "--fit", 30,
            "--per-config", 1, "--no-progress", "--out", tmp_path / "cli")
    same_files(tmp_path / "py", tmp_path / "cli", ("items.jsonl", "summary.csv", "summary.json"))
    cli_run = _run(tmp_path / "cli")
    assert r.run["study"] == cli_run["study"] and r.run["fits"] == cli_run["fits"]
    # the donor's tokenizer defaulted to its folder's, as the tool's does
    assert r.run["donor"] == cli_run["donor"] and r.run["donor_tokenizer"] == cli_run["donor_tokenizer"]
    assert r.run["donor_model_type"] == "granitemoehybrid"


def test_query_map_study_refuses_bad_arguments(organisms, tmp_path):
    qwen, granite = organisms
    model = hylens.load(str(qwen))
    tok = qwen / "tokenizer.json"
    out = tmp_path / "bad"

    def refused(exc, match, **kw):
        with pytest.raises(exc, match=match):
            hylens.query_map_study(model, tok, out, **{"reader": (3, 1), "fit": 30, "per_config": 1, **kw})
        assert not out.exists()

    refused(ValueError, "donor_tokenizer without a donor", donor_tokenizer=tok)
    refused(TypeError, "donor must be a hylens.Model", donor=str(granite))
    refused(ValueError, r"a size of curve must be in \[10, 29\]", curve=[30])
    refused(TypeError, "curve must be a list", curve="20")
    refused(ValueError, r"fit must be in \[10, 1000000\]", fit=5)
    refused(TypeError, "embedding must be True or False", embedding=1)
    refused(TypeError, "address must be one block", address=["G0"])
    refused(ValueError, "reader is empty", reader="")
    refused(hylens.Error, "names 2 blocks; give one", address="0,1")
    refused(hylens.Error, "has no donor/host pairs", variant="perm8")
    refused(ValueError, "a size is listed twice in curve", curve=[20, 20])
    refused(hylens.Error, "the condition map:G0 comes twice", sources="G0,G0")
    refused(hylens.Error, "the receiver's address 'G7'", address="G7")
    refused(ValueError, "seeds is empty", seeds=[])
    refused(TypeError, "seeds must be a list or tuple", seeds={1, 2})
    refused(ValueError, "the tokenizer path is empty", donor=hylens.load(str(granite)), donor_tokenizer="")
    with pytest.raises(TypeError, match="model must be a hylens.Model"):
        hylens.query_map_study(str(qwen), tok, out, reader=(3, 1))


def test_stitch_study_equals_the_cli(organisms, tmp_path, cli):
    qwen, granite = organisms
    args = dict(fit_prompts=12, fit_tokens=400, test_items=5, ppl_seqs=2, ppl_len=24, seeds=[7])
    r = hylens.stitch_study(hylens.load(str(granite)), hylens.load(str(qwen)), tmp_path / "py", "0-1", [(0, 2)],
                            conditions="intact,removed,stitched", frames=False, **args)
    run_cli(cli, "experiment", "stitch", "--host", granite, "--donor", qwen, "--host-block", "0-1", "--donor-block",
            "0-2", "--conditions", "intact,removed,stitched", "--fit-prompts", 12, "--fit-tokens", 400,
            "--test-items", 5, "--ppl-seqs", 2, "--ppl-len", 24, "--seed", 7, "--no-progress", "--out", tmp_path / "cli")
    same_files(tmp_path / "py", tmp_path / "cli", ("items.jsonl", "summary.csv", "summary.json", "adapters.safetensors"))
    cli_run = _run(tmp_path / "cli")
    assert r.run["study"] == cli_run["study"] and r.run["fits"] == cli_run["fits"] and r.run["via"] == "python"
    for key in ("host", "host_tokenizer", "donor", "donor_tokenizer", "host_type", "donor_type"):
        assert r.run[key] == cli_run[key], key
    # the result object
    assert r.adapters.is_file() and r.fits == cli_run["fits"]
    assert r.stats["records"] == r.stats["written"] == len(r.records)
    assert {row["condition"] for row in r.summary} == {"intact", "removed", "stitched"}
    again = hylens.stitch_study(hylens.load(str(granite)), hylens.load(str(qwen)), tmp_path / "py", "0-1", "0-2",
                                conditions=["intact", "removed", "stitched"], resume=True, frames=False, **args)
    assert again.stats["written"] == 0 and again.stats["resumed"] == len(r.records)


def test_stitch_study_is_the_same_at_any_thread_count(organisms, tmp_path, cli):
    """The adapters' fit and the records do not depend on the pool's size. With these sizes a
    fit chunk of 494 tokens crosses blas::gemm's split threshold: before its column blocks were
    fixed (256 columns a call), 2 threads made two 32-column sgemm calls where 1 made one of 64,
    and out.W, out.x_mean and the stitched records differed in the last bits."""
    import os
    import subprocess

    qwen, granite = organisms
    for threads in ("1", "2"):
        subprocess.run([cli, "experiment", "stitch", "--host", str(granite), "--donor", str(qwen), "--host-block", "0-1",
                        "--donor-block", "0-2", "--fit-prompts", "40", "--fit-tokens", "2000", "--test-items", "20",
                        "--ppl-seqs", "2", "--ppl-len", "64", "--conditions", "stitched", "--no-progress",
                        "--out", str(tmp_path / threads)],
                       check=True, capture_output=True, env={**os.environ, "HYLENS_THREADS": threads})
    same_files(tmp_path / "1", tmp_path / "2", ("items.jsonl", "summary.csv", "summary.json", "adapters.safetensors"))


def test_stitch_study_refuses_bad_arguments(organisms, tmp_path):
    qwen, granite = organisms
    host, donor = hylens.load(str(granite)), hylens.load(str(qwen))
    out = tmp_path / "bad"

    def refused(exc, match, host_block="0-1", donor_block="0-2", **kw):
        with pytest.raises(exc, match=match):
            hylens.stitch_study(host, donor, out, host_block, donor_block, **{"test_items": 1, "ppl_seqs": 1, **kw})
        assert not out.exists()

    with pytest.raises(TypeError, match="host must be a hylens.Model"):
        hylens.stitch_study(None, donor, out, "0-1", "0-2")
    with pytest.raises(TypeError, match="donor must be a hylens.Model"):
        hylens.stitch_study(host, str(qwen), out, "0-1", "0-2")
    refused(ValueError, "host_block and donor_block name one range per slot", host_block="")
    refused(TypeError, "a range of donor_block must be", donor_block=[0])
    refused(hylens.Error, "give one of each per slot", donor_block=(0, 1), host_block=[(0, 0), (1, 1)])
    refused(hylens.Error, "give one of each per slot", donor_block="0-1,2-2")
    refused(ValueError, "other_blocks is empty", other_blocks=[])
    refused(ValueError, "conditions is empty", conditions=[])
    refused(ValueError, "seed is listed twice", seeds=[3, 3])
    refused(ValueError, r"ppl_len must be in \[2, 1000000\]", ppl_len=1)
    refused(ValueError, "reader is empty", reader="")
    refused(hylens.Error, "unknown condition 'nope'", conditions="intact,nope")
