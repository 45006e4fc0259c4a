# SPDX-License-Identifier: Apache-2.0
"""Reference logits of an organism in the opt-in arithmetic of hylens' bf16 activations
(include/hylens/core/precision.hpp), for tests/organisms: every weight rounded to bf16 (what a
bf16 copy of the checkpoint holds), and the input of every projection (each nn.Linear and the
unembedding) rounded to bf16 before it is multiplied; everything else, and the products and
sums, in float64. The prompts are those of the organism's equality test
(tests/organisms/data/<name>/reference_logits.safetensors).

    python3 training/bf16_reference.py models/falcon-h1-tiny [tests/organisms/data/falcon-h1-tiny]

Writes bf16_activations_logits.safetensors beside the equality test's data: prompt.<i>.logits
for every prompt of it; `float32_vs_float64`, the largest distance of the same arithmetic run in
float32 (float32 sums of the bf16 products, as hylens does) to the float64 one; and
`float32_rows_within_atol`, the fraction of all prompts' rows (token positions) where that
float32 run is within 4 x the organism's float32 atol of the float64 one.

Why two numbers: float32 and float64 sums round an activation to different bf16 values when it
lies within their difference of a rounding tie (a "flip", one bf16 ulp, 2^-8 relative). Flips are
rare, but a recurrent state carries one to every later position, so the largest distance is the
size of the rounding itself (a few 1e-2 on logits of size ~30), while most rows (those before
any flip) agree to float32 precision. Without rounding no row does.
"""
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
import families  # noqa: E402
import st_io  # noqa: E402


def to_bf16_values(t):
    """t rounded to bf16 (to nearest even) and back, in t's dtype."""
    return t.float().to(torch.bfloat16).to(t.dtype)


class RoundedInputs:
    """Rounds the input of every nn.Linear of a module to bf16 while active."""

    def __init__(self, model):
        self.handles = [m.register_forward_pre_hook(lambda _m, args: (to_bf16_values(args[0]),))
                        for m in model.modules() if isinstance(m, torch.nn.Linear)]

    def remove(self):
        for h in self.handles:
            h.remove()


def rounded_forward(model, ids):
    """CausalLM.forward with the unembedding's input rounded too (it is a matmul, not an nn.Linear)."""
    out = to_bf16_values(model.hidden(ids))
    W = model.model.embed_tokens.weight if model.tied else model.lm_head.weight
    logits = out @ W.t()
    c = model.c
    if model.family == "granite_h":
        logits = logits / c.get("logits_scaling", 1.0)
    elif model.family == "falcon_h1":
        logits = logits * c.get("lm_head_multiplier", 1.0)
    return logits


def main():
    model_dir = sys.argv[1]
    name = os.path.basename(os.path.normpath(model_dir))
    data_dir = sys.argv[2] if len(sys.argv) > 2 else os.path.join(os.path.dirname(__file__), "..", "tests", "organisms",
                                                                  "data", name)
    torch.set_num_threads(1)
    cfg = json.load(open(os.path.join(model_dir, "config.json")))
    family = json.load(open(os.path.join(data_dir, "prompts.json")))["family"]
    sd = {k: to_bf16_values(v) for k, v in st_io.load(os.path.join(model_dir, "model.safetensors")).items()}
    models = {}
    for dtype in (torch.float64, torch.float32):
        m = families.CausalLM(family, cfg).to(dtype)
        m.load_state_dict({k: v.to(dtype) for k, v in sd.items()})
        m.eval()
        models[dtype] = m
    ref = st_io.load(os.path.join(data_dir, "reference_logits.safetensors"))
    atol = ref["atol"].item()
    out, d32, i, rows, within = {}, 0.0, 0, 0, 0
    with torch.no_grad():
        hooks = [RoundedInputs(m) for m in models.values()]
        while f"prompt.{i}.ids" in ref:
            ids = ref[f"prompt.{i}.ids"][None]
            l64 = rounded_forward(models[torch.float64], ids)[0]
            l32 = rounded_forward(models[torch.float32], ids)[0]
            row = (l32.double() - l64).abs().max(dim=1).values
            d32 = max(d32, row.max().item())
            rows += row.numel()
            within += int((row <= 4 * atol).sum())
            out[f"prompt.{i}.logits"] = l64.float()
            i += 1
        for h in hooks:
            h.remove()
    out["float32_vs_float64"] = torch.tensor([d32], dtype=torch.float32)
    out["float32_rows_within_atol"] = torch.tensor([within / rows], dtype=torch.float32)
    st_io.save(out, os.path.join(data_dir, "bf16_activations_logits.safetensors"),
               metadata={"source": "training/bf16_reference.py: torch float64 forward of the bf16-rounded weights, "
                                   "the input of every projection rounded to bf16",
                         "float32_vs_float64": f"{d32:.3e}", "float32_rows_within_atol": f"{within / rows:.3f}"})
    print(f"{name}: {i} prompts, float32 vs float64 of the same arithmetic: at most {d32:.3e}, "
          f"{within}/{rows} rows within 4 x atol {atol:.2e}")


if __name__ == "__main__":
    main()
