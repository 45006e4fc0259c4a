#!/usr/bin/env python3
"""Teacher-forced yes-against-no accuracy of a training checkpoint on the membership tasks.

For N items of the evaluation seed drawn from each task (a study task or an auxiliary one of
train_organism.py: check_drm, ask_drm, ask_bridge_drm, ...), the item is encoded as training
encodes it, and at every answer whose first token is "yes" or "no" the logits of the two are
compared. Prints, per task, the accuracy on the "no" answers and on the "yes" answers, and for the
bridges per gap fraction (rounded to quarters). docs/organisms.md, "Membership in the question form".

  training/eval_yes_no.py --dir RUN --family qwen35 --tasks check_drm,ask_drm,ask_bridge_drm [--items 40] [--level 0]

RUN holds checkpoint.pt, config.json and tokenizer.json (a phase folder of train_organism.py).
"""
import argparse
import json
import os
import random

import torch

import bpe
import families
import train_organism as T


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", required=True, help="phase folder: checkpoint.pt, config.json, tokenizer.json")
    ap.add_argument("--family", required=True, choices=sorted(T.CHAT))
    ap.add_argument("--tasks", required=True, help="comma-separated tasks")
    ap.add_argument("--items", type=int, default=40, help="items per task")
    ap.add_argument("--level", type=float, default=0.0, help="curriculum level (0: lists held at 3 studied words)")
    ap.add_argument("--eval-data", default=os.path.join(here, "..", "build-organisms", "items", "eval"))
    args = ap.parse_args()
    torch.set_num_threads(1)
    tok = bpe.Tokenizer.from_json(os.path.join(args.dir, "tokenizer.json"))
    with open(os.path.join(args.dir, "config.json")) as f:
        cfg = json.load(f)
    model = families.CausalLM(args.family, cfg)
    model.load_state_dict(torch.load(os.path.join(args.dir, "checkpoint.pt"))["model"])
    model.eval()
    pool = T.Pool(args.eval_data)
    yes = {tok.encode("yes")[0], tok.encode(" yes")[0]}
    no = {tok.encode("no")[0], tok.encode(" no")[0]}
    for task in args.tasks.split(","):
        if task not in T.AUX and task not in T.MIX:
            ap.error(f"--tasks: unknown task '{task}'")
        rng = random.Random(f"eval_yes_no:{task}")
        stats = {}
        for _ in range(args.items):
            item = T.AUX[task](pool, rng, args.level) if task in T.AUX else pool.draw(task, rng, args.level)
            ids, is_answer = T.encode_segments(tok, args.family, item)
            with torch.no_grad():
                logits = model(torch.tensor([ids]))[0]
            gaps = item.get("gaps", [])
            turn = 0
            for p in range(1, len(ids)):
                if not (is_answer[p] and not is_answer[p - 1] and ids[p] in yes | no):
                    continue
                gold = "yes" if ids[p] in yes else "no"
                says_yes = max(logits[p - 1, t].item() for t in yes) > max(logits[p - 1, t].item() for t in no)
                gap = round(gaps[turn] * 4) / 4 if turn < len(gaps) else None
                turn += 1
                s = stats.setdefault((gold, gap), [0, 0])
                s[0] += says_yes == (gold == "yes")
                s[1] += 1
        cells = sorted(stats.items(), key=lambda kv: (kv[0][0], -1 if kv[0][1] is None else kv[0][1]))
        print(task, " ".join(f"{g}{'' if gap is None else f'@{gap}'} {c[0] / c[1]:.2f} ({c[1]})" for (g, gap), c in cells))


if __name__ == "__main__":
    main()
