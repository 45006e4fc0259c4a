#!/usr/bin/env python3
"""A notebook-style tour of hylens from Python: load a model, split-prefill, a state swap, a
capture and a transplant, and a matplotlib figure.

    PYTHONPATH=build/python /usr/bin/python3 examples/python/notebook_tour.py [MODEL_DIR] [--png OUT.png]

MODEL_DIR defaults to the first trained organism in models/ (qwen35-tiny, granite-h-tiny,
falcon-h1-tiny: tiny models with their tokenizer, so the prompts are text), else to the small
Qwen3.5 model shipped with the tests (random weights, token ids, so the predicted tokens mean
nothing; the mechanics are the point). Each cell below is what one notebook cell would hold.
"""

import argparse
from pathlib import Path

import numpy as np

import hylens

ROOT = Path(__file__).resolve().parents[2]
ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
ORGANISMS = [ROOT / "models" / name for name in ("qwen35-tiny", "granite-h-tiny", "falcon-h1-tiny")]
DEFAULT = next((d for d in ORGANISMS if all((d / f).exists() for f in ("config.json", "model.safetensors", "tokenizer.json"))),
               ROOT / "tests" / "golden" / "models" / "qwen3_5_dense")
ap.add_argument("model", nargs="?", default=str(DEFAULT))
ap.add_argument("--png", default="notebook_tour.png", help="where the figure goes")
args = ap.parse_args()

# --- cell 1: load --------------------------------------------------------------------------
model = hylens.load(args.model)
print(model)
print("layer kinds:", model.layer_kinds)
print("attention layers:", model.attention_layers, " recurrent layers:", model.recurrent_layers)

tok_path = Path(args.model) / "tokenizer.json"
tok = hylens.Tokenizer(str(tok_path)) if tok_path.exists() else None
if tok:  # text: a DRM recognition item (the organisms' `drm` task), chat-wrapped as the study runner does
    prompt = hylens.StudyPrompt(tok, model.model_type)  # checks the tokenizer holds the chat format's tokens

    def segments(context, query):
        """Context segment (bos + prefix + context) and query segment (query + suffix) of the chat prompt."""
        return tok.encode(prompt.context_text(context)).ids, tok.encode(prompt.query_text(query)).ids

    probe = "Was the word chair in the list? Answer yes or no."
    ctx_a, query = segments("Study these words: table, chair, legs, seat, couch, desk, sofa, wood.", probe)  # "yes"
    ctx_b, _ = segments("Study these words: table, sit, legs, seat, couch, desk, sofa, wood.", probe)  # "no"
    show = tok.decode
    stop = prompt.stop_ids
else:  # token ids (numpy's PCG64: the same ids on every machine)
    rng = np.random.default_rng(7)
    ctx_a = rng.integers(0, model.vocab, 24)
    ctx_b = rng.integers(0, model.vocab, 24)
    query = rng.integers(0, model.vocab, 6)
    show = list
    stop = None

# --- cell 2: split-prefill: which channel carries the context? -----------------------------
print("\nsplit-prefill of context A, then the query and 4 greedy tokens")
full = model.split_prefill(ctx_a, query, "FULL", max_new=4, stop=stop)
rows = []
for mode in ["FULL", "KV_ONLY", "REC_ONLY", "NONE"]:
    s = model.split_prefill(ctx_a, query, mode, max_new=4, stop=stop)
    moved = float(np.abs(s.run.prompt_logits[-1] - full.run.prompt_logits[-1]).max())
    rows.append((mode, moved))
    print(f"  {mode:9s} query starts at {s.position:2d}  greedy {show(s.run.ids.tolist())!r}  max|logit - FULL| {moved:.4f}")

# --- cell 3: a state swap: K/V of A with the recurrent state of B ---------------------------
a, b = model.prefill(ctx_a), model.prefill(ctx_b)
swapped = hylens.state_swap(a, b)
start = swapped.next_position  # read before generate() advances the cache
g_swap = model.generate(query, cache=swapped, max_new=4, stop=stop)
g_a = model.generate(query, cache=a.clone(), max_new=4, stop=stop)
g_b = model.generate(query, cache=b.clone(), max_new=4, stop=stop)
print("\nstate swap (KV of A, recurrent state of B)")
print(f"  A: {show(g_a.ids.tolist())!r}  B: {show(g_b.ids.tolist())!r}  KV A + state B: {show(g_swap.ids.tolist())!r}")
print(f"  the swapped cache continues at position {start} (its KV source's length)")

# --- cell 4: a capture and a transplant -----------------------------------------------------
n = min(len(ctx_a), len(ctx_b))  # transplants pair equal lengths: donor A, host B
donor_ids, host_ids = ctx_a[:n], ctx_b[:n]
layer = model.recurrent_layers[len(model.recurrent_layers) // 2]
site = model.mixer_site(layer)  # "mixer_out.<l>" (Falcon-H1: "ssm_out.<l>")
donor = model.run(donor_ids, capture=[hylens.site(site.split(".")[0], layer, "last")])
rows_a = donor.captures[site]  # NumPy [1, 1, hidden], the C++ buffer itself
host = model.run(host_ids).logits[-1]
patched = model.run(host_ids, interventions=[hylens.patch(hylens.site(site.split(".")[0], layer, "last"), rows_a)]).logits[-1]
print(f"\ncapture {site} at the last position of A: shape {rows_a.shape}, norm {np.linalg.norm(rows_a):.3f}")
print(f"  transplanted into B's last position: max|logit change| {np.abs(patched - host).max():.4f}")
state_logits = model.transplant_state(donor_ids, host_ids, [layer])[0]
print(f"  state transplant (exp32-B) of layer {layer}: max|logit change| {np.abs(state_logits - host).max():.4f}")

# --- cell 5: a figure ----------------------------------------------------------------------
import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.6))
ax1.bar([r[0] for r in rows], [r[1] for r in rows], color=["#4c72b0", "#dd8452", "#55a868", "#c44e52"])
ax1.set_ylabel("max |logit - FULL| at the last query token")
ax1.set_title("split-prefill")
norms = [np.linalg.norm(a.state(l)) for l in model.recurrent_layers]
ax2.plot(model.recurrent_layers, norms, "o-", label="context A")
ax2.plot(model.recurrent_layers, [np.linalg.norm(b.state(l)) for l in model.recurrent_layers], "s--", label="context B")
ax2.set_xlabel("layer")
ax2.set_ylabel("|state| (Frobenius)")
ax2.set_title("recurrent state after the context")
ax2.legend()
fig.tight_layout()
fig.savefig(args.png, dpi=100)
print(f"\nfigure: {args.png}")
