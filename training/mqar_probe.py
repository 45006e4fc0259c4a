#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Synthetic multi-query associative recall (MQAR) on an organism's architecture: how many steps
does a family's layout at a given width need before key->value recall forms, with no tokenizer,
chat format or task mixture in the way?

    /usr/bin/python3 training/mqar_probe.py --family falcon_h1 --steps 1500 --pairs 4

A sequence is N pairs "k = v ;" (single tokens: 40 keys, 40 values) followed by --queries
entries "k = v ;" for keys drawn from the pairs; the loss is on the queried values only, so the
value accuracy has chance level 1/N until the key-matching circuit forms. Same model code
(families.py), configs (train_organism.make_config), initialisation and optimiser groups as the
organisms' training. Deterministic for --seed."""
import argparse
import os
import random
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train_organism as tr  # noqa: E402

KEYS, VALUES, SEP, EQ = list(range(300, 340)), list(range(400, 440)), 5, 6


def batch(rng, pairs, queries, bs):
    seqs, tgts = [], []
    for _ in range(bs):
        ks, vs = rng.sample(KEYS, pairs), rng.sample(VALUES, pairs)
        s = [t for k, v in zip(ks, vs) for t in (k, EQ, v, SEP)]
        t = [-100] * len(s)
        for _ in range(queries):
            i = rng.randrange(pairs)
            s += [ks[i], EQ, vs[i], SEP]
            t += [-100, -100, vs[i], -100]
        seqs.append(s)
        tgts.append(t)
    ids, tgt = torch.tensor(seqs), torch.tensor(tgts)
    return ids[:, :-1], tgt[:, 1:]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--family", required=True, choices=sorted(tr.CHAT))
    ap.add_argument("--steps", type=int, default=1500)
    ap.add_argument("--pairs", type=int, default=4)
    ap.add_argument("--queries", type=int, default=8)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    model = tr.new_model(args.family, tr.make_config(args.family, 1024, 1, 2, args.hidden), args.seed)
    opt = torch.optim.AdamW(tr.param_groups(model, args.lr, 1.0), betas=(0.9, 0.98))
    rng, t0 = random.Random(f"mqar:{args.seed}"), time.time()
    for step in range(1, args.steps + 1):
        for g in opt.param_groups:
            g["lr"] = g["base"] * min(1.0, step / 100)
        ids, tgt = batch(rng, args.pairs, args.queries, args.batch)
        logits = model(ids)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1), ignore_index=-100)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step % 100 == 0:
            with torch.no_grad():
                m = tgt != -100
                acc = (logits.argmax(-1)[m] == tgt[m]).float().mean().item()
            print(f"step {step} {time.time() - t0:.0f}s loss {loss.item():.3f} value acc {acc:.2f} "
                  f"(chance {1 / args.pairs:.2f})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
