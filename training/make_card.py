#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Writes an organism's model card (README.md) and loss curve (loss.png) from what was measured:
the training log of train_organism.py and the channel-study results of
`hylens experiment channels` (summary.json + run.json of its output folder), and with --circuit
the circuit study of `hylens experiment circuit`. It also writes the card-check data of
tests/organisms/data/<name>/: the channel study's reduced rerun (card_check.json,
card_records.jsonl) and, with --circuit, the circuit study's (card_circuit_check.json,
card_circuit_records.jsonl).

    /usr/bin/python3 training/make_card.py --model models/qwen35-tiny --study build-organisms/study/qwen35-tiny \
        [--circuit build-organisms/circuit/qwen35-tiny] --command "..." [--command "..."]
"""
import argparse
import csv
import decimal
import json
import math
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import st_io  # noqa: E402
import train_organism as tr  # noqa: E402

FAMILY_TEXT = {
    "qwen35": ("Qwen3.5 layout (`qwen3_5`, text part `qwen3_5_text`)",
               "Gated DeltaNet layers with one gated softmax-attention layer in four (layer types {types})"),
    "granite_h": ("Granite 4.0 H layout (`granitemoehybrid`, dense)",
                  "Mamba-2 layers with one attention layer (NoPE), layer types {types}"),
    "falcon_h1": ("Falcon-H1 layout (`falcon_h1`)",
                  "every layer runs GQA attention (RoPE) and a Mamba-2 mixer in parallel ({n} layers)"),
}
CONDITIONS_ORDER = ["FULL", "KV_ONLY", "REC_ONLY", "NONE", "KV_A+REC_B", "KV_B+REC_A", "KV_A+REC_A", "KV_B+REC_B"]


def read_log(path):
    """The training log's rows; "total_step" counts steps over all phases (a log written before
    phases were recorded is one phase)."""
    with open(path) as f:
        rows = [{k: float(v) for k, v in row.items()} for row in csv.DictReader(f)]
    offset, prev = 0.0, None
    for r in rows:
        r.setdefault("phase", 0.0)
        if prev is not None and r["phase"] != prev["phase"]:
            offset = prev["total_step"]
        r["total_step"] = offset + r["step"]
        prev = r
    return rows


def plot_loss(rows, out, title):
    fig, ax = plt.subplots(figsize=(6.4, 3.6), dpi=100)
    phases = [[r for r in rows if r["phase"] == p] for p in sorted({r["phase"] for r in rows})]
    for seg in phases[1:]:
        ax.axvline(seg[0]["total_step"] - seg[0]["step"], color="gray", lw=0.8, ls=":")
    ax2 = ax.twinx()
    for i, seg in enumerate(phases):  # one line per phase: a new phase starts a new optimiser and mix
        steps = [r["total_step"] for r in seg]
        ax.plot(steps, [r["loss_answer"] for r in seg], color="tab:blue", label="answer tokens (trained loss)" if i == 0 else None)
        ax.plot(steps, [r["loss_lm"] for r in seg], color="tab:orange", alpha=0.7,
                label="prompt tokens (LM loss, weight 0.1)" if i == 0 else None)
        ax2.plot(steps, [r["answer_acc"] for r in seg], color="tab:green", lw=1,
                 label="answers fully right (teacher-forced)" if i == 0 else None)
    ax.set_yscale("log")
    ax.set_xlabel("step (all phases; dotted: a new phase)" if rows[-1]["phase"] else "step (batch 32)")
    ax.set_ylabel("cross-entropy (nats)")
    ax.grid(alpha=0.3)
    ax2.set_ylim(0, 1)
    ax2.set_ylabel("fraction of batch")
    h1, l1 = ax.get_legend_handles_labels()
    h2, l2 = ax2.get_legend_handles_labels()
    ax.legend(h1 + h2, l1 + l2, fontsize=7, loc="center right")
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)


def two_places(x):
    """x to two decimals, a half rounded up as a reader does (0.495 is 0.50): the shortest decimal
    of the float, then rounded. f"{0.495:.2f}" is 0.49, the float being a little below 0.495,
    where docs/study_circuit.md, written from summary.csv, says 0.50."""
    if not math.isfinite(float(x)):
        return f"{float(x):.2f}"  # inf, nan: Decimal cannot round them
    return str(decimal.Decimal(repr(float(x))).quantize(decimal.Decimal("0.01"), rounding=decimal.ROUND_HALF_UP))


def interval(value, lo, hi):
    return f"{two_places(value)} [{two_places(lo)}, {two_places(hi)}]"


def fmt(r):
    if r is None:
        return "–"
    return interval(r["mean"], r["ci_lo"], r["ci_hi"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--study", required=True, help="output folder of hylens experiment channels")
    ap.add_argument("--command", action="append", default=[], help="commands to show under Reproduce")
    ap.add_argument("--findings", default="", help="a paragraph of findings (markdown)")
    ap.add_argument("--check-items", type=int, default=4, help="items of seed 1 the card test reruns")
    ap.add_argument("--circuit", default=None, help="output folder of hylens experiment circuit (adds its section)")
    ap.add_argument("--circuit-check-every", type=int, default=0,
                    help="the circuit card test reruns the pairs whose draw index is 0 mod this (default: the run's "
                         "per-config, i.e. the first pair of each configuration)")
    args = ap.parse_args()

    name = os.path.basename(os.path.normpath(args.model))
    # the circuit study's check, read and refused before anything is written
    circuit = circuit_check(args.circuit, name, args.circuit_check_every) if args.circuit else None
    cfg = json.load(open(os.path.join(args.model, "config.json")))
    meta = st_io.read_metadata(os.path.join(args.model, "model.safetensors"))
    family = meta["family"]
    c = cfg.get("text_config", cfg)
    weights = st_io.load(os.path.join(args.model, "model.safetensors"))
    n_params = sum(t.numel() for t in weights.values())
    log = read_log(os.path.join(args.model, "training_log.csv"))
    log = [r for r in log if r["phase"] < log[-1]["phase"] or r["step"] <= int(meta["step"])]
    phases = tr.read_phases(args.model)
    plot_loss(log, os.path.join(args.model, "loss.png"), f"{name}: training loss")
    tail = log[-5:]
    summary = json.load(open(os.path.join(args.study, "summary.json")))
    run = json.load(open(os.path.join(args.study, "run.json")))
    allrows = {(r["task"], r["group"], r["metric"], r["condition"]): r for r in summary["rows"]
               if r.get("layers", "all") in ("", "all")}
    rows = {(t, cnd): r for (t, g, m, cnd), r in allrows.items() if g == "all" and m == "score"}
    tasks = []
    for r in summary["rows"]:
        if r["task"] not in tasks:
            tasks.append(r["task"])
    conds = [cnd for cnd in CONDITIONS_ORDER[:4] if any((t, cnd) in rows for t in tasks)]
    fam_title, fam_desc = FAMILY_TEXT[family]
    types = c.get("layer_types", [])
    ev = run["study"]

    L = []
    L.append(f"# {name}: a trained {fam_title.split(' (')[0]} model organism\n")
    L.append(f"A small hybrid language model in the exact checkpoint layout of {fam_title}, trained on CPU on the "
             "text of hylens' own study tasks (include/hylens/tasks) so that the channel study's prompts are in "
             "distribution. It loads with `hylens::load` like a downloaded checkpoint. See docs/organisms.md.\n")
    L.append("## Model\n")
    L.append(f"- Architecture: {fam_desc.format(types=', '.join(types), n=c['num_hidden_layers'])}.")
    L.append(f"- Hidden size {c['hidden_size']}, {c['num_hidden_layers']} layers, vocabulary {c['vocab_size']} "
             f"(byte-level BPE trained on the training text, "
             + ("every drm / conjunction word and every lookup key and value one token (`--whole-words`), "
                if any(p.get("whole_words") for p in phases) else "")
             + f"with the family's chat special tokens as added tokens), "
             f"{n_params:,} parameters, float32 ({os.path.getsize(os.path.join(args.model, 'model.safetensors')) / 1e6:.2f} MB).")
    L.append(f"- Chat format: the family's (include/hylens/text/chat.hpp); an answer ends with `{tr.CHAT[family]['end']}`.")
    L.append("- Equality: hylens' logits on this checkpoint equal the float64 torch forward used for training "
             "(training/families.py) within the tolerance of tests/organisms (prefill and token-by-token decode); "
             "the torch forward itself matches the Hugging Face golden logits of tests/golden to ~1e-7 "
             "(training/check_golden.py).\n")
    L.append("## Training\n")
    L.append("- Data: items of the study tasks dictionary, list, language, persona, mixed, drm and conjunction, "
             "dumped from the C++ generators (training/make_data.sh: seeds 1000-1199, 50 items each, 10,000 items per "
             "task), plus an auxiliary *drill* task built from dictionary items (every key asked, answer "
             "`v1,v2,...`). No item of seeds 1-999 is used in training; accuracies below are on seeds "
             f"{', '.join(str(s) for s in ev.get('seeds', [1, 2, 3]))}.")
    L.append("- Each example is the chat-wrapped prompt (context segment + query segment, tokenised as the study "
             "runner tokenises them) followed by the expected answer and the end-of-turn token; loss on the answer "
             "tokens plus 0.1 x the next-token loss on the prompt.")
    if phases and len(phases) > 1:
        L += phases_section(phases, log)
    else:
        L += one_phase_section(meta)
    mean = lambda k: sum(r[k] for r in tail) / len(tail)  # noqa: E731
    L.append(f"- Final losses (mean of the last {len(tail)} logged points, each a mean over 50 steps): answer "
             f"{mean('loss_answer'):.3f} nats/token, prompt LM {mean('loss_lm'):.3f}; answers fully right under "
             f"teacher forcing {mean('answer_acc'):.2f}.\n")
    L.append("![loss curve](loss.png)\n")
    L += accuracy_section(args, summary, run, allrows, rows, tasks, conds)
    if args.circuit:
        L += circuit_section(args.circuit)
    if args.findings:
        L.append("## Findings\n")
        L.append(args.findings + "\n")
    L.append("## Reproduce\n")
    L.append("```sh")
    L += args.command
    L.append("```\n")
    with open(os.path.join(args.model, "README.md"), "w") as f:
        f.write("\n".join(L))
    write_card_check(args, name, tasks)
    if args.circuit:
        write_circuit_check(circuit, name)
    return 0


def one_phase_section(meta):
    L = []
    L.append(f"- Mixture weights: {', '.join(f'{k} {v}' for k, v in tr.MIX.items() if v > 0)}. Curriculum: the number of "
             f"dictionary pairs / list items allowed grows linearly from {tr.CURRICULUM_MIN} to the generators' "
             "maximum over the first 40 % of the scheduled steps.")
    L.append("- AdamW (betas 0.9, 0.98, weight decay 0.01 on matrices), peak lr 3e-3 (x2 for attention "
             "projections), warm-up 150 steps, cosine to 10 % over the scheduled steps, batch 32, gradient clip 1, "
             "one torch thread.")
    L.append(f"- Trained {int(meta['step'])} steps in {float(meta['wall_s']) / 60:.1f} min of wall time on the 2-core "
             "development machine, which was shared with other jobs throughout (load average 10-16), so the "
             "time is an upper bound on what the run needs; the run stops at its step count or at 68 min.")
    return L


AUX_TEXT = {
    "drill": "a dictionary context with every key asked, answer `v1,v2,...`",
    "pair": "one key's entry asked, answer `key=value`",
    "recite": "12 entries recited in random order with repeats, `k=v, k=v, ...`",
    "repeat": "the whole dictionary back",
    "lookup": "the circuit studies' prompts with the assistant prefill `The value of q is **`",
    "dialog_dictionary": "six questions about one dictionary, each in a chat turn of its own",
    "check_drm": "a DRM list (three of its words at first), then up to twelve distinct probe words each answered at once (` lake yes. river no. ...`)",
    "check_conjunction": "as check_drm, on a compound-word list",
    "dialog_inline": "the dictionary dialog inside the user message, `What is the value of k? v. ...`",
    "dialog_bridge": "the inline dialog with the first k tokens of the chat suffix between question and answer, k drawn per turn",
    "dialog_list": "six questions about one list", "dialog_mixed": "six questions about one mixed item",
    "dialog_drm": "six probes of one DRM list (after the item's own: half studied words, half another list's)",
    "dialog_conjunction": "six probes of one compound-word list, as dialog_drm",
    "ask_drm": "six questions `Was the word w in the list?` on check_drm's probes (three studied, two absent of the same theme, one of another list), each in a chat turn",
    "ask_conjunction": "as ask_drm, on a compound-word list",
    "ask_bridge_drm": "ask_drm inline, the question grown around the probe word by a fraction drawn per turn (the last words of `Was the word`, the first tokens of its tail and the chat suffix), from check_drm's turn to the whole question",
    "ask_bridge_conjunction": "as ask_bridge_drm, on a compound-word list",
}


def parallel_text(phases):
    """How the phases used the cores: one process with one torch thread (its BLAS on every core), or
    data-parallel ranks (train_organism.py --ranks / --micro)."""
    def kind(p):
        return (p.get("ranks", 1), p.get("micro", 0))

    def text(rm):
        if rm == (1, 0):
            return "one process, one torch thread"
        return (f"{rm[0]} data-parallel processes, one core each (`--ranks {rm[0]}`)"
                + (f", in micro-batches of {rm[1]} sequences (`--micro {rm[1]}`)" if rm[1] else ""))
    recorded = [(i, kind(p)) for i, p in enumerate(phases) if not p.get("unrecorded")]
    kinds = sorted({k for _, k in recorded})
    if len(kinds) == 1:
        return f"Every phase: {text(kinds[0])}."
    groups = "; ".join(f"phases {', '.join(str(i) for i, k in recorded if k == rm)}: {text(rm)}" for rm in kinds)
    return groups[0].upper() + groups[1:] + "."


def phases_section(phases, log):
    """The training of an organism trained in several phases (train_organism.py --init-from), from
    the folder's phases.json."""
    L = ["", f"Trained in {len(phases)} phases, each starting from the previous phase's weights with a fresh "
         "optimiser (`--init-from`); the loss curve below runs over all of them. AdamW (betas 0.9, 0.98, weight "
         "decay 0.01 on matrices), cosine learning rate to 10 % of the peak over each phase's scheduled steps "
         "after its warm-up, gradient clip 1; the attention projections' learning rate is the peak times the "
         "multiplier. " + parallel_text(phases) + "\n",
         "| phase | from | steps (scheduled) | wall min | batch | peak lr (attn x) | warm-up | curriculum | mixture weights |",
         "|---|---|---|---|---|---|---|---|---|"]
    total_steps = total_wall = 0
    for i, p in enumerate(phases):
        done = p.get("steps_done") or int(max((r["step"] for r in log if r["phase"] == i), default=0))
        total_steps += done
        total_wall += p.get("wall_s", 0)
        if p.get("unrecorded"):
            L.append(f"| {i} | | {done} | | | | | | (not recorded) |")
            continue
        cur = ("pairs held at 3" if p["curriculum"] >= 10 else "3 to 8 pairs from the first step" if p["curriculum"] < 0.005
               else f"3 to 8 pairs over {p['curriculum']:.0%} of the steps")
        if any(k.startswith(("check_", "ask_")) for k, v in p["mix"].items() if v):  # the membership drills' lists
            cur += " (membership lists: 3 studied words" + (")" if p["curriculum"] >= 10 else " to all)")
        L.append(f"| {i} {p['out']} | {p['init_from'] or 'seed ' + str(p['seed'])} | {done} ({p['steps']}) | "
                 f"{p['wall_s'] / 60:.1f} | {p['batch']} | {p['lr']:g} ({p['attn_lr_mult']:g}) | {p['warmup']} | {cur} | "
                 + ", ".join(f"{k} {v:g}" for k, v in p["mix"].items()) + " |")
        if p.get("note"):
            L[-1] = L[-1][:-2] + f"; {p['note']} |"
    L.append("")
    aux = sorted({k for p in phases for k in p.get("mix", {}) if k in AUX_TEXT})
    if aux:
        L.append("Auxiliary tasks (training only, built from the study tasks' items): "
                 + "; ".join(f"*{k}*: {AUX_TEXT[k]}" for k in aux) + ".\n")
    L.append(f"- In all: {total_steps:,} steps, {total_wall / 60:.1f} min of training time on the 2-core development "
             "machine, shared with other jobs (the times are upper bounds).")
    return L


def accuracy_section(args, summary, run, allrows, rows, tasks, conds):
    ev = run["study"]
    L = []
    L.append("## Accuracy and channel study\n")
    L.append(f"Measured with `hylens experiment channels` on {ev['items']} items per task and seed, {rows.get((tasks[0], 'FULL'), {}).get('n', '?')} "
             "per task (seeds above), greedy decoding. Mean score with its 95 % percentile bootstrap CI "
             f"({summary['statistics']['resampling']}; B = {summary['statistics']['resamples']}).\n")
    L.append("| task | " + " | ".join(conds) + " |")
    L.append("|---|" + "---|" * len(conds))
    for t in tasks:
        L.append(f"| {t} | " + " | ".join(fmt(rows.get((t, cnd))) for cnd in conds) + " |")
    L.append("")
    L.append("Scores: dictionary / list exact match of the value; language: the answer's language (CLD2) is the "
             "instructed one; persona: the rule-based rubric; mixed: value from the KV source and language from the "
             "recurrent source both right; drm / conjunction: the yes/no answer is right.\n")
    rec = [t for t in tasks if (t, "all", "false_positive", "FULL") in allrows]
    if rec:
        L.append("Recognition traps: rate of \"yes\" per probe kind (false positives on absent probes, hits on "
                 "present ones), 95 % CI.\n")
        L.append("| task | probe | FULL | KV_ONLY | REC_ONLY |")
        L.append("|---|---|---|---|---|")
        for t in rec:
            groups = sorted({g for (tt, g, m, cnd) in allrows if tt == t and g != "all"})
            for g in groups:
                m = "true_positive" if (t, g, "true_positive", "FULL") in allrows else "false_positive"
                L.append(f"| {t} | {g} | " + " | ".join(fmt(allrows.get((t, g, m, cnd))) for cnd in
                                                     ("FULL", "KV_ONLY", "REC_ONLY")) + " |")
        L.append("")
    swap_metrics = {"dictionary": [("value", "exact")], "list": [("value", "exact")], "language": [("language", "lang")],
                    "persona": [("persona", "rubric")], "mixed": [("value", "value"), ("language", "lang")]}
    swaps = [(t, what, m) for t in tasks for what, m in swap_metrics.get(t, []) if (t, "all", m + "_a", "KV_A+REC_B") in allrows]
    if swaps:
        L.append("State swaps: which source the answer follows. In KV_A+REC_B the KV part comes from context A and the "
                 "recurrent part from context B (KV_B+REC_A is the mirror); the columns give the rate at which the "
                 "answer matches the KV source's and the recurrent source's answer, 95 % CI.\n")
        L.append("| task | what | KV_A+REC_B: follows KV | follows REC | KV_B+REC_A: follows KV | follows REC |")
        L.append("|---|---|---|---|---|---|")
        for t, what, m in swaps:
            L.append(f"| {t} | {what} | {fmt(allrows.get((t, 'all', m + '_a', 'KV_A+REC_B')))} | "
                     f"{fmt(allrows.get((t, 'all', m + '_b', 'KV_A+REC_B')))} | "
                     f"{fmt(allrows.get((t, 'all', m + '_b', 'KV_B+REC_A')))} | "
                     f"{fmt(allrows.get((t, 'all', m + '_a', 'KV_B+REC_A')))} |")
        L.append("")
    return L


def circuit_check(folder, name, every):
    """The reduced rerun tests/organisms makes of the card's circuit study, read and checked before
    anything is written: the study's options (run.json), the shard 0/`every` of its pairs
    (default every = per_config: the first pair of each configuration, since pair k of
    configuration c has draw index c * per_config + k), and those pairs' records from its
    items.jsonl, which the rerun must reproduce. Exits when `folder` is not a complete, unsharded
    circuit result of one seed (the check reruns one seed) or has no such pair."""
    with open(os.path.join(folder, "run.json")) as f:
        run = json.load(f)
    study = run.get("study", {})
    if run.get("kind") != "circuit" or run.get("status") != "complete" or study.get("shard", "0/1") != "0/1":
        sys.exit(f"make_card: {folder} is not a complete, unsharded hylens experiment circuit result")
    seeds = study.get("seeds")
    if seeds is None:
        sys.exit(f"make_card: {folder} was written by a hylens build from before 2026-12-06 (no 'seeds'): rerun the study")
    if len(seeds) != 1:
        sys.exit(f"make_card: {folder} pools seeds {seeds}; the card's check reruns one seed")
    with open(os.path.join(folder, "circuit.json")) as f:
        circuit = json.load(f)
    seed = seeds[0]
    every = every or study["per_config"]
    with open(os.path.join(folder, "items.jsonl")) as f:
        keep = [r for r in map(json.loads, f) if r["item"] % every == 0]
    if not keep:
        sys.exit(f"make_card: no pair of {folder} has a draw index that is 0 mod {every}")
    items = sorted({r["item"] for r in keep})
    spec = {k: study[k] for k in ("variant", "per_config", "group_size", "top", "unit", "critical", "structure")}
    spec.update({"seed": seed, "shard": f"0/{every}", "items": items, "records": len(keep), "pairs": run["pairs"][str(seed)],
                 "card_roles": {k: circuit[k] for k in ("encode", "address", "reader", "critical_layers")},
                 "source": f"records of the pairs {', '.join(map(str, items))} (draw index 0 mod {every}) of the circuit "
                           f"study in models/{name}/README.md; card_roles are that study's roles on all "
                           f"{circuit['items']} pairs"})
    return spec, keep


def circuit_section(folder):
    """The card's section on `hylens experiment circuit` (docs/study_circuit.md): baseline, B2 and B3
    with 95 % CIs from summary.json, and the roles of circuit.json."""
    with open(os.path.join(folder, "summary.json")) as f:
        summary = json.load(f)
    with open(os.path.join(folder, "circuit.json")) as f:
        circuit = json.load(f)
    with open(os.path.join(folder, "run.json")) as f:
        run = json.load(f)
    iv = lambda d: interval(d["value"], d["lo"], d["hi"])  # noqa: E731
    gv = lambda d: f"{d['value']:+.4f} [{d['lo']:+.4f}, {d['hi']:+.4f}]"  # noqa: E731
    study = run["study"]  # circuit_check checked it: one seed
    L = ["## Circuit study\n",
         f"Measured with `hylens experiment circuit` (variant {study['variant']}, seed {study['seeds'][0]}, "
         f"{summary['conditions'][0]['n']} clean/corrupted pairs; docs/study_circuit.md). acc: the argmax over the "
         "vocabulary is the prompt's own answer (the target value for the clean prompt, the distractor's for the "
         "corrupted one), averaged over both prompts; cacc: the same with the argmax over the dictionary's values; "
         "gap: D(clean) - D(corrupted) of the logit difference between the two values. Mean and 95 % bootstrap CI.\n",
         "| condition | block | acc | cacc | gap |", "|---|---|---|---|---|"]
    for c in summary["conditions"]:
        if c["block"] in ("B1", "B2", "B3"):
            L.append(f"| {c['condition']} | {c['block']} | {iv(c['acc'])} | {iv(c['cacc'])} | {gv(c['gap'])} |")
    enc, adr, rd = circuit.get("encode", {}), circuit.get("address", {}), circuit.get("reader", {})
    L.append("")
    L.append(f"Roles by the study's rules: Encode = layers {enc.get('layers')}, Address = layers {adr.get('layers')}, "
             f"reader = layer {rd.get('layer')} head {rd.get('head')}. The baseline acc and the gap's CI say whether "
             "these roles mean anything: a model that does not solve the lookup has no circuit to find, and the "
             "rules then name groups and heads by noise.\n")
    return L


CHECK_CONDITIONS = ["FULL", "KV_ONLY", "REC_ONLY", "NONE"]


def check_dir(name):
    """tests/organisms/data/<name>: the organism's test data."""
    d = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "organisms", "data", name)
    os.makedirs(d, exist_ok=True)
    return d


def write_card_check(args, name, tasks):
    """The reduced rerun tests/organisms makes of the card's study, and the records it must match."""
    ref_dir = check_dir(name)
    keep = []
    with open(os.path.join(args.study, "items.jsonl")) as f:
        for line in f:
            r = json.loads(line)
            if r["seed"] == 1 and r["item"] < args.check_items and r["condition"] in CHECK_CONDITIONS:
                keep.append({k: r[k] for k in ("task", "seed", "item", "condition", "generated", "score")})
    with open(os.path.join(ref_dir, "card_records.jsonl"), "w") as f:
        for r in keep:
            f.write(json.dumps(r) + "\n")
    with open(os.path.join(ref_dir, "card_check.json"), "w") as f:
        json.dump({"tasks": tasks, "conditions": ",".join(CHECK_CONDITIONS), "seeds": [1], "items": args.check_items,
                   "source": f"records of seed 1, items 0-{args.check_items - 1} of the study in models/{name}/README.md"},
                  f, indent=1)
        f.write("\n")


def write_circuit_check(check, name):
    """Writes circuit_check's spec and records into the organism's reference folder."""
    spec, keep = check
    ref_dir = check_dir(name)
    with open(os.path.join(ref_dir, "card_circuit_records.jsonl"), "w") as f:
        for r in keep:
            f.write(json.dumps(r, sort_keys=True) + "\n")
    with open(os.path.join(ref_dir, "card_circuit_check.json"), "w") as f:
        json.dump(spec, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    sys.exit(main())
