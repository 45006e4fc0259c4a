#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Checks that data-parallel training (train_organism.py --ranks / --micro) computes the gradient
of the whole batch: for each family, a fresh organism's gradient on batches of the study mix,
once as one batch (the single-process path) and once as the ranks' micro-batches added up
(share_backward, the ranks run one after the other in this process). Prints the largest
difference relative to the largest gradient entry of each batch and fails above 1e-5 (float32
sums of the same terms in another order differ by a few 1e-7).

    /usr/bin/python3 training/check_ranks.py [--data build-organisms/items/train]
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train_organism as T  # noqa: E402

MIX = {"dialog_dictionary": 3, "dialog_drm": 1.5, "drm": 3, "conjunction": 6, "ask_bridge_drm": 1, "recite": 0.5,
       "language": 0.7, "mixed": 0.7}


def flat_grad(model):
    return torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1) for p in model.parameters()])


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=os.path.join(here, "..", "build-organisms", "items", "train"))
    ap.add_argument("--batches", type=int, default=3)
    args = ap.parse_args()
    torch.set_num_threads(1)
    pool = T.Pool(args.data)
    worst = 0.0
    for family in sorted(T.CHAT):
        tok = T.build_tokenizer(family, 1, pool, 1024)
        end_id = tok.specials[T.CHAT[family]["end"]]
        cfg = T.make_config(family, len(tok), end_id, tok.specials.get("<|begin_of_text|>", end_id))
        model = T.new_model(family, cfg, 1)
        for step in range(args.batches):
            seqs = T.draw_sequences(tok, family, pool, 1, step, 16, 1.0, MIX, "check")
            model.zero_grad()
            ids, tgt, w_ans, w_lm = T.batch_tensors(seqs)  # the single-process path of the training loop
            T.batch_loss(model, ids, tgt, w_ans, w_lm, w_ans.sum(), w_lm.sum(), 0.1)[0].backward()
            whole = flat_grad(model)
            for world, micro in ((2, 2), (2, 8), (1, 3)):
                model.zero_grad()
                for rank in range(world):
                    T.share_backward(model, seqs, rank, world, 0.1, micro)
                rel = float((flat_grad(model) - whole).abs().max() / whole.abs().max())
                worst = max(worst, rel)
                print(f"{family} batch {step} ranks {world} micro {micro}: max |difference| / max |gradient| = {rel:.2e}")
    print(f"largest: {worst:.2e} (bound 1e-5)")
    return 0 if worst <= 1e-5 else 1


if __name__ == "__main__":
    sys.exit(main())
