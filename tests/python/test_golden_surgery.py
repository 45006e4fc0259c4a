"""The cache-surgery references (tests/golden/surgery) through Python: the ten split-prefill /
state-swap conditions, the state patches (exp32-B) and the mixer transplants (exp22) within
the manifest's atol (greedy ids and positions exact), from the F32 and the BF16 checkpoint;
the conditions also against `hylens surgery` (bit for bit when the binaries agree, else within
float32 rounding, ids and positions exact)."""

import numpy as np
import pytest

import hylens
from conftest import GOLDEN, assert_bitwise, assert_matches_tool, assert_close, load_manifest, read_safetensors, run_cli, surgery_dirs

DIRS = surgery_dirs()


def edited_caches(model, ref):
    """Each condition's (cache, query start), built with the Python surgery API."""
    a = model.prefill(ref["ctx_a.ids"])
    b = model.prefill(ref["ctx_b.ids"])
    s_kv = ref["kv_only_layers.layers"].tolist()
    s_swap = ref["swap_ka_rb_layers.layers"].tolist()

    def swap(c):
        return c, c.next_position

    return {
        "full": hylens.apply_split_mode(a, "FULL"),
        "full_b": hylens.apply_split_mode(b, "FULL"),
        "kv_only": hylens.apply_split_mode(a, "KV_ONLY"),
        "rec_only": hylens.apply_split_mode(a, "REC_ONLY"),
        "none": hylens.apply_split_mode(a, "NONE"),
        "swap_ka_rb": swap(hylens.state_swap(a, b)),
        "swap_kb_ra": swap(hylens.state_swap(b, a)),
        "kv_only_layers": hylens.apply_split_mode(a, "KV_ONLY", layers=s_kv),
        "swap_ka_rb_layers": swap(hylens.state_swap(a, b, layers_rec=s_swap)),
        "kv_only_noconv": hylens.apply_split_mode(a, "KV_ONLY", conv_with_state=False),
    }


def run_conditions(model, ref, n_gen=4):
    out = {}
    for name, (cache, pos) in edited_caches(model, ref).items():
        g = model.generate(ref["query.ids"], cache=cache, max_new=n_gen, feed_last=True, start_position=pos)
        out[name + ".logits"] = g.prompt_logits
        out[name + ".gen.ids"] = g.ids
        out[name + ".gen.logits"] = g.step_logits
        out[name + ".positions"] = g.positions
    return out


@pytest.fixture(scope="module", params=DIRS, ids=[p.name for p in DIRS])
def surgery(request):
    d = request.param
    return d, read_safetensors(d / "surgery.safetensors"), load_manifest(d / "manifest.json")


def model_dir(d, bf16):
    m = GOLDEN / "models" / d.name
    return m / "model-bf16" if bf16 else m


@pytest.mark.parametrize("bf16", [False, True], ids=["f32", "bf16"])
def test_conditions_within_manifest_atol(surgery, bf16):
    d, ref, manifest = surgery
    model = hylens.load(str(model_dir(d, bf16)))
    got = run_conditions(model, ref)
    assert len(got) == 40 and set(manifest["conditions"]) == {k.split(".")[0] for k in got}
    for name, value in got.items():
        label = f"{d.name} {'BF16' if bf16 else 'F32'} {name}"
        if ref[name].dtype == np.int64:
            np.testing.assert_array_equal(value, ref[name], err_msg=label)
        else:
            assert_close(value, ref[name], manifest["tensors"][name]["atol"], label)
    for cond, info in manifest["conditions"].items():
        assert got[cond + ".positions"][0] == info["pos0"], cond


def test_split_prefill_matches_the_edited_caches(surgery):
    """split_prefill(context, query, mode) is the apply_split_mode + generate path, bit for bit."""
    d, ref, _ = surgery
    model = hylens.load(str(model_dir(d, True)))
    got = run_conditions(model, ref)
    prefilled = model.prefill(ref["ctx_a.ids"])
    for mode, cond in [("FULL", "full"), ("KV_ONLY", "kv_only"), ("REC_ONLY", "rec_only"), ("NONE", "none")]:
        s = model.split_prefill(ref["ctx_a.ids"], ref["query.ids"], mode, max_new=4, feed_last=True)
        assert s.position == got[cond + ".positions"][0]
        assert_bitwise(s.run.prompt_logits, got[cond + ".logits"], f"{d.name} split_prefill {mode}")
        assert_bitwise(s.run.step_logits, got[cond + ".gen.logits"], f"{d.name} split_prefill {mode} gen")
        np.testing.assert_array_equal(s.run.ids, got[cond + ".gen.ids"])
        again = model.split_prefill(None, ref["query.ids"], mode, max_new=4, feed_last=True, prefilled=prefilled)
        assert_bitwise(again.run.prompt_logits, s.run.prompt_logits, f"{d.name} run_split {mode}")
    assert prefilled == model.prefill(ref["ctx_a.ids"]), "split_prefill changed the prefilled cache"


def test_matches_cli_surgery(surgery, cli, tmp_path):
    d, ref, _ = surgery
    out = tmp_path / "surgery.safetensors"
    run_cli(cli, "surgery", "--model", model_dir(d, True), "--input", d / "surgery.safetensors", "--out", out)
    want = read_safetensors(out)
    got = run_conditions(hylens.load(str(model_dir(d, True))), ref)
    assert set(want) == set(got)
    for name in sorted(want):
        assert_matches_tool(got[name], want[name], f"{d.name} {name} (Python vs hylens surgery)")


@pytest.mark.parametrize("bf16", [False, True], ids=["f32", "bf16"])
def test_state_patch_and_transplants(surgery, bf16):
    d, ref, manifest = surgery
    model = hylens.load(str(model_dir(d, bf16)))
    atol = {k: v["atol"] for k, v in manifest["tensors"].items() if "atol" in v}
    donor, host = ref["patch.donor.ids"], ref["patch.host.ids"]
    layers = ref["patch.layers"].tolist()
    T = len(host)
    donor_c, host_c = model.prefill(donor[:-1]), model.prefill(host[:-1])

    def final(cache):
        return model.forward([int(host[-1])], cache=cache, positions=[T - 1], last_only=True)[0]

    assert_close(final(host_c.clone()), ref["state_patch.control.logits_final"], atol["state_patch.control.logits_final"], "control")
    assert_close(final(hylens.patch_state(host_c, donor_c, layers)), ref["state_patch.logits_final"],
                 atol["state_patch.logits_final"], "state_patch")
    assert_close(final(hylens.patch_state(host_c, donor_c, layers, include_conv=False)),
                 ref["state_patch.ssm_only.logits_final"], atol["state_patch.ssm_only.logits_final"], "ssm_only")
    assert_close(final(hylens.patch_state(host_c, donor_c, None)), ref["state_patch.all.logits_final"],
                 atol["state_patch.all.logits_final"], "all layers")
    # the same through Model.transplant_state (exp32-B in one call)
    assert_close(model.transplant_state(donor, host, layers)[0], ref["state_patch.logits_final"],
                 atol["state_patch.logits_final"], "transplant_state")
    # the donor's and host's recurrent parts as the reference stores them
    for who, c in [("donor", donor_c), ("host", host_c)]:
        for l in layers:
            for part in ("conv", "state"):
                name = f"state_patch.{who}.cache.{l}.{part}"
                assert_close(getattr(c, part)(l)[0], ref[name], atol[name], name)
    # exp22 mixer transplants: recurrent mixers of patch.layers, then the attention layer
    rows, run = model.transplant_mixer(donor, host, layers, positions="last")
    assert_close(np.concatenate([rows[model.mixer_site(l)][0] for l in layers]), ref["patch.donor.mixer_out"],
                 atol["patch.donor.mixer_out"], "patch.donor.mixer_out")
    assert_close(run.logits[-1], ref["patch.host.logits_final"], atol["patch.host.logits_final"], "patch.host.logits_final")
    al = int(ref["patch.attn_layer"].reshape(-1)[0])
    rows, run = model.transplant_mixer(donor, host, [al], positions="last", channel="attention")
    assert_close(rows[model.mixer_site(al, "attention")][0, 0], ref["patch.attn.donor.mixer_out"],
                 atol["patch.attn.donor.mixer_out"], "patch.attn.donor.mixer_out")
    assert_close(run.logits[-1], ref["patch.attn.host.logits_final"], atol["patch.attn.host.logits_final"],
                 "patch.attn.host.logits_final")


def test_reference_caches_load(surgery, tmp_path):
    """load_cache reads the reference's ctx_a.cache.* (recurrent parts only) and they match a prefill."""
    d, ref, manifest = surgery
    model = hylens.load(str(model_dir(d, False)))
    loaded = model.load_cache(str(d / "surgery.safetensors"), prefix="ctx_a.cache.", allow_missing=True)
    mine = model.prefill(ref["ctx_a.ids"])
    for l in loaded.layers_with("recurrent"):
        for part in ("conv", "state"):
            name = f"ctx_a.cache.{l}.{part}"
            assert_bitwise(getattr(loaded, part)(l)[0], ref[name], name + " as loaded")
            assert_close(getattr(mine, part)(l)[0], ref[name], manifest["tensors"][name]["atol"], name)
    # save / load round trip is exact
    path = tmp_path / "c.safetensors"
    mine.save(str(path))
    assert model.load_cache(str(path)) == mine
