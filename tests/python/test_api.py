"""The Python API beyond the golden numbers: bad input raises (never crashes), caches are
tied to their model type, surgery ops keep their inputs, captures and interventions round
trip, the tokenizer matches the Hugging Face reference ids and offsets."""

import copy
import json
import tarfile
import threading
import time

import numpy as np
import pytest

import hylens
from conftest import GOLDEN, SOURCE_DIR, assert_bitwise, assert_close

QWEN = GOLDEN / "models" / "qwen3_5_dense"
GRANITE_ALL_MAMBA = GOLDEN / "models" / "granite_h_allmamba"
FALCON = GOLDEN / "models" / "falcon_h1"
IDS = [5, 17, 42, 7, 99, 3, 250, 11, 64, 8]


@pytest.fixture(scope="module")
def qwen():
    return hylens.load(str(QWEN))


@pytest.fixture(scope="module")
def mamba():
    return hylens.load(str(GRANITE_ALL_MAMBA))


def test_model_description(qwen):
    assert qwen.model_type == "qwen3_5" and qwen.family == "qwen3_5"
    assert qwen.num_layers == 8 and qwen.config["num_layers"] == 8 and qwen.config["hidden"] == 64
    assert qwen.layer_kinds == ["gated_deltanet"] * 3 + ["attention"] + ["gated_deltanet"] * 3 + ["attention"]
    assert qwen.attention_layers == [3, 7] and qwen.recurrent_layers == [0, 1, 2, 4, 5, 6]
    assert qwen.channels[3] == ["kv"] and qwen.channels[0] == ["recurrent"]
    falcon = hylens.load(str(FALCON))
    assert set(falcon.layer_kinds) == {"attention+mamba2"}
    assert all(c == ["kv", "recurrent"] for c in falcon.channels)
    assert falcon.mixer_site(1) == "ssm_out.1" and falcon.mixer_site(1, "attention") == "attn_out.1"
    # a checkpoint loaded by one of its files is its folder: path was the file, and the studies'
    # default tokenizer (path / "tokenizer.json") was looked for beside it
    assert hylens.load(str(QWEN / "model.safetensors")).path == str(QWEN.resolve())
    assert qwen.path == str(QWEN.resolve())


@pytest.mark.parametrize("bad, exc", [
    ([1.0, 2.0], TypeError),                     # float ids
    (np.array([1, 2], dtype=np.float32), TypeError),
    (np.array([True, False]), TypeError),
    (["a", "b"], TypeError),
    ([], ValueError),                            # no ids
    ([[1, 2], [3]], ValueError),                 # ragged batch
    (np.zeros((1, 2, 3), dtype=np.int64), ValueError),
    (5, ValueError),                             # 0-D
    ([1, 320], ValueError),                      # id == vocab
    ([-1], ValueError),
    (np.array([2**63 + 5], dtype=np.uint64), ValueError),
    (None, TypeError),
])
def test_bad_ids_raise(qwen, bad, exc):
    with pytest.raises(exc):
        qwen.forward(bad)
    with pytest.raises(exc):
        qwen.prefill(bad)


def test_a_folder_that_cannot_be_made_is_an_oserror(qwen, tmp_path):
    """A study's out that cannot be created was a bare RuntimeError 'filesystem error'; it is
    the OSError subclass open() raises, with errno and the path."""
    tok = SOURCE_DIR / "models" / "qwen35-tiny" / "tokenizer.json"
    with pytest.raises(FileNotFoundError) as e:
        hylens.circuit_study(qwen, str(tok), "/proc/hylens_no_such/run", per_config=1)
    assert e.value.filename == "/proc/hylens_no_such/run" and e.value.errno == 2


def test_a_study_file_of_the_wrong_shape_is_a_format_error(tmp_path):
    """A run.json field of another type (status null) reached Python as a bare RuntimeError."""
    tok = SOURCE_DIR / "models" / "qwen35-tiny" / "tokenizer.json"
    model = hylens.load(str(SOURCE_DIR / "models" / "qwen35-tiny"))
    study = dict(conditions="FULL", items=1, seeds=[1], max_new=1, frames=False)
    for i in range(2):
        hylens.experiment(model, str(tok), ["drm"], tmp_path / f"s{i}", shard=f"{i}/2", **study)
    run = json.loads((tmp_path / "s0" / "run.json").read_text())
    run["study"]["shard"] = 0
    (tmp_path / "s0" / "run.json").write_text(json.dumps(run))
    with pytest.raises(hylens.FormatError, match="json"):
        hylens.merge([tmp_path / "s0", tmp_path / "s1"], tmp_path / "m")


def test_errors_keep_the_cpp_message_and_class(qwen):
    with pytest.raises(hylens.ShapeError, match=r"token id 320 at sequence 0, position 1 is outside the vocabulary \[0, 320\)"):
        qwen.forward([1, 320])
    assert issubclass(hylens.ShapeError, hylens.Error) and issubclass(hylens.Error, RuntimeError)
    assert all(issubclass(e, ValueError) for e in (hylens.Error, hylens.ShapeError, hylens.FormatError,
                                                    hylens.ConfigError, hylens.UnsupportedError))
    with pytest.raises(hylens.FormatError, match="no such model folder"):
        hylens.load("/nonexistent/model")
    with pytest.raises(ValueError, match="positions"):
        qwen.forward(IDS, positions=[0, 1])


def test_weights_read_into_memory_give_the_same_bits(qwen):
    in_memory = hylens.load(str(QWEN), mmap=False)
    assert_bitwise(in_memory.forward(IDS), qwen.forward(IDS), "logits in memory")
    with pytest.raises(TypeError):
        hylens.load(str(QWEN), False)  # keyword only: a bare bool says nothing at the call site


def test_a_nan_in_a_small_parameter_stops_the_load(tmp_path):
    """A_log = NaN in one layer: FormatError naming the tensor; check_finite=False loads it."""
    import json, shutil, struct
    shutil.copy(QWEN / "config.json", tmp_path / "config.json")
    data = bytearray((QWEN / "model.safetensors").read_bytes())
    n = struct.unpack("<Q", data[:8])[0]
    name = "model.language_model.layers.1.linear_attn.A_log"
    start = 8 + n + json.loads(data[8:8 + n])[name]["data_offsets"][0]
    data[start:start + 4] = struct.pack("<f", float("nan"))
    (tmp_path / "model.safetensors").write_bytes(bytes(data))
    with pytest.raises(hylens.FormatError, match=f"tensor '{name}' \\[4\\] holds nan at flat index 0"):
        hylens.load(str(tmp_path))
    assert hylens.load(str(tmp_path), check_finite=False).config["vocab"] == 320


def test_caches_are_tied_to_their_model_type(qwen, mamba):
    qc, mc = qwen.prefill(IDS), mamba.prefill(IDS)
    with pytest.raises(ValueError, match="belongs to a granitemoehybrid model"):
        qwen.forward([1], cache=mc)
    with pytest.raises(ValueError, match="belongs to a granitemoehybrid model"):
        qwen.generate([1], cache=mc, max_new=1)
    with pytest.raises(ValueError, match="paired with a cache of a qwen3_5 model"):
        hylens.state_swap(qc, mc)
    with pytest.raises(TypeError, match="hylens.Cache"):
        qwen.forward([1], cache="not a cache")
    # same type, other shapes (batch) is the C++ ShapeError
    with pytest.raises(ValueError):
        qwen.forward([[1], [2]], cache=qc)


def test_channel_ops_on_a_model_without_the_channel_raise(mamba):
    c = mamba.prefill(IDS)
    for op in (lambda: c.keep_only("kv"), lambda: c.drop("kv"), lambda: c.mask_state("kv", None, [0])):
        with pytest.raises(ValueError, match="no attention layers, so no 'kv' channel"):
            op()
    with pytest.raises(ValueError, match="has no attention"):
        c.k(0)
    with pytest.raises(ValueError, match="unknown channel"):
        c.keep_only("kvv")
    # the recurrent channel is there; REC_ONLY is FULL on an all-recurrent model (docs/cache_surgery.md)
    assert c.keep_only("recurrent") == c
    full = hylens.apply_split_mode(c, "FULL")
    rec = hylens.apply_split_mode(c, "REC_ONLY")
    assert full[0] == c and rec[1] == 0


def test_surgery_ops_return_new_caches_and_keep_inputs(qwen):
    a, b = qwen.prefill(IDS), qwen.prefill(IDS[::-1])
    a0, b0 = a.clone(), copy.deepcopy(b)
    kv = a.keep_only("kv")
    assert np.all(kv.state(0) == 0) and np.all(kv.conv(0) == 0) and kv.kv_len == len(IDS)
    rec = a.keep_only("recurrent")
    assert rec.kv_len == 0 and np.array_equal(rec.state(0), a.state(0))
    sw = hylens.state_swap(a, b)
    assert np.array_equal(sw.k(3), a.k(3)) and np.array_equal(sw.state(4), b.state(4))
    sw2 = hylens.state_swap(a, b, layers_rec=[0])
    assert np.array_equal(sw2.state(0), b.state(0)) and np.array_equal(sw2.state(1), a.state(1))
    m = a.mask_state("ssm", [0], [1], value=2.5)
    assert np.all(m.state(0)[0, 1] == 2.5) and np.array_equal(m.state(0)[0, 0], a.state(0)[0, 0])
    ph = hylens.patch_heads("kv", a, b, [3], [0])
    assert np.array_equal(ph.k(3)[0, 0], b.k(3)[0, 0]) and np.array_equal(ph.k(3)[0, 1], a.k(3)[0, 1])
    d = a.drop("recurrent", [1], ssm_only=True)
    assert np.all(d.state(1) == 0) and np.array_equal(d.conv(1), a.conv(1))
    assert a == a0 and b == b0 and a != b
    assert a.diff(b)["max"] > 0 and a.diff(a0)["max"] == 0
    with pytest.raises(ValueError, match="out of range"):
        a.keep_only("kv", [8])
    with pytest.raises(ValueError, match="negative index"):
        a.keep_only("kv", [-1])
    with pytest.raises(ValueError, match="out of range"):
        a.mask_state("ssm", [0], [99])
    with pytest.raises(ValueError, match="name the part"):
        a.mask_state("recurrent", [0], [0])


def test_set_state_writes_exactly_and_checks_shapes(qwen):
    c = qwen.prefill(IDS)
    s = c.state(0)
    c2 = c.clone()
    c2.set_state(0, np.zeros_like(s))
    assert np.all(c2.state(0) == 0) and c2 == c.drop("ssm", [0])
    with pytest.raises(ValueError, match="the cache needs"):
        c2.set_state(0, s[0])
    with pytest.raises(TypeError, match="floating-point"):
        c2.set_conv(0, c.conv(0).astype(np.int32))


def test_closed_cache_raises(qwen):
    c = qwen.prefill(IDS)
    with c as same:
        assert same is c
        c.close()  # closed inside the block: its end (and a second close) do nothing
    assert c.closed
    c.close()
    for op in (lambda: qwen.forward([1], cache=c), lambda: c.k(3), lambda: c.clone(), lambda: c.keep_only("kv"),
               lambda: hylens.state_swap(c, qwen.prefill(IDS)), lambda: c.save("/tmp/x.safetensors"), lambda: c.batch):
        with pytest.raises(ValueError, match="closed"):
            op()
    assert "closed" in repr(c)
    # the stack type outlives close(): a closed Granite cache said 'qwen3_5'
    granite = hylens.load(str(GOLDEN / "models" / "granite_h_dense")).prefill(IDS)
    granite.close()
    assert granite.family == "granite4h" and granite.model_type == "granitemoehybrid"


def test_captures_own_their_buffers_and_interventions_apply(qwen):
    r = qwen.run(IDS, capture=["mixer_out.3", hylens.site("resid_post", 2, "last"), ("attn_probs", 7, [-1])])
    cap = r.captures["mixer_out.3"]
    assert cap.shape == (1, len(IDS), 64) and cap.dtype == np.float32
    assert not cap.flags["OWNDATA"] and cap.base is not None  # a view of the C++ buffer
    assert r.captures["resid_post.2"].shape == (1, 1, 64)
    assert r.captures["attn_probs.7"].shape == (1, 4, 1, len(IDS))
    assert_close(r.captures["attn_probs.7"].sum(-1), np.ones((1, 4, 1)), 1e-5, "attention rows sum to 1")
    del r  # the arrays outlive their RunResult
    assert np.isfinite(cap).all()
    # self-patch from the own capture is bitwise the plain run (T2)
    plain = qwen.forward(IDS)
    same = qwen.run(IDS, interventions=[hylens.patch("mixer_out.3", {"mixer_out.3": cap})]).logits
    assert_bitwise(same, plain, "self-patch")
    # a zero ablation changes the logits, and equals patching zeros
    z = qwen.run(IDS, interventions=[hylens.zero("mixer_out", [3])]).logits
    z2 = qwen.run(IDS, interventions=[hylens.patch("mixer_out.3", np.zeros_like(cap))]).logits
    assert not np.array_equal(z, plain)
    assert_bitwise(z, z2, "zero vs patching zeros")
    # donor rows of the wrong width or dtype raise
    with pytest.raises(ValueError):
        qwen.run(IDS, interventions=[hylens.patch("mixer_out.3", np.zeros((1, len(IDS), 63), np.float32))])
    with pytest.raises(TypeError):
        hylens.patch("mixer_out.3", np.zeros((1, len(IDS), 64), np.int64))
    # the right count of values in another layout (a transpose) was patched silently
    n = len(IDS)
    with pytest.raises(hylens.ShapeError, match=r"donor array of shape \[1, 64, %d\], expected \[1, %d, 64\]" % (n, n)):
        qwen.run(IDS, interventions=[hylens.patch("mixer_out.3", np.zeros((1, 64, n), np.float32))])
    with pytest.raises(hylens.ShapeError, match="donor array of shape"):
        qwen.run(IDS, interventions=[hylens.patch("mixer_out.3", np.zeros((64, n), np.float32))])
    with pytest.raises(hylens.ShapeError, match="donor array of shape"):
        qwen.run(IDS, interventions=[hylens.patch("mixer_out.3", np.zeros((1, 1, n, 64), np.float32))])
    v7 = qwen.run(IDS, capture=["v.7"]).captures["v.7"]  # [1, n, Dv]
    assert_bitwise(qwen.run(IDS, interventions=[hylens.proj_patch(7, "v", "all", v7)]).logits, plain, "v self-patch")
    with pytest.raises(hylens.ShapeError, match="donor array of shape"):
        qwen.run(IDS, interventions=[hylens.proj_patch(7, "v", "all", np.ascontiguousarray(v7.transpose(0, 2, 1)))])
    # [|P|, D] and flat arrays of the right count are the same rows
    assert_bitwise(qwen.run(IDS, interventions=[hylens.patch("mixer_out.3", np.zeros((n, 64), np.float32))]).logits, z2, "2-D")
    assert_bitwise(qwen.run(IDS, interventions=[hylens.patch("mixer_out.3", np.zeros(n * 64, np.float32))]).logits, z2, "flat")
    with pytest.raises(ValueError, match="unknown site"):
        qwen.run(IDS, capture=["mixer_outt.3"])
    with pytest.raises(ValueError, match="observed after its use"):
        qwen.run(IDS, interventions=[hylens.zero("attn_probs", [3])])
    with pytest.raises(ValueError):
        qwen.run(IDS, capture=["mixer_out.30"])
    # a site the layer does not have acted on nothing (q of DeltaNet layer 0); now an error,
    # raised before the forward, so the cache is left as it was
    c = qwen.prefill(IDS)
    with pytest.raises(ValueError, match="has no site q"):
        qwen.run(IDS, cache=c, interventions=[hylens.zero("q", [0])])
    assert c.next_position == len(IDS)
    # -1 (no layer) on a decoder-layer site says so (it read "layer none is outside the model's 4 layers")
    with pytest.raises(ValueError, match="mixer_out is a site of a decoder layer: give one of 0-%d" % (qwen.num_layers - 1)):
        qwen.run(IDS, interventions=[hylens.zero("mixer_out", -1)])
    with pytest.raises(ValueError, match="mixer_out is a site of a decoder layer"):
        qwen.run(IDS, capture=[hylens.site("mixer_out", -1)])
    # a site tuple must start with the site's name (it was pybind11's "Unable to cast")
    with pytest.raises(TypeError, match="starts with a site name such as 'mixer_out', not 3"):
        qwen.run(IDS, capture=[(3, 1)])
    # non-finite values are refused where they are given; NumPy integer arrays are index lists
    with pytest.raises(ValueError, match="value 5 is nan"):
        hylens.mean_ablate("mixer_out", [3], np.where(np.arange(64) == 5, np.nan, 0.0).astype(np.float32))
    assert_bitwise(qwen.run(IDS, interventions=[hylens.zero("mixer_out", np.array([3]))]).logits, z, "layers as an array")
    assert_bitwise(qwen.forward(IDS, positions=np.arange(len(IDS))), plain, "positions as an array")
    # head_zero equals zeroing that head's columns of head_out
    hz = qwen.run(IDS, interventions=[hylens.head_zero(3, [1])], capture=["head_out.3"])
    assert np.all(hz.captures["head_out.3"][..., 32:64] == 0)


def test_channel_mask_writes_the_listed_channels_only(qwen):
    cap = qwen.run(IDS, capture=["mixer_out.3"]).captures["mixer_out.3"]
    ch = [0, 5, 63]
    masked = cap.copy()
    masked[..., ch] = 0.0
    z = qwen.run(IDS, interventions=[hylens.channel_mask("mixer_out", [3], ch)]).logits
    assert_bitwise(z, qwen.run(IDS, interventions=[hylens.patch("mixer_out.3", masked)]).logits, "zero fill")
    mu = np.linspace(-1.0, 1.0, 64, dtype=np.float32)
    masked[..., ch] = mu[ch]
    m = qwen.run(IDS, interventions=[hylens.channel_mask("mixer_out", [3], ch, fill="mean", mean=mu)]).logits
    assert_bitwise(m, qwen.run(IDS, interventions=[hylens.patch("mixer_out.3", masked)]).logits, "mean fill")
    # a plain list of D numbers is the one vector its array is (it was read as D vectors of one value)
    as_list = hylens.channel_mask("mixer_out", [3], ch, fill="mean", mean=[float(x) for x in mu])
    assert_bitwise(qwen.run(IDS, interventions=[as_list]).logits, m, "mean as a list")
    as_list = hylens.mean_ablate("mixer_out", [3], mu.tolist())
    assert_bitwise(qwen.run(IDS, interventions=[as_list]).logits,
                   qwen.run(IDS, interventions=[hylens.mean_ablate("mixer_out", [3], mu)]).logits, "mean_ablate list")
    two = hylens.mean_ablate("mixer_out", [2, 3], [mu, mu])  # a list of arrays: one per layer
    assert_bitwise(qwen.run(IDS, interventions=[two]).logits,
                   qwen.run(IDS, interventions=[hylens.mean_ablate("mixer_out", [2, 3], mu)]).logits, "one per layer")
    # an argument the fill does not read is an error (mean= with fill='zero' masked with zeros)
    with pytest.raises(ValueError, match="does not use mean="):
        hylens.channel_mask("mixer_out", [3], ch, mean=mu)
    with pytest.raises(ValueError, match="does not use tables="):
        hylens.channel_mask("mixer_out", [3], ch, fill="mean", mean=mu, tables={1: mu})
    with pytest.raises(ValueError, match="channel 64 out of 64"):
        qwen.run(IDS, interventions=[hylens.channel_mask("mixer_out", [3], [64])])


def test_layers_and_counts_refuse_bools_and_negatives(qwen):
    c = qwen.prefill(IDS)
    # pybind11 took True as 1: cache.k(True) read layer 1's keys
    for op in (lambda: c.k(True), lambda: c.state(False), lambda: hylens.head_zero(True, [0]),
               lambda: hylens.site("resid_post", True), lambda: hylens.truncate_after(True),
               lambda: qwen.mixer_site(True), lambda: hylens.state_reset_every([0], True), lambda: c.k(1.0),
               # counts too: generate(max_new=True) generated one token
               lambda: qwen.generate(IDS, max_new=True), lambda: qwen.new_cache(True),
               lambda: qwen.split_prefill(IDS, IDS, "full", max_new=True), lambda: qwen.state_after(IDS, True),
               lambda: setattr(c, "tokens_seen", True), lambda: qwen.generate(IDS, max_new=-1),
               lambda: qwen.generate(IDS, max_new=2.0),
               # NumPy's bools and bools in id lists: [1, True] ran as [1, 1], np.array([True, False])
               # as layers 1 and 0
               lambda: qwen.forward([1, True]), lambda: qwen.forward([[1, 2], [3, np.True_]]),
               lambda: c.keep_only("kv", layers=np.array([True, False])), lambda: c.k(np.True_),
               lambda: hylens.Positions.at([True]), lambda: hylens.Positions.range(True, 3),
               lambda: qwen.generate(IDS, max_new=np.True_)):
        with pytest.raises(TypeError):
            op()
    assert hylens.Positions.at(np.array([0, -1])).resolve(4) == [0, 3]
    assert hylens.Positions.range(np.int64(1), -1).resolve(4) == [1, 2]
    assert qwen.generate(IDS, max_new=np.int64(2)).ids.shape == (2,)  # a NumPy integer is a count
    # -1 is the layer of embed and final_norm, not a decoder layer of a head or a projection
    with pytest.raises(hylens.ShapeError, match="layer -1 is negative"):
        hylens.head_zero(-1, [0])
    with pytest.raises(hylens.ShapeError, match="layer -1 is negative"):
        hylens.proj_patch(-1, "q", "last", np.zeros(64, np.float32))
    with pytest.raises(ValueError, match="at least 1, got -2"):
        hylens.state_reset_every([0], -2)
    assert hylens.site("resid_post", np.int64(2)).layer == 2
    with pytest.raises(ValueError, match="past the largest position"):
        c.tokens_seen = 2**63
    # forward past 2^63 - 1 wrapped an all-Mamba cache's count into negative positions
    mamba = hylens.load(str(GOLDEN / "models" / "granite_h_allmamba"))
    m = mamba.new_cache()
    m.tokens_seen = 2**63 - 2
    mamba.forward(np.array([1]), cache=m)
    assert m.tokens_seen == 2**63 - 1
    with pytest.raises(ValueError, match="pass the largest position"):
        mamba.forward(np.array([1]), cache=m)
    assert m.tokens_seen == 2**63 - 1  # refused before any layer took the token
    # a batch whose cache size wraps around made a small buffer that later reads ran past
    for batch in (2**60, 2**62 + 1):
        with pytest.raises(ValueError, match="larger than memory can address"):
            qwen.new_cache(batch)
    with pytest.raises(ValueError, match="no layers given"):
        qwen.logit_lens(IDS, [])
    # a layer listed twice: the message named a capture 'resid_post.1' the caller never listed
    with pytest.raises(ValueError, match=r"\[logit_lens\] layer 1 is listed twice"):
        qwen.logit_lens(IDS, [1, 1])
    with pytest.raises(ValueError, match=r"\[transplant_mixer\] layer 0 is listed twice"):
        qwen.transplant_mixer(IDS, IDS, [0, 0])


def test_generate_batch_and_stop(qwen):
    g = qwen.generate(np.array([IDS, IDS[::-1]]), max_new=3)
    assert g.ids.shape == (2, 3) and g.prompt_logits.shape == (2, len(IDS), 320) and g.step_logits.shape == (2, 2, 320)
    single = qwen.generate(IDS, max_new=3)
    np.testing.assert_array_equal(single.ids, g.ids[0])
    first = int(single.ids[0])
    stopped = qwen.generate(IDS, max_new=5, stop=first)
    assert stopped.ids.tolist() == [first] and stopped.lengths == 1
    assert single.lengths == 3 and g.lengths.tolist() == [3, 3]
    # in a batch, each row's length ends at its own first stop id; the batch when all have one
    free = qwen.generate(np.array([IDS, IDS[::-1]]), max_new=10)
    stops = [int(free.ids[0, 1]), int(free.ids[1, 3])]
    want = [next(i + 1 for i, t in enumerate(row) if t in stops) for row in free.ids.tolist()]
    both = qwen.generate(np.array([IDS, IDS[::-1]]), max_new=10, stop=stops)
    assert both.lengths.tolist() == want and both.ids.shape == (2, max(want))
    np.testing.assert_array_equal(both.ids, free.ids[:, :max(want)])
    with pytest.raises(hylens.ShapeError, match="stop id 320 is outside the model's vocabulary of 320"):
        qwen.generate(IDS, max_new=2, stop=[first, 320])  # it could never match: the run went to max_new
    # generate continues its cache
    assert single.cache.next_position == len(IDS) + 2


def test_gil_is_released_during_a_forward(qwen):
    """A Python thread keeps running while another thread is inside a forward: with the GIL
    held it could not take a single step in the middle of that call."""
    ids = np.arange(2000) % qwen.vocab
    stamps, window = [], []
    done = threading.Event()

    def spin():
        while not done.is_set():
            stamps.append(time.perf_counter())

    t = threading.Thread(target=spin)
    t.start()
    try:
        time.sleep(0.01)
        t0 = time.perf_counter()
        qwen.forward(ids)
        t1 = time.perf_counter()
        window = (t0 + 0.1 * (t1 - t0), t1 - 0.1 * (t1 - t0))
    finally:
        done.set()
        t.join()
    inside = [x for x in stamps if window[0] < x < window[1]]
    assert inside, "no Python step ran while the forward was running: the GIL was held"


def test_a_cache_under_a_forward_refuses_every_other_use(qwen):
    """While one thread runs a forward on a cache, another thread's reads, writes and close of
    that cache raise RuntimeError (close freed the memory under the forward: a segfault; reset
    moved the position under it)."""
    ids = np.arange(6000) % qwen.vocab
    want = qwen.forward(ids, cache=qwen.prefill(IDS))
    ops = {"next_position": lambda c: c.next_position, "state": lambda c: c.state(0), "clone": lambda c: c.clone(),
           "reset": lambda c: c.reset(), "set_state": lambda c: c.set_state(0, np.zeros(c.state(0).shape, np.float32)),
           "tokens_seen": lambda c: setattr(c, "tokens_seen", 3), "close": lambda c: c.close()}
    for _ in range(5):  # a forward can end before the first op; then try again
        c, got = qwen.prefill(IDS), []
        t = threading.Thread(target=lambda: got.append(qwen.forward(ids, cache=c)))
        t.start()
        busy = False
        while t.is_alive() and not busy:
            try:
                c.next_position
            except RuntimeError:
                busy = True
        refused, shown = set(), ""
        if busy:
            shown = repr(c)  # repr never raises (a traceback or a debugger prints it)
            for name, op in ops.items():
                try:
                    op(c)
                except RuntimeError as e:
                    assert "in use by another thread" in str(e)
                    refused.add(name)
        t.join()
        assert_bitwise(got[0], want, "the forward under the other thread's attempts")
        if refused == set(ops):
            assert shown == "<hylens.Cache qwen3_5 (in use by another thread)>"
            return
    pytest.fail("no attempt saw every op refused while the forward ran")


def test_two_threads_run_forwards_at_once(qwen):
    """Two threads run forwards at once on their own caches (results equal to serial runs)."""
    ids = np.array(IDS * 6)
    want = qwen.forward(ids)
    got = [None, None]

    def work(i):
        got[i] = qwen.forward(ids)

    ts = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    for g in got:
        assert_bitwise(g, want, "threaded forward")


def test_tokenizer_ids_offsets_and_chat(tmp_path):
    with tarfile.open(SOURCE_DIR / "tests" / "data" / "tokenizer" / "qwen3.tar.xz") as t:
        t.extractall(tmp_path, filter="data") if hasattr(tarfile, "data_filter") else t.extractall(tmp_path)
    with tarfile.open(SOURCE_DIR / "tests" / "data" / "tokenizer" / "corpus.tar.xz") as t:
        t.extractall(tmp_path, filter="data") if hasattr(tarfile, "data_filter") else t.extractall(tmp_path)
    tok = hylens.Tokenizer(str(tmp_path / "qwen3" / "tokenizer.json"))
    lines = (tmp_path / "corpus.txt").read_bytes().split(b"\n")
    expected = (tmp_path / "qwen3" / "expected.txt").read_text().split("\n")
    checked = 0
    for raw, exp in list(zip(lines, expected))[:300]:
        enc = tok.encode(raw)  # bytes: invalid UTF-8 is repaired as the reference does
        want = [tuple(map(int, t.split(":"))) for t in exp.split()]
        assert [(i, b, e) for i, (b, e) in zip(enc.ids, enc.offsets)] == want, raw
        checked += 1
    assert checked == 300
    assert tok.decode(tok.encode_ids("Hello world")) == "Hello world"
    with pytest.raises(ValueError):
        tok.decode([-1])
    assert tok.id_to_token(1) is not None and tok.id_to_token(-1) is None
    with pytest.raises(TypeError):
        tok.id_to_token(True)  # read as id 1
    p = hylens.wrap_chat("qwen35", "What is 2+2?", prefill="The answer")
    assert p.text.startswith("<|im_start|>user\n") and p.text[p.user[0]:p.user[1]] == "What is 2+2?"
    enc = tok.encode_chat(p)
    assert enc.ids[0] == tok.token_to_id("<|im_start|>")
    user_tokens = enc.positions(p.user)
    assert tok.decode([enc.ids[i] for i in user_tokens]) == "What is 2+2?"
    with pytest.raises(ValueError, match="chat family"):
        hylens.wrap_chat("llama", "x")


def test_logit_lens_is_the_head_on_the_residual(qwen):
    lens = qwen.logit_lens(IDS, [2, 7], positions="last")
    assert lens.shape == (2, 1, 320)
    # at the last layer the lens is the model's own logits (same head, same rows)
    assert_close(lens[1, 0], qwen.forward(IDS)[-1], 1e-5 * max(1.0, float(np.abs(lens).max())), "lens at the last layer")
    resid = qwen.run(IDS, capture=["resid_post.2"]).captures["resid_post.2"]
    assert_bitwise(qwen.head(resid[0][-1:]), lens[0], "head(resid_post.2) vs logit_lens")
    with pytest.raises(ValueError, match="residual rows"):
        qwen.head(np.zeros((3, 63), np.float32))


def test_bf16_activations_switch_rounds_bf16_checkpoints_only(qwen):
    """The process-wide switch: off by default; on, a bf16 checkpoint's logits move by the
    rounding (tests/organisms checks the values against torch) and a float32 one's do not."""
    bf16 = hylens.load(str(QWEN / "model-bf16"))
    assert hylens.bf16_activations() is False
    assert hylens.simd_level() in ("baseline", "avx2", "avx512", "avx512bf16")
    base_bf16, base_f32 = bf16.forward(IDS), qwen.forward(IDS)
    hylens.set_bf16_activations(True)
    try:
        assert hylens.bf16_activations() is True
        rounded_bf16, rounded_f32 = bf16.forward(IDS), qwen.forward(IDS)
    finally:
        hylens.set_bf16_activations(False)
    assert hylens.bf16_activations() is False
    assert_bitwise(rounded_f32, base_f32, "float32 checkpoint with the switch on")
    moved = np.abs(rounded_bf16 - base_bf16).max()
    assert 0 < moved < 0.05 * np.abs(base_bf16).max()
    assert_bitwise(bf16.forward(IDS), base_bf16, "bf16 checkpoint with the switch off again")


def _damaged_copy(tmp_path, tensor):
    """A copy of the golden Qwen3.5 model with one NaN in `tensor` (a large matrix: the load scan
    does not read it, as docs/models.md says)."""
    import json
    import shutil
    import struct

    src = GOLDEN / "models" / "qwen3_5_dense"
    dst = tmp_path / "damaged"
    dst.mkdir()
    shutil.copy(src / "config.json", dst / "config.json")
    data = bytearray((src / "model.safetensors").read_bytes())
    (n,) = struct.unpack("<Q", data[:8])
    begin = 8 + n + json.loads(data[8 : 8 + n])[tensor]["data_offsets"][0]
    data[begin : begin + 4] = struct.pack("<f", float("nan"))
    (dst / "model.safetensors").write_bytes(bytes(data))
    return dst


def test_a_nan_stops_every_forward_unless_turned_off(tmp_path):
    """Model.check_finite (on by default, as in the tool): forward, prefill, generate,
    split_prefill and run stop at the first NaN with a NonFiniteError naming the layer and site;
    they returned NaN logits and states silently. Off, the NaN is the caller's to study."""
    folder = _damaged_copy(tmp_path, "model.language_model.layers.2.mlp.down_proj.weight")
    m = hylens.load(str(folder))
    assert m.check_finite is True
    ids = [1, 2, 3, 4]
    calls = (lambda: m.forward(ids), lambda: m.prefill(ids), lambda: m.generate(ids, max_new=2),
             lambda: m.split_prefill(ids, [5, 6], "KV_ONLY", max_new=1), lambda: m.run(ids, capture=["mixer_out.1"]))
    for call in calls:
        with pytest.raises(hylens.NonFiniteError, match="layer 2"):
            call()
    assert issubclass(hylens.NonFiniteError, hylens.Error)
    m.check_finite = False
    logits = m.forward(ids)
    assert np.isnan(logits).any()  # the damage, now visible to the caller who asked for it
    m.check_finite = True
    with pytest.raises(hylens.NonFiniteError):
        m.forward(ids)
    # a cache left part-updated by the failing forward says so, and is refused until reset
    c = m.new_cache()
    assert c.torn is None
    with pytest.raises(hylens.NonFiniteError):
        m.forward(ids, cache=c)
    assert "layer 2" in c.torn
    with pytest.raises(hylens.Error, match="part-updated"):
        m.forward(ids, cache=c)
    c.reset()
    assert c.torn is None and c.next_position == 0
    assert hylens.load(str(folder), check_finite=False).check_finite is False
    healthy = hylens.load(str(GOLDEN / "models" / "qwen3_5_dense"))
    assert np.isfinite(healthy.forward(ids)).all()


def test_empty_decode_and_a_cache_file_without_the_prefix(qwen, tmp_path):
    tok = hylens.Tokenizer(str(SOURCE_DIR / "models" / "qwen35-tiny" / "tokenizer.json"))
    assert tok.decode([]) == "" and tok.decode(np.zeros(0, dtype=np.int64)) == ""  # raised 'no token ids'
    g = qwen.generate([1, 2, 3], max_new=0)
    assert tok.decode(g.ids) == ""
    with pytest.raises(ValueError, match="got 0-D"):
        tok.decode("")  # text is not ids
    for batch in (np.zeros((1, 0), dtype=np.int64), [[]], [[1, 2], [3, 4]]):  # [1, 0] said 'no token ids'
        with pytest.raises(ValueError, match="one sequence \\(1-D ids\\) at a time"):
            tok.decode(batch)
    # allow_missing reads part of a cache; none of it (a wrong prefix) returned a fresh cache
    qwen.prefill([1, 2, 3]).save(str(tmp_path / "c.safetensors"), prefix="x.")
    with pytest.raises(hylens.FormatError, match="no tensor of this cache under 'cache.'"):
        qwen.load_cache(str(tmp_path / "c.safetensors"), allow_missing=True)
    assert qwen.load_cache(str(tmp_path / "c.safetensors"), prefix="x.").next_position == 3


def test_interventions_and_surrogate_tables_of_the_wrong_type(qwen):
    """They said "'int' object is not iterable"; now the argument and what it must be."""
    with pytest.raises(ValueError, match="site 'mixer_out.3.5': expected <site>.<layer>"):  # said 'mixer_out.3'
        qwen.run([1, 2, 3], capture=["mixer_out.3.5"])
    with pytest.raises(TypeError, match="interventions: a hylens.Intervention or a list of them .*got int"):
        qwen.run([1, 2, 3], interventions=5)
    with pytest.raises(TypeError, match="interventions: a hylens.Intervention or a list of them .*got str"):
        qwen.run([1, 2, 3], interventions="zero")
    row = np.zeros(qwen.config["hidden"], np.float32)
    for tables, got in ((5, "int"), ([5], "int"), ("table", "str")):
        with pytest.raises(TypeError, match=f"surrogate: tables must be a dict .* got {got}"):
            hylens.surrogate("mixer_out", [0], tables, row)
    with pytest.raises(TypeError, match="surrogate: fallback is the row .* got None"):
        hylens.surrogate("mixer_out", [0], {1: row}, None)
    # a table as a tuple of dicts (one per layer) and as a generator of them
    ones = np.ones_like(row)
    for tables in (({1: ones},), ({1: ones} for _ in range(1))):
        got = qwen.run([1, 2, 3], capture=["mixer_out.0"],
                       interventions=[hylens.surrogate("mixer_out", [0], tables, row)]).captures["mixer_out.0"]
        assert (got[0, 0] == 1).all() and (got[0, 1:] == 0).all()  # token 1 from the table, the others the fallback
