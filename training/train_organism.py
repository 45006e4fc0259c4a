#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Trains one model organism on CPU and exports it as a checkpoint folder hylens loads.

    /usr/bin/python3 training/train_organism.py --family qwen35 --seed 1 --steps 6000 --out models/qwen35-tiny

Everything is determined by --seed: the tokenizer (trained on items drawn from the training
stream), the initial weights and every batch (batch of step s is drawn from
random.Random(f"train:{seed}:{s}"), so a resumed run sees the same batches as an uninterrupted
one). Evaluation items use the disjoint streams "eval:{task}:{seed}:{i}" (tasks_mirror.eval_items).

Writes into --out: config.json, model.safetensors, tokenizer.json, reference_logits.safetensors
(float64 torch logits on fixed prompts, for the equality test), training_log.csv, and
checkpoint.pt (optimizer state, for --resume; not shipped)."""
import argparse
import bisect
import json
import math
import os
import random
import re
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bpe  # noqa: E402

try:
    import torch
    import torch.nn.functional as F

    import families  # noqa: E402
    import st_io  # noqa: E402
except ImportError:  # the tasks and their rendering need no torch (tests/python/test_training_tasks.py)
    torch = F = families = st_io = None

# ---------------------------------------------------------------------------------------
# Chat formats: the strings of include/hylens/text/chat.hpp (bos, prefix, suffix), the token
# that ends the assistant turn, and the opening of a later user turn (the dialogs below; the
# studies ask one question per prompt).
CHAT = {
    "qwen35": dict(bos="", prefix="<|im_start|>user\n", suffix="<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n",
                   end="<|im_end|>", turn="\n<|im_start|>user\n",
                   specials=["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>"]),
    "granite_h": dict(bos="", prefix="<|start_of_role|>system<|end_of_role|>You are a helpful assistant. Please ensure responses are "
                      "professional, accurate, and safe.<|end_of_text|>\n<|start_of_role|>user<|end_of_role|>",
                      suffix="<|end_of_text|>\n<|start_of_role|>assistant<|end_of_role|>",
                      end="<|end_of_text|>", turn="\n<|start_of_role|>user<|end_of_role|>",
                      specials=["<|end_of_text|>", "<|start_of_role|>", "<|end_of_role|>"]),
    "falcon_h1": dict(bos="<|begin_of_text|>", prefix="<|im_start|>user\n", suffix="<|im_end|>\n<|im_start|>assistant\n",
                      end="<|im_end|>", turn="\n<|im_start|>user\n",
                      specials=["<|begin_of_text|>", "<|end_of_text|>", "<|im_start|>", "<|im_end|>"]),
}

# Training tasks: the study's generators (include/hylens/tasks), items dumped as JSON lines by
# training/make_data.sh. "drill" is an auxiliary dense-supervision task built from dictionary
# items: the same context, a question for every key, answered "v1,v2,..." (every value a target).
TASKS = ["dictionary", "list", "language", "persona", "mixed", "drm", "conjunction"]
MIX = {"dictionary": 2.0, "list": 1.5, "mixed": 2.0, "drill": 1.5, "language": 0.7, "persona": 0.7, "drm": 1.0,
       "conjunction": 1.0, "repeat": 0.0, "pair": 0.0, "lookup": 0.0, "recite": 0.0, "dialog_dictionary": 0.0,
       "dialog_inline": 0.0, "dialog_bridge": 0.0, "dialog_list": 0.0, "dialog_mixed": 0.0, "dialog_drm": 0.0, "dialog_conjunction": 0.0,
       "check_drm": 0.0, "check_conjunction": 0.0, "ask_drm": 0.0, "ask_conjunction": 0.0, "ask_bridge_drm": 0.0,
       "ask_bridge_conjunction": 0.0}
# Auxiliary tasks of the second phase (weight 0 in the first), both built from dictionary items:
# "repeat" asks for the whole dictionary back ("k1=v1, k2=v2, ..."): every value is predicted by
# matching the key just written against the context (the induction-style copy that lookup needs);
# "pair" asks for one key's entry ("bed=gold"): the key is copied from the question, then the
# value follows by the same copy. Neither is a study task; they train the circuit lookup uses.
CURRICULUM_MIN = 3  # fewest pairs / items at the start; the cap grows to the generators' maximum


def load_items(path):
    """One task's items as dicts (context, query, expected, n), sorted by n (pairs or list items)."""
    out = []
    with open(path) as f:
        for line in f:
            j = json.loads(line)
            fl = j.get("fields", {})
            out.append({"task": j["task"], "seed": j["seed"], "index": j["index"], "context": j["context"],
                        "query": j["query"], "expected": j["expected"], "n": fl.get("n_pairs", fl.get("n_items", 0)),
                        "fields": fl})
    out.sort(key=lambda it: (it["n"], it["seed"], it["index"]))
    return out


class Pool:
    def __init__(self, data_dir):
        self.items = {t: load_items(os.path.join(data_dir, f"{t}.jsonl")) for t in TASKS}
        self.ns = {t: [it["n"] for it in v] for t, v in self.items.items()}
        self.by_lure = {}

    def related(self, task, lure):
        """The items of a task that share a lure (drm: the same theme; conjunction: the same
        recombined compound), indexed on first use."""
        if task not in self.by_lure:
            self.by_lure[task] = {}
            for it in self.items[task]:
                self.by_lure[task].setdefault(it["fields"]["lure"], []).append(it)
        return self.by_lure[task][lure]

    def draw(self, task, rng, level):
        ns = self.ns[task]
        if ns[-1] == 0:
            return rng.choice(self.items[task])
        cap = CURRICULUM_MIN + level * (ns[-1] - CURRICULUM_MIN)
        return self.items[task][rng.randrange(max(1, bisect.bisect_right(ns, cap)))]


_PAIR = re.compile(r"(\w+)=(\w+)")


def draw_dictionary(pool, rng, level):
    """A dictionary item and its (key, value) pairs in context order: what the auxiliary tasks build on."""
    it = pool.draw("dictionary", rng, level)
    return it, _PAIR.findall(it["context"])


def make_drill(pool, rng, level):
    it, pairs = draw_dictionary(pool, rng, level)
    ask = rng.sample(range(len(pairs)), len(pairs))
    return dict(task="drill", context=it["context"],
                query="What are the values of " + ", ".join(pairs[i][0] for i in ask) + "?",
                expected=[",".join(pairs[i][1] for i in ask)])


def make_repeat(pool, rng, level):
    it, pairs = draw_dictionary(pool, rng, level)
    return dict(task="repeat", context=it["context"], query="Repeat the dictionary.",
                expected=[", ".join(f"{k}={v}" for k, v in pairs)])


def make_pair(pool, rng, level):
    it, pairs = draw_dictionary(pool, rng, level)
    pairs = dict(pairs)
    key = it["query"].rsplit(" ", 1)[-1].rstrip("?")
    return dict(task="pair", context=it["context"], query=f"What is the entry of {key}?", expected=[f"{key}={pairs[key]}"])


# "lookup": the prompts of the circuit studies (include/hylens/tasks/lookup/prompt.hpp): one user
# message "Dictionary: k1=v1, ..., kN=vN.\nQuestion: What is the value of q?" (style chat), the
# list style ("Lookup table:\n* k=v\n...Which value does q map to?") or the rev style
# (" v is the value of k"), with the assistant prefill "The value of q is **" / "The entry q maps
# to **", on the in-family vocabulary; answer "v**". Drawn from the training stream only.
LOOKUP_KEYS = ["apple", "banana", "cherry", "date", "elder", "fig", "grape", "lemon", "mango", "peach", "pear", "plum",
               "berry", "onion", "garlic", "ginger", "pepper", "tomato", "carrot", "potato", "walnut", "almond"]
LOOKUP_VALUES = ["red", "blue", "green", "gold", "gray", "black", "white", "orange", "yellow", "amber", "rose", "lime",
                 "olive", "azure", "steel", "ice", "fire", "stone", "wood", "iron"]


def make_lookup(pool, rng, level):
    n = rng.choice([4, 8] if level >= 0.5 else [2, 4])
    keys, values = rng.sample(LOOKUP_KEYS, n), rng.sample(LOOKUP_VALUES, n)
    t = rng.randrange(n)
    style = rng.choice(["chat", "chat", "list", "rev"])
    if style == "list":
        user = "Lookup table:\n" + "".join(f"* {k}={v}\n" for k, v in zip(keys, values)) + f"Which value does {keys[t]} map to?"
        prefill = f"The entry {keys[t]} maps to **"
    else:
        entries = [f" {v} is the value of {k}" if style == "rev" else f" {k}={v}" for k, v in zip(keys, values)]
        user = "Dictionary:" + ",".join(entries) + "." + f"\nQuestion: What is the value of {keys[t]}?"
        prefill = f"The value of {keys[t]} is **"
    return dict(task="lookup", context=user, query="", prefill=prefill, expected=[values[t] + "**"])


def make_recite(pool, rng, level):
    """"Recite": 12 entries of the dictionary in random order with repeats ("k=v, k=v, ..."):
    each value is predicted from the key just written by matching it against the context, a dozen
    such predictions per sequence (the dense form of lookup; the order cannot be copied)."""
    it, pairs = draw_dictionary(pool, rng, level)
    return dict(task="recite", context=it["context"], query="Recite the dictionary.",
                expected=[", ".join(f"{k}={v}" for k, v in (rng.choice(pairs) for _ in range(12)))])


# Dialogs: one study context and several of the study's own questions about it, each asked in a
# chat turn of its own ("turns": [(query, answer), ...]; the first turn is rendered exactly as the
# study renders its single question). Every answer is a target, so a sequence carries 6 lookups in
# the study's form instead of one: the question's key has to be carried over the chat suffix to the
# answer, the step a recited "k=v" (key one token before the value) never trains. The first turn
# is the item's own question; the others are drawn from its context.
DIALOG_TURNS = 6
_LIST_ENTRY = re.compile(r"^(\d+)\. (\S+)$", re.M)


def own_turn(it):
    """The item's own question and answer: the first turn of its dialog (for drm / conjunction the
    generators' balanced probes, lures included)."""
    return [(it["query"], it["expected"][0])]


def make_dialog_dictionary(pool, rng, level):
    it, pairs = draw_dictionary(pool, rng, level)
    asked = [rng.choice(pairs) for _ in range(DIALOG_TURNS - 1)]
    return dict(task="dialog_dictionary", context=it["context"],
                turns=own_turn(it) + [(f"What is the value of {k}?", v) for k, v in asked])


def make_dialog_inline(pool, rng, level):
    """The dictionary dialog without chat turns: "Q? v. Q? v. ..." inside the user message, the key
    two tokens before its value instead of about ten (a bridge between recite and the dialogs)."""
    it = make_dialog_dictionary(pool, rng, level)
    return dict(it, task="dialog_inline", inline=True)


def make_dialog_bridge(pool, rng, level):
    """The inline dictionary dialog with the first k tokens of the chat suffix between each question
    and its answer, k drawn per turn from 0 to all of them: every gap from inline to the full chat
    form in one task, so the carry can be learned over short gaps first."""
    it = make_dialog_inline(pool, rng, level)
    return dict(it, task="dialog_bridge", gaps=[rng.random() for _ in it["turns"]])


def make_dialog_list(pool, rng, level):
    it = pool.draw("list", rng, level)
    entries = _LIST_ENTRY.findall(it["context"])
    asked = [rng.choice(entries) for _ in range(DIALOG_TURNS - 1)]
    return dict(task="dialog_list", context=it["context"],
                turns=own_turn(it) + [(f"What is item #{i}?", w) for i, w in asked])


def make_dialog_mixed(pool, rng, level):
    """A mixed item (dictionary + language instruction): other keys asked, the answer sentence of
    the item's language with the other key's value."""
    it = pool.draw("mixed", rng, level)
    pairs = _PAIR.findall(it["context"].split(".")[0])
    value, template = it["fields"]["value"], it["expected"][0]
    asked = [rng.choice(pairs) for _ in range(DIALOG_TURNS - 1)]
    return dict(task="dialog_mixed", context=it["context"],
                turns=own_turn(it) + [(f"What is the value of {k}?", re.sub(rf"\b{re.escape(value)}\b", v, template, count=1))
                       for k, v in asked])


def make_dialog_recognition(task):
    """drm / conjunction: after the item's own probe, probes drawn half from the studied list
    ("yes") and half from another item's list, not studied here ("no"), so that no word tells the
    answer by itself."""
    def make(pool, rng, level):
        it = pool.draw(task, rng, level)
        studied = it["fields"]["list"]
        turns = own_turn(it)
        for _ in range(DIALOG_TURNS - 1):
            if rng.random() < 0.5:
                word, answer = rng.choice(studied), "yes"
            else:
                others = [w for w in pool.draw(task, rng, level)["fields"]["list"] if w not in studied]
                word, answer = (rng.choice(others), "no") if others else (rng.choice(studied), "yes")
            turns.append((f"Was the word {word} in the list? Answer yes or no.", answer))
        return dict(task=f"dialog_{task}", context=it["context"], turns=turns)
    return make


def recognition_probes(pool, rng, level, task):
    """A drm / conjunction item's studied list and probe words with their answers, as the membership
    drills use them. The curriculum shortens the list: at level 0 three of its words are studied
    (the rest become absent words of the same theme), at level 1 all. The probes are up to six
    studied words and as many absent ones: the list's unstudied words, the item's own probe and
    lure, then words of other lists of the same lure, the related but unstudied words a false
    memory is made of. Returns (context, studied words, [(word, "yes" / "no")] in a shuffled order)."""
    it = pool.draw(task, rng, level)
    full, fields = it["fields"]["list"], it["fields"]
    k = CURRICULUM_MIN + round(level * (len(full) - CURRICULUM_MIN))
    studied = rng.sample(full, k) if k < len(full) else full
    related = pool.related(task, fields["lure"])
    absent = [w for w in dict.fromkeys([fields["probe"], fields["lure"]] + full) if w not in studied]
    for _ in range(20):  # distinct words only: a repeated probe could copy its earlier answer
        if len(absent) >= 6:
            break
        absent += [w for w in rng.choice(related)["fields"]["list"] if w not in studied and w not in absent][:1]
    n = min(6, len(studied))
    probes = [(w, "yes") for w in rng.sample(studied, n)] + [(w, "no") for w in rng.sample(absent, min(n, len(absent)))]
    rng.shuffle(probes)
    context = it["context"] if studied is full else "Study these words: " + ", ".join(studied) + "."
    return context, studied, probes


def make_check(task):
    """drm / conjunction in the dense form of "recite": the study's list (recognition_probes), then
    up to twelve distinct probe words each followed at once by its answer (" river no. lake yes.
    ..."), so that membership is a one-hop match of the word just written against the list (no
    question to carry over a chat suffix)."""
    def make(pool, rng, level):
        context, _, probes = recognition_probes(pool, rng, level, task)
        # Inline turns (as dialog_inline): the probe words are prompt tokens, only "yes" / "no" are
        # answer targets; " word" with its space, as it stands in the list.
        return dict(task=f"check_{task}", context=context, inline=True,
                    turns=[((" " if i == 0 else "") + w, a) for i, (w, a) in enumerate(probes)])
    return make


ASK_HEAD = ["Was", "the", "word"]  # the study's recognition question: head, word, tail
ASK_TAIL = " in the list? Answer yes or no."


def make_ask(task, bridge=False):
    """drm / conjunction in the study's question form, "Was the word W in the list? Answer yes or
    no.", asked of the membership drills' probes (recognition_probes: the curriculum's short lists,
    absent words of the same theme) rather than of words from unrelated lists, so that a gist of
    the list's theme cannot answer them: DIALOG_TURNS questions, half "yes", one "no" about a word
    of another list drawn at random (none, so one question fewer, when that draw is this list).
    In chat turns, or (bridge) inline: the last j words of the question's head "Was the word",
    the probe word, the first k tokens of the question's tail and the chat suffix, j and k growing
    together with a fraction drawn per turn; at j = k = 0 the turn is check_drm's (" river no."),
    at their full values the question as the study asks it, as dialog_bridge carries lookup from
    the dense form to the chat."""
    def make(pool, rng, level):
        context, studied, probes = recognition_probes(pool, rng, level, task)
        half = DIALOG_TURNS // 2  # as many "yes" as "no"
        other = [w for w in pool.draw(task, rng, level)["fields"]["list"] if w not in studied]
        probes = ([p for p in probes if p[1] == "yes"][:half]
                  + [p for p in probes if p[1] == "no"][:half - 1] + ([(rng.choice(other), "no")] if other else []))
        rng.shuffle(probes)
        if bridge:  # the question's head is cut to its last j words; the gap runs over its tail and the chat suffix
            gaps = [rng.random() for _ in probes]
            heads = [round(g * len(ASK_HEAD)) for g in gaps]
            turns = [(" ".join(ASK_HEAD[len(ASK_HEAD) - j:] + [w]), a) for (w, a), j in zip(probes, heads)]
            if heads[0] == 0:  # the probe word with its space, as check_drm writes it
                turns[0] = (" " + turns[0][0], turns[0][1])
            return dict(task=f"ask_bridge_{task}", context=context, inline=True, tail=ASK_TAIL, turns=turns, gaps=gaps)
        return dict(task=f"ask_{task}", context=context, turns=[(f"Was the word {w}{ASK_TAIL}", a) for w, a in probes])
    return make


AUX = {"drill": make_drill, "repeat": make_repeat, "pair": make_pair, "lookup": make_lookup, "recite": make_recite,
       "dialog_dictionary": make_dialog_dictionary, "dialog_inline": make_dialog_inline,
       "dialog_bridge": make_dialog_bridge, "dialog_list": make_dialog_list, "dialog_mixed": make_dialog_mixed,
       "dialog_drm": make_dialog_recognition("drm"), "dialog_conjunction": make_dialog_recognition("conjunction"),
       "check_drm": make_check("drm"), "check_conjunction": make_check("conjunction"),
       "ask_drm": make_ask("drm"), "ask_conjunction": make_ask("conjunction"),
       "ask_bridge_drm": make_ask("drm", bridge=True), "ask_bridge_conjunction": make_ask("conjunction", bridge=True)}


def draw_item(pool, rng, level, mix=None):
    names, weights = zip(*(mix or MIX).items())
    task = rng.choices(names, weights)[0]
    return AUX[task](pool, rng, level) if task in AUX else pool.draw(task, rng, level)


def segments(family, item):
    """The runner's split (include/hylens/experiments/prompt.hpp): context segment and query segment."""
    c = CHAT[family]
    return c["bos"] + c["prefix"] + item["context"], item["query"] + c["suffix"]


def prompt_text(family, item):
    return "".join(segments(family, item))


# ---------------------------------------------------------------------------------------
# Family configurations (the organism sizes). Field names are the real checkpoints'.

def make_config(family, V, end_id, bos_id, H=64, L=4):
    """The family's config at hidden size H (MLP and Mamba inner width 2H; attention heads keep head_dim 16)
    and L layers (a multiple of 4: Qwen3.5 one attention layer in four, Granite the pattern
    [mamba, mamba, attention, mamba] repeated, Falcon-H1 every layer parallel)."""
    if L % 4:
        raise ValueError(f"{L} layers: the organisms' layer patterns need a multiple of 4")
    if family == "qwen35":
        text = {
            "model_type": "qwen3_5_text", "vocab_size": V, "hidden_size": H, "num_hidden_layers": L,
            "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "hidden_act": "silu",
            "max_position_embeddings": 4096, "initializer_range": 0.02, "rms_norm_eps": 1e-6, "use_cache": True,
            "tie_word_embeddings": False, "attention_bias": False, "attention_dropout": 0.0, "attn_output_gate": True,
            "linear_conv_kernel_dim": 4, "linear_key_head_dim": 16, "linear_value_head_dim": 16,
            "linear_num_key_heads": 2, "linear_num_value_heads": 4, "full_attention_interval": 4,
            "layer_types": ["full_attention" if (i + 1) % 4 == 0 else "linear_attention" for i in range(L)],
            "rope_parameters": {"rope_type": "default", "rope_theta": 10000000.0, "partial_rotary_factor": 0.25,
                                "mrope_section": [1, 1, 1], "mrope_interleaved": True},
            "bos_token_id": None, "eos_token_id": end_id, "pad_token_id": None, "dtype": "float32",
            "intermediate_size": 2 * H,
        }
        return {"architectures": ["Qwen3_5ForCausalLM"], "model_type": "qwen3_5", "text_config": text,
                "tie_word_embeddings": False, "eos_token_id": end_id}
    if family == "granite_h":
        return {
            "architectures": ["GraniteMoeHybridForCausalLM"], "model_type": "granitemoehybrid", "vocab_size": V,
            "hidden_size": H, "intermediate_size": 0, "num_hidden_layers": L, "num_attention_heads": 4,
            "num_key_value_heads": 2, "hidden_act": "silu", "max_position_embeddings": 4096,
            "initializer_range": 0.02, "rms_norm_eps": 1e-5, "use_cache": True, "pad_token_id": end_id,
            "bos_token_id": end_id, "eos_token_id": end_id, "tie_word_embeddings": True,
            "attention_bias": False, "attention_dropout": 0.0, "embedding_multiplier": 12.0,
            "logits_scaling": 2.0, "residual_multiplier": 0.22, "attention_multiplier": 1.0 / 16.0,
            "num_local_experts": 0, "num_experts_per_tok": 0, "output_router_logits": False,
            "router_aux_loss_coef": 0.01, "shared_intermediate_size": 2 * H, "position_embedding_type": "nope",
            "layer_types": ["mamba", "mamba", "attention", "mamba"] * (L // 4), "mamba_n_heads": 4, "mamba_n_groups": 1,
            "mamba_d_state": 16, "mamba_d_head": H // 2, "mamba_d_conv": 4, "mamba_expand": 2, "mamba_chunk_size": 64,
            "mamba_conv_bias": True, "mamba_proj_bias": False, "dtype": "float32",
        }
    if family == "falcon_h1":
        return {
            "architectures": ["FalconH1ForCausalLM"], "model_type": "falcon_h1", "vocab_size": V,
            "tie_word_embeddings": False, "hidden_size": H, "intermediate_size": 2 * H, "num_hidden_layers": L,
            "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "hidden_act": "silu",
            "initializer_range": 0.02, "rms_norm_eps": 1e-5, "use_cache": True, "pad_token_id": end_id,
            "bos_token_id": bos_id, "eos_token_id": end_id, "max_position_embeddings": 4096,
            "attention_dropout": 0.0, "attention_bias": False, "mlp_bias": False, "mamba_d_ssm": 2 * H,
            "mamba_n_heads": 4, "mamba_d_head": H // 2, "mamba_n_groups": 1, "mamba_d_state": 16, "mamba_d_conv": 4,
            "mamba_expand": 2, "mamba_chunk_size": 64, "mamba_conv_bias": True, "mamba_proj_bias": False,
            "mamba_norm_before_gate": False, "mamba_rms_norm": False, "projectors_bias": False,
            "rope_theta": 100000000000.0, "rope_parameters": {"rope_type": "default", "rope_theta": 100000000000.0},
            "lm_head_multiplier": 0.5, "embedding_multiplier": 2.0, "mlp_multipliers": [1.0, 0.75],
            "key_multiplier": 0.5, "attention_out_multiplier": 0.9375, "attention_in_multiplier": 1.0,
            "ssm_multipliers": [1.0, 1.0, 1.0, 1.0, 1.0], "ssm_in_multiplier": 1.0, "ssm_out_multiplier": 1.0,
            "dtype": "float32",
        }
    raise ValueError(family)


# ---------------------------------------------------------------------------------------

def recognition_words(pool):
    """Every word the drm / conjunction generators study or probe (lists, probes, lures)."""
    return sorted({w for t in ("drm", "conjunction") for it in pool.items[t]
                   for w in it["fields"]["list"] + [it["fields"]["probe"], it["fields"]["lure"]]})


def build_tokenizer(family, seed, pool, vocab_size=1024, whole_words=False):
    """BPE on a sample of the training text. whole_words: the recognition words and the circuit
    study's lookup words are added to the sample often enough that BPE makes each one token, so
    that whether a probe was studied, or which value a key maps to, is a match of one token, not
    of a spelling."""
    c = CHAT[family]
    rng = random.Random(f"tokenizer:{seed}")
    texts = [c["prefix"], c["suffix"]] * 4000  # the wrapper is in every prompt
    for _ in range(4000):
        it = draw_item(pool, rng, rng.random())
        texts += [it["context"], it["query"], it["expected"][0]]
    if whole_words:  # the circuit study's lookup words too (" red", "=red": both forms occur)
        words = recognition_words(pool) + LOOKUP_KEYS + LOOKUP_VALUES
        texts += ([" " + w for w in words] + LOOKUP_KEYS + LOOKUP_VALUES) * 400
    split = bpe.Tokenizer([], c["specials"])._split
    plain = [p for t in texts for p in split.split(t) if p and p not in c["specials"]]
    return bpe.Tokenizer(bpe.train(plain, vocab_size - 256 - len(c["specials"])), c["specials"])


def encode_item(tok, family, item):
    ctx, qry = segments(family, item)
    p = tok.encode(ctx + qry + item["prefill"]) if "prefill" in item else tok.encode(ctx) + tok.encode(qry)
    a = tok.encode(item["expected"][0]) + [tok.specials[CHAT[family]["end"]]]
    return p, a


def encode_segments(tok, family, item):
    """The item's token ids and, per token, whether it is an answer token (a target of the answer
    loss) or a prompt token (the next-token loss). A dialog's later turns are rendered as
    end + turn + query + suffix after each answer."""
    if "turns" not in item:
        p, a = encode_item(tok, family, item)
        return p + a, [False] * len(p) + [True] * len(a)
    c, end = CHAT[family], tok.specials[CHAT[family]["end"]]
    ids = tok.encode(c["bos"] + c["prefix"] + item["context"])
    is_answer = [False] * len(ids)
    # The bridges' gap: the first k tokens of the question's tail (ask_bridge) and the chat suffix.
    suffix = tok.encode(item.get("tail", "")) + tok.encode(c["suffix"]) if "gaps" in item else []
    for i, (query, answer) in enumerate(item["turns"]):
        if item.get("inline"):  # the bridge's gap replaces the inline form's space before the answer
            q = tok.encode((" " if i else "") + query + ("" if suffix else " "))
            k = int(item["gaps"][i] * (len(suffix) + 1)) if suffix else 0
            # ask_bridge at k = 0 is check_drm's turn, the answer after a space; dialog_bridge at
            # k = 0 keeps no space (as the shipped organisms' recorded batches were drawn)
            q += suffix[:k] if k or "tail" not in item else tok.encode(" ")
            a = tok.encode(answer + ".") + ([end] if i + 1 == len(item["turns"]) else [])
        else:
            q = tok.encode((c["turn"] if i else "") + query + c["suffix"])
            a = tok.encode(answer) + [end]
        ids += q + a
        is_answer += [False] * len(q) + [True] * len(a)
    return ids, is_answer


def draw_sequences(tok, family, pool, seed, step, bs, level, mix=None, stream="train"):
    """The batch of step `step`: bs encoded items (ids, is_answer) from the step's own stream."""
    rng = random.Random(f"{stream}:{seed}:{step}")
    return [encode_segments(tok, family, draw_item(pool, rng, level, mix)) for _ in range(bs)]


def make_batch(tok, family, pool, seed, step, bs, level, mix=None, stream="train"):
    return batch_tensors(draw_sequences(tok, family, pool, seed, step, bs, level, mix, stream))


def batch_tensors(seqs):
    """Inputs, targets and the answer / prompt loss weights of sequences, padded to the longest."""
    bs = len(seqs)
    T = max(len(s) for s, _ in seqs) - 1
    ids = torch.zeros(bs, T, dtype=torch.long)
    tgt = torch.zeros(bs, T, dtype=torch.long)
    w_ans = torch.zeros(bs, T)
    w_lm = torch.zeros(bs, T)
    for b, (s, is_answer) in enumerate(seqs):
        n = len(s) - 1
        ids[b, :n] = torch.tensor(s[:-1])
        tgt[b, :n] = torch.tensor(s[1:])
        target_is_answer = torch.tensor(is_answer[1:], dtype=torch.bool)
        w_ans[b, :n] = target_is_answer.float()
        w_lm[b, :n] = (~target_is_answer).float()
    return ids, tgt, w_ans, w_lm


def rank_share(seqs, rank, world):
    """The sequences of one rank in data-parallel training (--ranks): the batch sorted by length
    and dealt out in snake order (0, 1, 1, 0, 0, 1, ...), so the ranks get about as many tokens
    and each pads only to its own longest sequence."""
    order = sorted(range(len(seqs)), key=lambda b: (-len(seqs[b][0]), b))
    dealt = [i % world if (i // world) % 2 == 0 else world - 1 - i % world for i in range(len(order))]
    return [seqs[b] for b, r in zip(order, dealt) if r == rank]


def batch_loss(model, ids, tgt, w_ans, w_lm, n_ans, n_lm, lm_weight):
    """The training loss of a padded batch: the answer tokens' and the prompt tokens' negative
    log-likelihood summed and divided by n_ans / n_lm (the whole batch's token counts), the prompt
    part weighted by lm_weight. Returns (loss, answer part, prompt part, sequences whose answer
    tokens are all predicted right)."""
    logits = model(ids)
    nll = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1), reduction="none").view_as(w_ans)
    loss_ans = (nll * w_ans).sum() / n_ans
    loss_lm = (nll * w_lm).sum() / n_lm
    with torch.no_grad():
        n_ok = float(((((logits.argmax(-1) != tgt).float() * w_ans).sum(-1)) == 0).sum())
    return loss_ans + lm_weight * loss_lm, loss_ans, loss_lm, n_ok


def share_backward(model, seqs, rank, world, lm_weight, micro):
    """Forward and backward of one rank's share of the batch, in micro-batches of at most `micro`
    sequences of similar length (the share is sorted longest first), so that short sequences are
    not padded to the batch's longest. The answer and prompt losses of the whole batch are means
    over all its answer / prompt tokens: each micro-batch sums the negative log-likelihood of its
    sequences and divides by the whole batch's token counts, so the gradients of the micro-batches
    and ranks add up to the gradient of the whole batch (up to float rounding). Returns the
    share's parts of the answer and prompt losses and its sequences fully right."""
    n_ans = sum(sum(a[1:]) for _, a in seqs)
    n_lm = sum(len(a) - 1 - sum(a[1:]) for _, a in seqs)
    share = rank_share(seqs, rank, world)
    part_ans = part_lm = n_ok = 0.0
    for k in range(0, len(share), micro):
        loss, loss_ans, loss_lm, ok = batch_loss(model, *batch_tensors(share[k:k + micro]), n_ans, n_lm, lm_weight)
        loss.backward()
        n_ok += ok
        part_ans += loss_ans.item()
        part_lm += loss_lm.item()
    return part_ans, part_lm, n_ok


def sum_gradients(model):
    """Adds up the ranks' gradients (one all-reduce of all of them flattened)."""
    grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in model.parameters()]
    flat = torch.cat([g.reshape(-1) for g in grads])
    torch.distributed.all_reduce(flat)
    i = 0
    for p in model.parameters():
        n = p.numel()
        p.grad = flat[i:i + n].view_as(p).clone()
        i += n


def new_model(family, cfg, seed):
    """The organism at its initial weights: families.py's init, then embeddings N(0, 0.5) (Granite,
    whose embedding multiplier is 12: N(0, 0.1)) from the seed."""
    model = families.CausalLM(family, cfg, seed=seed)
    with torch.no_grad():
        std = 0.1 if family == "granite_h" else 0.5
        model.model.embed_tokens.weight.normal_(0.0, std, generator=torch.Generator().manual_seed(seed + 7))
    return model


RESIDUAL_WRITERS = ("out_proj", "o_proj", "down_proj", "output_linear")


def grow(model, state):
    """Loads a checkpoint's weights into a model with at least as many layers: the checkpoint's
    layers stay layers 0..n-1, the new ones keep their initial weights except the projections that
    write into the residual stream, which start at zero, so the grown model computes exactly what
    the checkpoint did. Returns the new layers' indices (empty when the sizes match)."""
    missing, unexpected = model.load_state_dict(state, strict=False)
    if unexpected:
        raise ValueError(f"checkpoint tensors the model lacks: {unexpected[:4]}")
    new = sorted({int(n.split(".")[2]) for n in missing if n.startswith("model.layers.")})
    n_layers = len(model.model.layers)
    if any(not n.startswith("model.layers.") for n in missing) or new != list(range(n_layers - len(new), n_layers)):
        raise ValueError(f"model tensors the checkpoint lacks outside new last layers: {missing[:4]}")
    with torch.no_grad():
        for n, p in model.named_parameters():
            parts = n.split(".")
            if n.startswith("model.layers.") and int(parts[2]) in new and parts[-2] in RESIDUAL_WRITERS:
                p.zero_()
    return new


def param_groups(model, lr, attn_lr_mult):
    attn, other_decay, other_nodecay = [], [], []
    for n, p in model.named_parameters():
        if ".self_attn." in n:
            attn.append(p)
        elif p.ndim >= 2 and "embed" not in n:
            other_decay.append(p)
        else:
            other_nodecay.append(p)
    return [{"params": attn, "lr": lr * attn_lr_mult, "base": lr * attn_lr_mult, "weight_decay": 0.01},
            {"params": other_decay, "lr": lr, "base": lr, "weight_decay": 0.01},
            {"params": other_nodecay, "lr": lr, "base": lr, "weight_decay": 0.0}]


def greedy(model, tok, family, item, max_new=24):
    ctx, qry = segments(family, item)
    ids = tok.encode(ctx) + tok.encode(qry)
    stops = {tok.specials[s] for s in CHAT[family]["specials"] if s in ("<|im_end|>", "<|end_of_text|>", "<|endoftext|>")}
    out = []
    with torch.no_grad():
        for _ in range(max_new):
            nxt = int(model(torch.tensor([ids + out]))[0, -1].argmax())
            if nxt in stops:
                break
            out.append(nxt)
    return tok.decode(out)


def quick_eval(model, tok, family, eval_pool, n):
    """Exact-match FULL accuracy of the greedy answer on the first n evaluation items of each task
    (a training-time monitor; the model card's numbers come from hylens experiment channels)."""
    model.eval()
    acc = {}
    for task in TASKS:
        items = eval_pool.items[task][:n]
        acc[task] = sum(greedy(model, tok, family, it) in it["expected"] for it in items) / len(items)
    model.train()
    return acc


def reference_items(eval_pool):
    """Fixed prompts for the equality test: the first evaluation item of each task."""
    return [min(eval_pool.items[t], key=lambda it: (it["seed"], it["index"])) for t in TASKS]


def tokenizer_samples(family, pool, n=40):
    """Training texts (chat-wrapped prompt + answer) for the tokenizer round-trip test."""
    rng = random.Random("tokenizer-test")
    return [prompt_text(family, it) + it["expected"][0] + CHAT[family]["end"]
            for it in (draw_item(pool, rng, 1.0) for _ in range(n))]


def export(model, tok, cfg, family, out, ref_dir, pool, eval_pool, meta):
    """Writes the checkpoint folder, and the equality-test reference under ref_dir."""
    os.makedirs(out, exist_ok=True)
    os.makedirs(ref_dir, exist_ok=True)
    sd = {k: v.detach().float().contiguous() for k, v in model.state_dict().items()}
    st_io.save(sd, os.path.join(out, "model.safetensors"), metadata={"format": "pt", **meta})
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
        f.write("\n")
    with open(os.path.join(out, "tokenizer.json"), "w") as f:
        json.dump(tok.to_json(), f, ensure_ascii=False)
    # Reference logits: the float32 weights run in float64, stored as float32. The tolerance
    # follows tests/golden's rule: 4 x the float32 torch run's own distance to the float64 run,
    # at least 1e-5 x max(|logit|, 1).
    m64 = families.CausalLM(family, cfg).double()
    m64.load_state_dict({k: v.double() for k, v in sd.items()})
    m32 = families.CausalLM(family, cfg)
    m32.load_state_dict(sd)
    ref, prompts, d32, big = {}, [], 0.0, 1.0
    with torch.no_grad():
        for i, it in enumerate(reference_items(eval_pool)):
            ctx, qry = segments(family, it)
            ids = tok.encode(ctx) + tok.encode(qry) + tok.encode(it["expected"][0])
            l64 = m64(torch.tensor([ids]))[0]
            d32 = max(d32, (m32(torch.tensor([ids]))[0].double() - l64).abs().max().item())
            big = max(big, l64.abs().max().item())
            ref[f"prompt.{i}.ids"] = torch.tensor(ids, dtype=torch.long)
            ref[f"prompt.{i}.logits"] = l64.float()
            prompts.append({"task": it["task"], "seed": it["seed"], "index": it["index"], "context": it["context"],
                            "query": it["query"], "answer": it["expected"][0], "ids": ids})
    atol = max(4.0 * d32, 1e-5 * big)
    ref["atol"] = torch.tensor([atol], dtype=torch.float32)
    st_io.save(ref, os.path.join(ref_dir, "reference_logits.safetensors"),
               metadata={"source": "training/train_organism.py: torch float64 forward of the shipped float32 weights",
                         "float32_torch_vs_float64": f"{d32:.3e}", "atol_rule": "max(4 x float32 torch error, 1e-5 x max(|logit|, 1))"})
    samples = [{"text": t, "ids": tok.encode(t)} for t in tokenizer_samples(family, pool)]
    with open(os.path.join(ref_dir, "prompts.json"), "w") as f:
        json.dump({"family": family, "chat_end": CHAT[family]["end"], "prompts": prompts, "tokenizer_samples": samples},
                  f, indent=1)
        f.write("\n")


PHASES_FILE = "phases.json"
LOG_HEADER = "phase,step,wall_s,lr,loss_answer,loss_lm,answer_acc,curriculum_level\n"


def phase_entry(args, mix):
    """What a phase was trained with: the card's training section is written from these."""
    return {"out": os.path.basename(os.path.normpath(args.out)),
            "init_from": os.path.basename(os.path.dirname(os.path.abspath(args.init_from))) if args.init_from else None,
            "family": args.family, "seed": args.seed, "steps": args.steps, "stop_at": args.stop_at,
            "batch": args.batch, "lr": args.lr, "attn_lr_mult": args.attn_lr_mult, "warmup": args.warmup,
            "curriculum": args.curriculum, "lm_weight": args.lm_weight, "hidden": args.hidden, "layers": args.layers,
            "stream": args.stream, **({"whole_words": True} if args.whole_words else {}),
            **({"ranks": args.ranks} if args.ranks > 1 else {}), **({"micro": args.micro} if args.micro else {}),
            "mix": {k: v for k, v in (mix or MIX).items() if v > 0}, "steps_done": 0, "wall_s": 0}


def read_phases(folder):
    path = os.path.join(folder, PHASES_FILE)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def write_phases(folder, phases):
    with open(os.path.join(folder, PHASES_FILE) + ".tmp", "w") as f:
        json.dump(phases, f, indent=1)
        f.write("\n")
    os.replace(os.path.join(folder, PHASES_FILE) + ".tmp", os.path.join(folder, PHASES_FILE))


def read_log_rows(folder):
    """The rows of a folder's training_log.csv with the phase column first (logs written before
    phases were recorded have no phase column: phase 0)."""
    path = os.path.join(folder, "training_log.csv")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        lines = f.read().splitlines()
    if not lines:
        return []
    if lines[0].startswith("phase,"):
        return lines[1:]
    return ["0," + ln for ln in lines[1:]]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--family", required=True, choices=sorted(CHAT))
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--attn-lr-mult", type=float, default=2.0)
    ap.add_argument("--max-wall-min", type=float, default=90.0,
                    help="safety stop: export and end when this much training time is spent")
    ap.add_argument("--lm-weight", type=float, default=0.1)
    ap.add_argument("--curriculum", type=float, default=0.4, help="fraction of steps to reach the full pair count")
    ap.add_argument("--warmup", type=int, default=150)
    ap.add_argument("--resume", action="store_true")
    ap.add_argument("--stop-at", type=int, default=None,
                    help="export and stop after this step (the schedule still follows --steps)")
    ap.add_argument("--export-only", action="store_true", help="re-export the folder from checkpoint.pt and exit")
    ap.add_argument("--ref-dir", default=None, help="equality-test data (default tests/organisms/data/<out name>)")
    ap.add_argument("--export-every", type=int, default=500)
    ap.add_argument("--eval-items", type=int, default=20)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--ranks", type=int, default=1,
                    help="data-parallel processes (one per core): each takes a share of every batch, the "
                         "gradients are added up before each step (the same gradient up to float rounding)")
    ap.add_argument("--micro", type=int, default=0,
                    help="at most this many sequences of similar length per forward (0: a rank's whole share); "
                         "the gradient is the whole batch's up to float rounding")
    ap.add_argument("--hidden", type=int, default=64, help="hidden size (MLP and Mamba inner width twice that)")
    ap.add_argument("--layers", type=int, default=4,
                    help="layers (a multiple of 4); with --init-from from fewer layers the model grows (grow())")
    ap.add_argument("--mix", default=None,
                    help="task weights as task=w,task=w (default: the MIX table); tasks not named are not drawn")
    ap.add_argument("--init-from", default=None,
                    help="start a new phase from this checkpoint.pt's weights (fresh optimizer, step 0, own schedule)")
    ap.add_argument("--stream", default="train",
                    help="name of the batch stream: batch s is drawn from random.Random(f'{stream}:{seed}:{s}')")
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--whole-words", action="store_true",
                    help="a fresh run's tokenizer (1,536 entries instead of 1,024) makes every drm / "
                         "conjunction word and every lookup key and value one token (build_tokenizer)")
    ap.add_argument("--data", default=os.path.join(here, "..", "build-organisms", "items", "train"),
                    help="folder of <task>.jsonl training items (training/make_data.sh)")
    ap.add_argument("--eval-data", default=os.path.join(here, "..", "build-organisms", "items", "eval"),
                    help="folder of <task>.jsonl evaluation items (monitor and reference prompts)")
    args = ap.parse_args()
    mix = None
    if args.mix:
        mix = {}
        for part in args.mix.split(","):
            name, _, w = part.partition("=")
            if name not in MIX or not w:
                ap.error(f"--mix: '{part}' is not task=weight with a task of {sorted(MIX)}")
            mix[name] = float(w)
    if args.ranks < 1 or (args.ranks > 1 and args.export_only):
        ap.error("--ranks: at least 1, and 1 with --export-only")
    if args.ranks > args.batch:
        ap.error(f"--ranks {args.ranks}: more ranks than sequences in a batch ({args.batch})")
    # The vocabulary must be the one the weights were trained with: a new phase (--init-from) or a
    # resumed run reads the tokenizer.json beside its weights (the training items, from which a
    # fresh run trains the tokenizer, may have been regenerated since).
    if args.init_from and not args.resume:
        tok_file = os.path.join(os.path.dirname(os.path.abspath(args.init_from)), "tokenizer.json")
        if not os.path.exists(tok_file):
            ap.error(f"--init-from: no tokenizer.json beside {args.init_from}")
    else:
        tok_file = os.path.join(args.out, "tokenizer.json") if args.resume or args.export_only else None
    if args.ranks > 1 and os.environ.get("OPENBLAS_NUM_THREADS") != "1":
        # One core per rank: torch's own threads are set below, but the BLAS torch calls reads
        # its thread count from the environment when it is loaded (on its own it takes every core).
        os.execve(sys.executable, [sys.executable] + sys.argv,
                  dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1"))
    os.makedirs(args.out, exist_ok=True)
    if args.ranks == 1:
        return train(0, 1, args, mix, tok_file, None)
    # Data parallel: one process per rank (forked), each on its share of every batch, the
    # gradients added up by an all-reduce (gloo) before each optimizer step, so every rank holds
    # the same weights; rank 0 alone writes the folder, the log and the monitor.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    torch.multiprocessing.start_processes(train, args=(args.ranks, args, mix, tok_file, port), nprocs=args.ranks,
                                          start_method="fork")
    return 0


def train(rank, world, args, mix, tok_file, port):
    torch.set_num_threads(args.threads)
    if world > 1:
        torch.distributed.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                                             world_size=world)
    lead = rank == 0
    say = print if lead else (lambda *a, **k: None)
    pool, eval_pool = Pool(args.data), Pool(args.eval_data)
    if tok_file and os.path.exists(tok_file):
        tok = bpe.Tokenizer.from_json(tok_file)
        say(f"tokenizer from {tok_file}", flush=True)
    else:
        tok = build_tokenizer(args.family, args.seed, pool, 1536 if args.whole_words else 1024, args.whole_words)
    end_id = tok.specials[CHAT[args.family]["end"]]
    bos_id = tok.specials.get("<|begin_of_text|>", end_id)
    cfg = make_config(args.family, len(tok), end_id, bos_id, args.hidden, args.layers)
    model = new_model(args.family, cfg, args.seed)
    opt = torch.optim.AdamW(param_groups(model, args.lr, args.attn_lr_mult), betas=(0.9, 0.98))
    ckpt_path = os.path.join(args.out, "checkpoint.pt")
    log_path = os.path.join(args.out, "training_log.csv")
    step, wall = 0, 0.0
    ref_dir = args.ref_dir or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "organisms",
                                           "data", os.path.basename(os.path.normpath(args.out)))
    if args.init_from and not args.resume:
        grown = grow(model, torch.load(args.init_from)["model"])
        say(f"phase starts from the weights of {args.init_from}"
            + (f" (grown: layers {grown} new, their outputs zero)" if grown else ""), flush=True)
    # phases.json: every phase that led to these weights (a new phase copies its parent's list and
    # its parent's log rows, so the folder tells the whole history).
    if (args.resume or args.export_only) and os.path.exists(ckpt_path):
        ck = torch.load(ckpt_path)
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["opt"])
        step, wall = ck["step"], ck["wall"]
        say(f"resumed at step {step} ({wall:.0f} s trained)", flush=True)
        phases = read_phases(args.out) or [phase_entry(args, mix)]
        phase = len(phases) - 1
        if not args.export_only:  # a resumed run may stretch the schedule; the record says the last one
            phases[-1].update({k: v for k, v in phase_entry(args, mix).items()
                               if k not in ("init_from", "steps_done", "wall_s")})
        rows = [r for r in read_log_rows(args.out)  # drop log lines written after the checkpoint
                if int(r.split(",")[0]) < phase or int(r.split(",")[1]) <= step]
    else:
        parent = os.path.dirname(os.path.abspath(args.init_from)) if args.init_from else None
        phases = (read_phases(parent) or [{"out": os.path.basename(parent), "unrecorded": True}]) if parent else []
        rows = read_log_rows(parent) if parent else []
        phases.append(phase_entry(args, mix))
        phase = len(phases) - 1
    if not args.export_only and lead:
        with open(log_path, "w") as f:
            f.write(LOG_HEADER + "".join(r + "\n" for r in rows))
        write_phases(args.out, phases)
    if args.export_only:
        export(model, tok, cfg, args.family, args.out, ref_dir, pool, eval_pool,
               {"family": args.family, "seed": args.seed, "step": step, "wall_s": f"{wall:.0f}"})
        return 0
    say(f"{args.family}: vocab {len(tok)}, params {sum(p.numel() for p in model.parameters())}"
        + (f", {world} ranks" if world > 1 else ""), flush=True)

    t0 = time.time() - wall
    acc_loss = acc_lm = acc_ok = acc_n = 0.0
    # The time limit is rank 0's clock; with several ranks its verdict travels with each step's
    # all-reduce, so every rank stops after the same step.
    def out_of_time():
        return time.time() - t0 >= 60.0 * args.max_wall_min

    over = out_of_time()
    while step < args.steps and not over and step != args.stop_at:
        level = min(1.0, step / max(1.0, args.curriculum * args.steps))
        lr_f = min(1.0, (step + 1) / args.warmup) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * step / args.steps)))
        for g in opt.param_groups:
            g["lr"] = g["base"] * lr_f
        if world == 1 and not args.micro:
            ids, tgt, w_ans, w_lm = make_batch(tok, args.family, pool, args.seed, step, args.batch, level, mix,
                                               args.stream)
            loss, loss_ans, loss_lm, n_ok = batch_loss(model, ids, tgt, w_ans, w_lm, w_ans.sum(), w_lm.sum(),
                                                       args.lm_weight)
            opt.zero_grad()
            loss.backward()
            stats = [loss_ans.item(), loss_lm.item(), n_ok]
            over = out_of_time()
        else:
            seqs = draw_sequences(tok, args.family, pool, args.seed, step, args.batch, level, mix, args.stream)
            opt.zero_grad()
            stats = list(share_backward(model, seqs, rank, world, args.lm_weight, args.micro or args.batch))
            over = lead and out_of_time()
            if world > 1:
                sum_gradients(model)
                red = torch.tensor(stats + [float(over)], dtype=torch.float64)
                torch.distributed.all_reduce(red)
                stats, over = red[:3].tolist(), bool(red[3] > 0)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        acc_loss += stats[0]
        acc_lm += stats[1]
        acc_ok += stats[2] / args.batch
        acc_n += 1
        step += 1
        if not lead:
            continue
        if step % 50 == 0 or step == args.steps or over:
            wall = time.time() - t0
            with open(log_path, "a") as f:
                f.write(f"{phase},{step},{wall:.1f},{args.lr * lr_f:.3e},{acc_loss / acc_n:.4f},{acc_lm / acc_n:.4f},"
                        f"{acc_ok / acc_n:.4f},{level:.3f}\n")
            print(f"step {step} wall {wall:.0f}s loss_ans {acc_loss / acc_n:.4f} lm {acc_lm / acc_n:.3f} "
                  f"acc {acc_ok / acc_n:.3f} level {level:.2f}", flush=True)
            acc_loss = acc_lm = acc_ok = acc_n = 0.0
        if step % args.export_every == 0 or step == args.steps or over or step == args.stop_at:
            wall = time.time() - t0
            torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step, "wall": wall}, ckpt_path + ".tmp")
            os.replace(ckpt_path + ".tmp", ckpt_path)
            export(model, tok, cfg, args.family, args.out, ref_dir, pool, eval_pool,
                   {"family": args.family, "seed": args.seed, "step": step, "wall_s": f"{wall:.0f}"})
            phases[-1].update(steps_done=step, wall_s=round(wall))
            write_phases(args.out, phases)
            te = time.time()
            acc = quick_eval(model, tok, args.family, eval_pool, args.eval_items)
            t0 += time.time() - te  # evaluation is not training time
            print(f"eval step {step}: " + " ".join(f"{k} {v:.2f}" for k, v in acc.items()), flush=True)
            with open(os.path.join(args.out, "quick_eval.jsonl"), "a") as f:
                f.write(json.dumps({"step": step, "wall_s": round(wall), "seed": 1, "items": args.eval_items, "acc": acc}) + "\n")
    if world > 1:
        torch.distributed.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
