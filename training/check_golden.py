# SPDX-License-Identifier: Apache-2.0
"""Checks the torch forwards of families.py against the Hugging Face golden logits of
tests/golden/models (float64 run of transformers' own code): prints the max abs error."""
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
import families  # noqa: E402
import st_io  # noqa: E402

ROOT = os.path.join(os.path.dirname(__file__), "..", "tests", "golden", "models")
CASES = {"qwen3_5_dense": "qwen35", "falcon_h1": "falcon_h1", "falcon_h1_nomambanorm": "falcon_h1",
         "granite_h_dense": "granite_h", "granite_h_allmamba": "granite_h"}


def main():
    torch.set_num_threads(1)
    worst = 0.0
    for name, fam in CASES.items():
        d = os.path.join(ROOT, name)
        cfg = json.load(open(os.path.join(d, "config.json")))
        m = families.CausalLM(fam, cfg).double()
        sd = {k.replace("model.language_model.", "model."): v.double() for k, v in st_io.load(os.path.join(d, "model.safetensors")).items()}
        missing, unexpected = m.load_state_dict(sd, strict=False)
        unexpected = [u for u in unexpected if not u.startswith(("model.visual", "mtp"))]
        assert not missing and not unexpected, (missing, unexpected)
        g = st_io.load(os.path.join(d, "golden.safetensors"))
        with torch.no_grad():
            lg = m(g["input_ids"][None])[0]
        err = (lg - g["logits"].double()).abs().max().item()
        print(f"{name:24s} max|torch - HF golden| = {err:.3e} (logit scale {g['logits'].abs().max().item():.2f})")
        worst = max(worst, err)
    return 0 if worst < 1e-4 else 1


if __name__ == "__main__":
    sys.exit(main())
