"""Every shipped golden model through Python: prefill logits, residuals, final norm and
caches, then five decode steps with theirs, against the float64 reference within the
manifest's atol (the tolerances of the C++ suite), from the F32 and the BF16 checkpoint; and
against `hylens dump` (the same C++ functions in the command-line tool): bit for bit when the
two binaries are built with -ffp-contract=off (conftest.assert_matches_tool says why)."""

import numpy as np
import pytest

import hylens
from conftest import (assert_bitwise, assert_matches_tool, assert_close, golden_model_dirs, load_manifest, read_safetensors, run_cli)

MODELS = golden_model_dirs()


def python_dump(model, prompt, decode):
    """The tensors of the golden format, computed through the Python API."""
    L = model.num_layers
    sites = ["embed", "final_norm"] + [f"resid_post.{i}" for i in range(L)]
    cache = model.new_cache()
    r = model.run(prompt, capture=sites, cache=cache)
    out = {"logits": r.logits, "hidden.embed": r.captures["embed"][0], "hidden.final_norm": r.captures["final_norm"][0]}
    for i in range(L):
        out[f"hidden.layer.{i}"] = r.captures[f"resid_post.{i}"][0]
    add_cache(out, cache, "cache.")
    steps = [model.run([int(t)], capture=sites[1:], cache=cache) for t in decode]
    out["decode.logits"] = np.concatenate([s.logits for s in steps])
    out["decode.hidden.final_norm"] = np.concatenate([s.captures["final_norm"][0] for s in steps])
    for i in range(L):
        out[f"decode.hidden.layer.{i}"] = np.concatenate([s.captures[f"resid_post.{i}"][0] for s in steps])
    add_cache(out, cache, "decode.cache.")
    return out


def add_cache(out, cache, prefix):
    for i in range(cache.num_layers):
        if i in cache.layers_with("recurrent"):
            out[f"{prefix}{i}.conv"] = cache.conv(i)[0]
            out[f"{prefix}{i}.state"] = cache.state(i)[0]
        if i in cache.layers_with("kv"):
            out[f"{prefix}{i}.k"] = cache.k(i)[0]
            out[f"{prefix}{i}.v"] = cache.v(i)[0]


@pytest.fixture(scope="module", params=MODELS, ids=[p.name for p in MODELS])
def golden(request):
    d = request.param
    return d, read_safetensors(d / "golden.safetensors"), load_manifest(d / "manifest.json")


@pytest.mark.parametrize("bf16", [False, True], ids=["f32", "bf16"])
def test_golden_tensors_within_manifest_atol(golden, bf16):
    d, ref, manifest = golden
    model = hylens.load(str(d / "model-bf16" if bf16 else d))
    got = python_dump(model, ref["input_ids"], ref["decode.input_ids"])
    tensors = manifest["files"]["golden.safetensors"]["tensors"]
    compared = 0
    for name, info in tensors.items():
        if info.get("dtype", "F32") != "F32" or "atol" not in info:
            continue
        assert name in got, f"{d.name}: the Python dump lacks {name}"
        assert_close(got[name], ref[name], info["atol"], f"{d.name} {'BF16' if bf16 else 'F32'} {name}")
        compared += 1
    assert compared >= 4 + 2 * model.num_layers  # logits, residuals, caches and decode all compared


def test_matches_cli_dump(golden, cli, tmp_path):
    d, ref, _ = golden
    out = tmp_path / "dump.safetensors"
    run_cli(cli, "dump", "--model", d / "model-bf16", "--input", d / "golden.safetensors", "--out", out)
    want = read_safetensors(out)
    got = python_dump(hylens.load(str(d / "model-bf16")), ref["input_ids"], ref["decode.input_ids"])
    common = sorted(set(want) & set(got))
    assert "logits" in common and "decode.logits" in common and len(common) >= len(want) - 2
    for name in common:
        assert_matches_tool(got[name], want[name], f"{d.name} {name} (Python vs hylens dump)")


def test_forward_equals_run_and_batches(golden):
    """forward(), run() with nothing registered and NumPy / list inputs agree bitwise; a row of a
    batch of two agrees with the single sequence within 1e-5 of the largest logit (the C++ bound of
    stack/test_continuation.cpp: the batched products sum in another order), and a prefill
    continued by forward() with one forward within 1e-4 (the golden decode bound)."""
    d, ref, _ = golden
    model = hylens.load(str(d))
    ids = ref["input_ids"][:20]
    a = model.forward(ids)
    assert a.shape == (20, model.vocab) and a.dtype == np.float32
    assert_bitwise(model.forward(ids.tolist()), a, "list input")
    assert_bitwise(model.forward(ids.astype(np.int32)), a, "int32 input")
    assert_bitwise(model.run(ids).logits, a, "run() with nothing registered")
    batch = np.stack([ids, ids[::-1]])
    b = model.forward(batch)
    assert b.shape == (2, 20, model.vocab)
    assert_close(b[0], a, 1e-5 * max(1.0, float(np.abs(a).max())), "batch row 0 vs single")
    # prefill + forward continue the cache exactly like one call over the joint sequence
    cache = model.prefill(ids[:12])
    tail = model.forward(ids[12:], cache=cache)
    assert cache.next_position == 20 or cache.tokens_seen == 20
    scale = max(1.0, float(np.abs(a).max()))
    assert_close(tail, a[12:], 1e-4 * scale, "prefill + continued forward vs one forward")
