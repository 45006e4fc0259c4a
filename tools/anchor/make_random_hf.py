#!/usr/bin/env python3
"""Write a Hugging Face model folder with random weights for a hybrid language model.

Purpose: performance anchors for an engine that loads HF checkpoints
(config.json + safetensors), at the same shapes as the random GGUF files of
make_random_gguf.py. For a preset and a dtype it writes

  OUT/config.json             the released model's config.json (published field names
                              and values; only `dtype` / `torch_dtype` follows --dtype)
  OUT/model.safetensors       every text-model weight, HF key names and shapes; or
                              model-0000N-of-0000M.safetensors + model.safetensors.index.json
                              when the tensors exceed --max-shard-bytes (default 2e9)
  OUT/random_weights.json     provenance: preset, seed, parameter counts, sizes, notes

Presets (see RELEASED below for where each value comes from):
  qwen35-0.8b          Qwen/Qwen3.5-0.8B               qwen3_5: nested text_config,
                                                       keys under model.language_model.
  granite-4.0-h-350m   ibm-granite/granite-4.0-h-350m  granitemoehybrid
  granite-4.0-h-1b     ibm-granite/granite-4.0-h-1b    granitemoehybrid
  falcon-h1-0.5b       tiiuae/Falcon-H1-0.5B-Base      falcon_h1

Weights: drawn exactly as make_random_gguf.py draws them (its tensor list, its order,
its make_data(), same --seed and --std), then mapped to the HF tensors: matrices
N(0, std); RMSNorm weights at the family's identity (1; 0 for Qwen3.5's zero-centred
(1 + w) norms, whose GDN output norm stays a plain 1); A_log = log(-A) with
A = -exp(U[log 1, log 16]); dt_bias = softplus^-1(dt), dt log-uniform in
[1e-3, 1e-1]; D = 1; conv kernels U(-0.5, 0.5), conv bias 0. An F32 folder therefore
holds the numbers of the F32 GGUF made with the same seed (A_log up to float32
rounding), and Qwen3.5 and Granite compute the same function as their GGUF twins.
Falcon-H1 does not by default: its config keeps the released µP multipliers, which HF
applies at run time, while llama.cpp reads GGUF weights as already multiplied;
--gguf-equivalent divides the Falcon weights by those multipliers instead.

dtype: f32 writes every tensor F32; bf16 writes every tensor BF16 (round to nearest
even), as save_pretrained of a bfloat16 model does. --small-f32 keeps the 1-D
tensors and conv kernels F32 in a bf16 folder, as the GGUF files do.

Left out (the released Qwen3.5 checkpoint has them; a text engine skips them): the
vision tower model.visual.* (--with-vision adds it, random) and the multi-token
prediction block mtp.* (no transformers module defines it). config.json still
carries vision_config and mtp_num_hidden_layers as released.

--transformers <checkout>/src/transformers builds the real model class of that
checkout (through ../golden/hf_shim.py; initialisers skipped, so no memory is
touched) from the config being written and requires the planned tensors to be
exactly its parameters (tied lm_head and vision tower aside). --check then runs a
float32 forward of a few tokens through the HF code (torch fallback paths) on the
written folder and records logit statistics; --check-dir DIR does only that.

Needs numpy, and torch (1.13 is enough) for --transformers / --check: Debian's
python3-numpy and python3-torch with the system python3, as for ../golden.

Examples:
  python3 make_random_hf.py --list-presets
  python3 make_random_hf.py --preset granite-4.0-h-350m --print-config
  python3 make_random_hf.py --preset qwen35-0.8b --dtype bf16 --out OUT/qwen35-0.8b-bf16 \\
      --transformers TRANSFORMERS/src/transformers --check
  python3 make_random_hf.py --preset falcon-h1-0.5b --set num_hidden_layers=2 --set vocab_size=512 \\
      --out OUT/tiny-falcon --transformers TRANSFORMERS/src/transformers --check
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import os
import re
import struct
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "golden"))
import make_random_gguf as G  # noqa: E402  (sibling: presets, tensor list, make_data)
import st_io  # noqa: E402  (bf16 rounding, round to nearest even)

# --------------------------------------------------------------------------
# Released configs. Values: third-party verbatim copies of the published
# config.json files found through a code index (not first-hand downloads), as
# listed in the project notes on the three architectures (docs/models.md).
# --------------------------------------------------------------------------

_QWEN35_LAYER_TYPES = (["linear_attention"] * 3 + ["full_attention"]) * 6

RELEASED: dict[str, dict] = {
    # Qwen/Qwen3.5-0.8B config.json (a verbatim `curl` of the file, copied in an agent log).
    "qwen35-0.8b": {
        "architectures": ["Qwen3_5ForConditionalGeneration"],
        "image_token_id": 248056,
        "model_type": "qwen3_5",
        "text_config": {
            "attention_bias": False, "attention_dropout": 0.0, "attn_output_gate": True,
            "dtype": "bfloat16", "eos_token_id": 248044, "full_attention_interval": 4,
            "head_dim": 256, "hidden_act": "silu", "hidden_size": 1024, "initializer_range": 0.02,
            "intermediate_size": 3584, "layer_types": list(_QWEN35_LAYER_TYPES),
            "linear_conv_kernel_dim": 4, "linear_key_head_dim": 128, "linear_num_key_heads": 16,
            "linear_num_value_heads": 16, "linear_value_head_dim": 128,
            "max_position_embeddings": 262144, "mlp_only_layers": [], "model_type": "qwen3_5_text",
            "mtp_num_hidden_layers": 1, "mtp_use_dedicated_embeddings": False,
            "num_attention_heads": 8, "num_hidden_layers": 24, "num_key_value_heads": 2,
            "rms_norm_eps": 1e-06, "tie_word_embeddings": True, "use_cache": True,
            "vocab_size": 248320, "mamba_ssm_dtype": "float32",
            "rope_parameters": {"mrope_interleaved": True, "mrope_section": [11, 11, 10],
                                "rope_type": "default", "rope_theta": 10000000,
                                "partial_rotary_factor": 0.25},
        },
        "tie_word_embeddings": True,
        "transformers_version": "4.57.0.dev0",
        "video_token_id": 248057,
        "vision_config": {
            "deepstack_visual_indexes": [], "depth": 12, "hidden_act": "gelu_pytorch_tanh",
            "hidden_size": 768, "in_channels": 3, "initializer_range": 0.02, "intermediate_size": 3072,
            "model_type": "qwen3_5", "num_heads": 12, "num_position_embeddings": 2304,
            "out_hidden_size": 1024, "patch_size": 16, "spatial_merge_size": 2, "temporal_patch_size": 2,
        },
        "vision_end_token_id": 248054,
        "vision_start_token_id": 248053,
    },
    # ibm-granite/granite-4.0-h-350m: every structural field and the multipliers from a
    # trimmed verbatim copy (a test fixture "mirroring the real checkpoint"). Added, not in
    # that copy: architectures, hidden_act, mamba_expand and mamba_chunk_size (the values
    # of all released H models), bos/pad ids (as other released Granite 3/4 configs set them),
    # torch_dtype.
    "granite-4.0-h-350m": {
        "architectures": ["GraniteMoeHybridForCausalLM"],
        "attention_bias": False, "attention_dropout": 0.0, "attention_multiplier": 0.015625,
        "bos_token_id": 100257, "embedding_multiplier": 12, "eos_token_id": 100257,
        "hidden_act": "silu", "hidden_size": 768, "intermediate_size": 2048,
        "layer_types": ["attention" if i in (10, 13, 17, 27) else "mamba" for i in range(32)],
        "logits_scaling": 3, "mamba_chunk_size": 256, "mamba_conv_bias": True, "mamba_d_conv": 4,
        "mamba_d_head": 32, "mamba_d_state": 128, "mamba_expand": 2, "mamba_n_groups": 1,
        "mamba_n_heads": 48, "mamba_proj_bias": False, "max_position_embeddings": 32768,
        "model_type": "granitemoehybrid", "num_attention_heads": 12, "num_experts_per_tok": 0,
        "num_hidden_layers": 32, "num_key_value_heads": 4, "num_local_experts": 0,
        "pad_token_id": 100256, "position_embedding_type": "nope", "residual_multiplier": 0.246,
        "rms_norm_eps": 1e-05, "rope_scaling": None, "rope_theta": 10000,
        "shared_intermediate_size": 2048, "tie_word_embeddings": True, "torch_dtype": "bfloat16",
        "use_cache": True, "vocab_size": 100352,
    },
    # ibm-granite/granite-4.0-h-1b: structural fields from a trimmed verbatim copy; the four
    # multipliers were not in it and come from make_random_gguf.py's preset (unverified).
    "granite-4.0-h-1b": {
        "architectures": ["GraniteMoeHybridForCausalLM"],
        "attention_bias": False, "attention_dropout": 0.0, "attention_multiplier": 0.0078125,
        "bos_token_id": 100257, "embedding_multiplier": 12, "eos_token_id": 100257,
        "hidden_act": "silu", "hidden_size": 1536, "intermediate_size": 4096,
        "layer_types": ["attention" if i in (5, 15, 25, 35) else "mamba" for i in range(40)],
        "logits_scaling": 6, "mamba_chunk_size": 256, "mamba_conv_bias": True, "mamba_d_conv": 4,
        "mamba_d_head": 64, "mamba_d_state": 128, "mamba_expand": 2, "mamba_n_groups": 1,
        "mamba_n_heads": 48, "mamba_proj_bias": False, "max_position_embeddings": 131072,
        "model_type": "granitemoehybrid", "num_attention_heads": 12, "num_experts_per_tok": 0,
        "num_hidden_layers": 40, "num_key_value_heads": 4, "num_local_experts": 0,
        "pad_token_id": 100256, "position_embedding_type": "nope", "residual_multiplier": 0.22,
        "rms_norm_eps": 1e-05, "rope_scaling": None, "rope_theta": 10000,
        "shared_intermediate_size": 4096, "tie_word_embeddings": True, "torch_dtype": "bfloat16",
        "use_cache": True, "vocab_size": 100352,
    },
    # tiiuae/Falcon-H1-0.5B-Base: a verbatim copy (a Megatron-Bridge test fixture), plus
    # mamba_d_ssm = 1536, which that copy lacks but the released file sets (reported from a
    # local snapshot of the 0.5B; without it transformers' FalconH1Config defaults it to
    # 1024 and rejects 24 heads x 64). Token ids are not in the copy and are left out
    # (the config class defaults then apply).
    "falcon-h1-0.5b": {
        "architectures": ["FalconH1ForCausalLM"],
        "attention_bias": False, "attention_dropout": 0.0, "attention_in_multiplier": 1.0,
        "attention_out_multiplier": 0.9375, "attn_layer_indices": None,
        "embedding_multiplier": 5.656854249492381, "head_dim": 64, "hidden_act": "silu",
        "hidden_size": 1024, "initializer_range": 0.02, "intermediate_size": 2048,
        "key_multiplier": 0.39062499999999994, "lm_head_multiplier": 0.0390625,
        "mamba_chunk_size": 128, "mamba_conv_bias": True, "mamba_d_conv": 4, "mamba_d_head": 64,
        "mamba_d_ssm": 1536, "mamba_d_state": 128, "mamba_expand": 2, "mamba_n_groups": 1,
        "mamba_n_heads": 24, "mamba_norm_before_gate": False, "mamba_proj_bias": False,
        "mamba_rms_norm": False, "mamba_use_mlp": True, "max_position_embeddings": 16384,
        "mlp_bias": False, "mlp_multipliers": [0.8838834764831844, 0.5859375],
        "model_type": "falcon_h1", "num_attention_heads": 8, "num_hidden_layers": 36,
        "num_key_value_heads": 2, "projectors_bias": False, "rms_norm_eps": 1e-05,
        "rope_scaling": None, "rope_theta": 100000000000.0, "ssm_in_multiplier": 1.25,
        "ssm_multipliers": [0.3535533905932738, 0.25, 0.3535533905932738, 0.5, 0.3535533905932738],
        "ssm_out_multiplier": 0.23570226039551587, "tie_word_embeddings": False,
        "torch_dtype": "bfloat16", "vocab_size": 32784,
    },
}

# model_type -> (transformers model dir, config module, config class, modeling module,
#                class whose parameters are the checkpoint's, text-only causal LM class)
HF_CLASSES = {
    "qwen3_5": ("qwen3_5", "configuration_qwen3_5", "Qwen3_5Config", "modeling_qwen3_5",
                "Qwen3_5ForConditionalGeneration", "Qwen3_5ForCausalLM"),
    "granitemoehybrid": ("granitemoehybrid", "configuration_granitemoehybrid", "GraniteMoeHybridConfig",
                         "modeling_granitemoehybrid", "GraniteMoeHybridForCausalLM", "GraniteMoeHybridForCausalLM"),
    "falcon_h1": ("falcon_h1", "configuration_falcon_h1", "FalconH1Config", "modeling_falcon_h1",
                  "FalconH1ForCausalLM", "FalconH1ForCausalLM"),
}

QWEN_PREFIX = "model.language_model."


def text_part(cfg: dict) -> dict:
    return cfg["text_config"] if "text_config" in cfg else cfg


def set_dtype(cfg: dict, dtype: str) -> None:
    name = {"f32": "float32", "bf16": "bfloat16"}[dtype]
    for d in (cfg, text_part(cfg)):
        for key in ("dtype", "torch_dtype"):
            if key in d:
                d[key] = name


def apply_overrides(cfg: dict, sets: list[str]) -> None:
    """--set KEY=JSON on the text config. Changing num_hidden_layers re-derives
    Qwen3.5's layer_types from full_attention_interval and truncates Granite's;
    shrinking vocab_size drops the token ids that fall outside it."""
    t = text_part(cfg)
    keys = []
    for kv in sets:
        k, v = kv.split("=", 1)
        t[k] = json.loads(v)
        keys.append(k)
        if k == "tie_word_embeddings" and t is not cfg:
            cfg[k] = t[k]
    if "vocab_size" in keys:  # token ids past a shrunk vocabulary would break padding_idx
        for d in (cfg, t):
            for k in ("bos_token_id", "eos_token_id", "pad_token_id"):
                if isinstance(d.get(k), int) and d[k] >= t["vocab_size"]:
                    d[k] = None
    if "num_hidden_layers" in keys and "layer_types" not in keys and "layer_types" in t:
        n = t["num_hidden_layers"]
        if cfg["model_type"] == "qwen3_5":
            k = t.get("full_attention_interval", 4)
            t["layer_types"] = ["full_attention" if (i + 1) % k == 0 else "linear_attention" for i in range(n)]
        else:
            if n > len(t["layer_types"]):
                raise SystemExit("--set num_hidden_layers: give layer_types too when adding layers")
            t["layer_types"] = t["layer_types"][:n]


# --------------------------------------------------------------------------
# HF config -> make_random_gguf.py preset fields (what its tensor list needs)
# --------------------------------------------------------------------------


def gguf_fields(cfg: dict) -> dict:
    mt = cfg["model_type"]
    t = text_part(cfg)
    if mt == "qwen3_5":
        rp = t["rope_parameters"]
        k = t.get("full_attention_interval", 4)
        want = ["full_attention" if (i + 1) % k == 0 else "linear_attention" for i in range(t["num_hidden_layers"])]
        if t.get("layer_types", want) != want:
            raise SystemExit("qwen3_5: layer_types must follow full_attention_interval (the GGUF tensor list assumes it)")
        return dict(
            arch="qwen35", n_vocab=t["vocab_size"], n_embd=t["hidden_size"], n_layer=t["num_hidden_layers"],
            n_ff=t["intermediate_size"], n_head=t["num_attention_heads"], n_head_kv=t["num_key_value_heads"],
            head_dim=t["head_dim"], rope_dim=int(t["head_dim"] * rp.get("partial_rotary_factor", 0.25)),
            rope_sections=list(rp.get("mrope_section", [])), rope_theta=float(rp["rope_theta"]),
            rms_eps=t["rms_norm_eps"], ctx=t["max_position_embeddings"], tied=bool(t["tie_word_embeddings"]),
            full_attention_interval=k, lin_k_heads=t["linear_num_key_heads"],
            lin_v_heads=t["linear_num_value_heads"], lin_k_dim=t["linear_key_head_dim"],
            lin_v_dim=t["linear_value_head_dim"], d_conv=t["linear_conv_kernel_dim"])
    if mt == "granitemoehybrid":
        if t.get("num_local_experts", 0):
            raise SystemExit("granitemoehybrid: MoE configs are not covered by the GGUF tensor list")
        if t["mamba_n_heads"] * t["mamba_d_head"] != t.get("mamba_expand", 2) * t["hidden_size"]:
            raise SystemExit("granitemoehybrid: mamba_n_heads * mamba_d_head must equal mamba_expand * hidden_size")
        return dict(
            arch="granitehybrid", n_vocab=t["vocab_size"], n_embd=t["hidden_size"], n_layer=t["num_hidden_layers"],
            n_ff=t["shared_intermediate_size"], n_head=t["num_attention_heads"], n_head_kv=t["num_key_value_heads"],
            attn_layers=[i for i, x in enumerate(t["layer_types"]) if x == "attention"],
            rms_eps=t["rms_norm_eps"], ctx=t["max_position_embeddings"], tied=bool(t["tie_word_embeddings"]),
            rope_theta=float(t["rope_theta"]), use_rope=t.get("position_embedding_type") == "rope",
            mamba_heads=t["mamba_n_heads"], mamba_head_dim=t["mamba_d_head"], d_state=t["mamba_d_state"],
            n_group=t["mamba_n_groups"], d_conv=t["mamba_d_conv"],
            embedding_scale=float(t["embedding_multiplier"]), residual_scale=float(t["residual_multiplier"]),
            attention_scale=float(t["attention_multiplier"]), logit_scale=float(t["logits_scaling"]))
    if mt == "falcon_h1":
        if t["mamba_d_ssm"] != t["mamba_n_heads"] * t["mamba_d_head"]:
            raise SystemExit("falcon_h1: mamba_d_ssm must equal mamba_n_heads * mamba_d_head")
        if t.get("mamba_proj_bias") or t.get("projectors_bias") or t.get("attention_bias") or t.get("mlp_bias"):
            raise SystemExit("falcon_h1: biases other than the conv bias are not covered by the GGUF tensor list")
        return dict(
            arch="falcon-h1", n_vocab=t["vocab_size"], n_embd=t["hidden_size"], n_layer=t["num_hidden_layers"],
            n_ff=t["intermediate_size"], n_head=t["num_attention_heads"], n_head_kv=t["num_key_value_heads"],
            head_dim=t["head_dim"], rope_theta=float(t["rope_theta"]), rms_eps=t["rms_norm_eps"],
            ctx=t["max_position_embeddings"], tied=bool(t["tie_word_embeddings"]),
            mamba_heads=t["mamba_n_heads"], mamba_head_dim=t["mamba_d_head"], d_state=t["mamba_d_state"],
            n_group=t["mamba_n_groups"], d_conv=t["mamba_d_conv"], mamba_rms_norm=bool(t["mamba_rms_norm"]))
    raise SystemExit(f"unsupported model_type {mt}")


def compare_with_gguf_preset(derived: dict, preset: dict) -> list[str]:
    """Fields where make_random_gguf.py's preset differs from the released config."""
    out = []
    for k, g in preset.items():
        r = derived.get(k, "<absent>")
        a, b = r, g
        if k == "rope_sections":  # llama.cpp pads M-RoPE sections to 4 entries with zeros
            a = [x for x in r if x] if isinstance(r, list) else r
            b = [x for x in g if x]
        if isinstance(a, float) or isinstance(b, float):
            same = isinstance(a, (int, float)) and isinstance(b, (int, float)) and math.isclose(a, b, rel_tol=1e-12)
        else:
            same = a == b
        if not same:
            out.append(f"{k}: released {r!r} vs GGUF preset {g!r}")
    return out


# --------------------------------------------------------------------------
# GGUF tensor -> HF tensor
# --------------------------------------------------------------------------
# rule: "w" as is ([out, in] = numpy order of the ggml tensor); "zc" zero-centred norm
# (HF w = GGUF w - 1); "vec" flatten; "conv" [C, K] -> [C, 1, K]; "alog" A -> log(-A);
# "cat" several GGUF tensors stacked along rows.

_MAP = {
    "qwen35": {
        "attn_norm.weight": ("input_layernorm.weight", "zc"),
        "post_attention_norm.weight": ("post_attention_layernorm.weight", "zc"),
        "attn_qkv.weight": ("linear_attn.in_proj_qkv.weight", "w"),
        "attn_gate.weight": ("linear_attn.in_proj_z.weight", "w"),
        "ssm_conv1d.weight": ("linear_attn.conv1d.weight", "conv"),
        "ssm_dt.bias": ("linear_attn.dt_bias", "vec"),
        "ssm_a": ("linear_attn.A_log", "alog"),
        "ssm_beta.weight": ("linear_attn.in_proj_b.weight", "w"),
        "ssm_alpha.weight": ("linear_attn.in_proj_a.weight", "w"),
        "ssm_norm.weight": ("linear_attn.norm.weight", "vec"),  # plain weight, not (1 + w)
        "ssm_out.weight": ("linear_attn.out_proj.weight", "w"),
        "attn_q.weight": ("self_attn.q_proj.weight", "w"),  # per head: hd query rows, hd gate rows
        "attn_k.weight": ("self_attn.k_proj.weight", "w"),
        "attn_v.weight": ("self_attn.v_proj.weight", "w"),
        "attn_output.weight": ("self_attn.o_proj.weight", "w"),
        "attn_q_norm.weight": ("self_attn.q_norm.weight", "zc"),
        "attn_k_norm.weight": ("self_attn.k_norm.weight", "zc"),
        "ffn_gate.weight": ("mlp.gate_proj.weight", "w"),
        "ffn_up.weight": ("mlp.up_proj.weight", "w"),
        "ffn_down.weight": ("mlp.down_proj.weight", "w"),
    },
    "granitehybrid": {
        "attn_norm.weight": ("input_layernorm.weight", "vec"),
        "attn_q.weight": ("self_attn.q_proj.weight", "w"),
        "attn_k.weight": ("self_attn.k_proj.weight", "w"),
        "attn_v.weight": ("self_attn.v_proj.weight", "w"),
        "attn_output.weight": ("self_attn.o_proj.weight", "w"),
        "ffn_norm.weight": ("post_attention_layernorm.weight", "vec"),
        "ffn_gate.weight": ("shared_mlp.input_linear.weight", "cat"),  # rows [gate; up]
        "ffn_up.weight": ("shared_mlp.input_linear.weight", "cat"),
        "ffn_down.weight": ("shared_mlp.output_linear.weight", "w"),
    },
    "falcon-h1": {
        "attn_norm.weight": ("input_layernorm.weight", "vec"),
        "ffn_norm": ("pre_ff_layernorm.weight", "vec"),
        "attn_q.weight": ("self_attn.q_proj.weight", "w"),
        "attn_k.weight": ("self_attn.k_proj.weight", "w"),
        "attn_v.weight": ("self_attn.v_proj.weight", "w"),
        "attn_output.weight": ("self_attn.o_proj.weight", "w"),
        "ffn_gate.weight": ("feed_forward.gate_proj.weight", "w"),
        "ffn_up.weight": ("feed_forward.up_proj.weight", "w"),
        "ffn_down.weight": ("feed_forward.down_proj.weight", "w"),
    },
}
_MAMBA2 = {  # Granite and Falcon-H1 mixers (in_proj rows [z, xBC, dt] in both formats)
    "ssm_in.weight": ("mamba.in_proj.weight", "w"),
    "ssm_conv1d.weight": ("mamba.conv1d.weight", "conv"),
    "ssm_conv1d.bias": ("mamba.conv1d.bias", "vec"),
    "ssm_dt.bias": ("mamba.dt_bias", "vec"),
    "ssm_a": ("mamba.A_log", "alog"),
    "ssm_d": ("mamba.D", "vec"),
    "ssm_norm.weight": ("mamba.norm.weight", "vec"),
    "ssm_out.weight": ("mamba.out_proj.weight", "w"),
}
_MAP["granitehybrid"].update(_MAMBA2)
_MAP["falcon-h1"].update(_MAMBA2)
_GLOBAL = {
    "qwen35": {"token_embd.weight": (QWEN_PREFIX + "embed_tokens.weight", "w"),
               "output_norm.weight": (QWEN_PREFIX + "norm.weight", "zc"),
               "output.weight": ("lm_head.weight", "w")},
    "granitehybrid": {"token_embd.weight": ("model.embed_tokens.weight", "w"),
                      "output_norm.weight": ("model.norm.weight", "vec"),
                      "output.weight": ("lm_head.weight", "w")},
    "falcon-h1": {"token_embd.weight": ("model.embed_tokens.weight", "w"),
                  "output_norm.weight": ("model.final_layernorm.weight", "vec"),
                  "output.weight": ("lm_head.weight", "w")},
}
_LAYER_PREFIX = {"qwen35": QWEN_PREFIX + "layers.", "granitehybrid": "model.layers.", "falcon-h1": "model.layers."}


def hf_name(arch: str, gguf_name: str) -> tuple[str, str]:
    if gguf_name in _GLOBAL[arch]:
        return _GLOBAL[arch][gguf_name]
    m = re.fullmatch(r"blk\.(\d+)\.(.+)", gguf_name)
    if not m or m.group(2) not in _MAP[arch]:
        raise KeyError(f"no HF name for GGUF tensor {gguf_name} ({arch})")
    name, rule = _MAP[arch][m.group(2)]
    return f"{_LAYER_PREFIX[arch]}{m.group(1)}.{name}", rule


class HFTensor:
    __slots__ = ("name", "shape", "rule", "parts", "small", "dtype", "nbytes", "file", "offset")

    def __init__(self, name, shape, rule, parts, small):
        self.name, self.shape, self.rule, self.parts, self.small = name, tuple(shape), rule, parts, small
        self.dtype = self.file = None
        self.nbytes = self.offset = 0

    @property
    def numel(self) -> int:
        return int(np.prod(self.shape)) if self.shape else 1


def plan_text(c: dict) -> tuple[list, list[HFTensor]]:
    """GGUF tensor list (generation order) and the HF tensors in the order they complete."""
    specs = G.SPEC_BUILDERS[c["arch"]](c)
    by_name: dict[str, HFTensor] = {}
    done_at: dict[str, int] = {}
    for i, s in enumerate(specs):
        name, rule = hf_name(c["arch"], s.name)
        np_shape = tuple(reversed(s.shape))
        if name in by_name:  # "cat": stack rows
            t = by_name[name]
            assert t.rule == rule == "cat" and t.shape[1:] == np_shape[1:], name
            t.shape = (t.shape[0] + np_shape[0],) + t.shape[1:]
            t.parts.append(i)
        else:
            if rule in ("vec", "zc", "alog"):
                shape = (int(np.prod(np_shape)),)
            elif rule == "conv":
                shape = (np_shape[0], 1, np_shape[1])
            else:
                shape = np_shape
            by_name[name] = HFTensor(name, shape, rule, [i], small=not s.matrix)
        done_at[name] = i
    order = sorted(by_name.values(), key=lambda t: done_at[t.name])
    return specs, order


def convert(rule: str, x: np.ndarray, shape: tuple) -> np.ndarray:
    if rule == "zc":
        x = x - np.float32(1.0)
    elif rule == "alog":
        x = np.log(-x.astype(np.float64)).astype(np.float32)
    return x.reshape(shape)


def generate_text(specs, order: list[HFTensor], seed: int, std: float):
    """Yields (HFTensor, float32 array) in `order`, drawing values with make_random_gguf.py's
    make_data() over its tensor list in its order (so the random stream is the GGUF's)."""
    rng = np.random.default_rng(seed)
    owner = {}
    for t in order:
        for i in t.parts:
            owner[i] = t
    pending: dict[str, list] = {}
    for i, s in enumerate(specs):
        t = owner[i]
        x = G.make_data(rng, s, std)
        if len(t.parts) == 1:
            yield t, convert(t.rule, x, t.shape)
            continue
        pending.setdefault(t.name, []).append(x)
        if len(pending[t.name]) == len(t.parts):
            yield t, np.concatenate(pending.pop(t.name), axis=0).reshape(t.shape)


def falcon_unfold(cfg: dict):
    """--gguf-equivalent for Falcon-H1: llama.cpp's graph applies none of the µP multipliers
    (its converter folds them into the weights), HF applies them from config.json. Dividing
    the GGUF values by the multipliers that HF applies to each weight makes the HF model
    compute the GGUF twin's function (the folding of families.md §5.8, undone)."""
    t = text_part(cfg)
    ai, km = t["attention_in_multiplier"], t["key_multiplier"]
    gate_m, down_m = t["mlp_multipliers"]
    ds, gn, nh = t["mamba_d_ssm"], t["mamba_n_groups"] * t["mamba_d_state"], t["mamba_n_heads"]
    m = t["ssm_multipliers"]
    rows = np.concatenate([np.full(n, v) for n, v in zip((ds, ds, gn, gn, nh), m)]) * t["ssm_in_multiplier"]
    div = {"embed_tokens.weight": t["embedding_multiplier"], "lm_head.weight": t["lm_head_multiplier"],
           "self_attn.q_proj.weight": ai, "self_attn.k_proj.weight": ai * km, "self_attn.v_proj.weight": ai,
           "self_attn.o_proj.weight": t["attention_out_multiplier"],
           "mamba.out_proj.weight": t["ssm_out_multiplier"], "mamba.in_proj.weight": rows[:, None],
           "feed_forward.gate_proj.weight": gate_m, "feed_forward.down_proj.weight": down_m}

    def apply(name: str, x: np.ndarray) -> np.ndarray:
        for suffix, d in div.items():
            if name.endswith(suffix):
                return (x.astype(np.float64) / d).astype(np.float32)
        return x
    return apply


def _mapped(stream, fn):
    for t, x in stream:
        yield t, fn(t.name, x)


# --------------------------------------------------------------------------
# transformers (through ../golden/hf_shim.py)
# --------------------------------------------------------------------------


class HF:
    """The checkout's configuration/modeling files for one model_type, via the shim."""

    def __init__(self, src: str, model_type: str):
        import torch
        from torch import nn

        import hf_shim
        self.torch = torch
        hf_shim.install(src)
        if not hasattr(hf_shim.PreTrainedModel, "_from_config"):  # used by the VLM wrapper
            hf_shim.PreTrainedModel._from_config = classmethod(lambda cls, config, **kw: cls(config))
        # Parameters are overwritten (or only their shapes are read): skip the initialisers,
        # so that building a full-size model allocates untouched memory and takes no time.
        for cls in (nn.Linear, nn.Embedding, nn.Conv1d, nn.Conv3d, nn.LayerNorm):
            cls.reset_parameters = lambda self: None
        d, cfgmod, cfgcls, modmod, ckcls, lmcls = HF_CLASSES[model_type]
        self.cfgmod = hf_shim.load(src, d, cfgmod)
        self.modeling = hf_shim.load(src, d, modmod)
        self.cfgcls = getattr(self.cfgmod, cfgcls)
        self.ckpt_cls = getattr(self.modeling, ckcls)
        self.lm_cls = getattr(self.modeling, lmcls)
        self.model_type = model_type

    @staticmethod
    def _kwargs(d: dict) -> dict:
        return {k: copy.deepcopy(v) for k, v in d.items() if k not in ("model_type", "architectures")}

    def checkpoint_model(self, cfg: dict):
        """The class whose state dict is the released checkpoint (the VLM wrapper for Qwen3.5)."""
        conf = self.cfgcls(**self._kwargs(cfg))
        conf._attn_implementation = "eager"
        return self.ckpt_cls(conf)

    def causal_lm(self, cfg: dict):
        """Text-only causal LM (Qwen3_5ForCausalLM for Qwen3.5) for the forward check."""
        if self.model_type == "qwen3_5":
            conf = self.cfgmod.Qwen3_5TextConfig(**self._kwargs(cfg["text_config"]))
        else:
            conf = self.cfgcls(**self._kwargs(cfg))
        conf._attn_implementation = "eager"
        return self.lm_cls(conf), conf


def hf_parameters(hf: HF, cfg: dict) -> dict[str, tuple]:
    model = hf.checkpoint_model(cfg)
    out = {k: tuple(p.shape) for k, p in model.named_parameters()}
    del model
    return out


def validate_names(plan: list[HFTensor], params: dict[str, tuple], tied: bool, with_vision: bool) -> None:
    expect = {k: v for k, v in params.items()
              if not (tied and k == "lm_head.weight") and (with_vision or not k.startswith("model.visual."))}
    got = {t.name: t.shape for t in plan}
    missing = sorted(set(expect) - set(got))
    extra = sorted(set(got) - set(expect))
    bad = sorted(k for k in set(got) & set(expect) if got[k] != expect[k])
    if missing or extra or bad:
        msg = [f"missing (in the HF model, not planned): {missing[:10]}{' ...' if len(missing) > 10 else ''}",
               f"extra (planned, not in the HF model): {extra[:10]}{' ...' if len(extra) > 10 else ''}",
               "shape mismatches: " + ", ".join(f"{k} {got[k]} vs {expect[k]}" for k in bad[:10])]
        raise SystemExit("tensor names/shapes disagree with the transformers model:\n  " + "\n  ".join(msg))


def plan_vision(params: dict[str, tuple]) -> list[HFTensor]:
    out = []
    for k, shape in params.items():
        if k.startswith("model.visual."):
            rule = "w" if len(shape) >= 2 else ("zeros" if k.endswith(".bias") else "ones")
            out.append(HFTensor(k, shape, rule, [], small=(rule != "w")))
    return out


def generate_vision(order: list[HFTensor], rng: np.random.Generator, std: float):
    for t in order:
        if t.rule == "w":
            x = rng.standard_normal(t.numel, dtype=np.float32)
            x *= np.float32(std)
        else:
            x = (np.ones if t.rule == "ones" else np.zeros)(t.numel, dtype=np.float32)
        yield t, x.reshape(t.shape)


# --------------------------------------------------------------------------
# safetensors writer (streaming, optionally sharded)
# --------------------------------------------------------------------------

_CHUNK = 1 << 22  # elements per bf16 conversion step (bounds the uint64 temporaries)


def layout(plan: list[HFTensor], dtype: str, small_f32: bool, max_shard: int) -> list[str]:
    for t in plan:
        t.dtype = "F32" if dtype == "f32" or (small_f32 and t.small) else "BF16"
        t.nbytes = t.numel * (4 if t.dtype == "F32" else 2)
    total = sum(t.nbytes for t in plan)
    shards, cur, size = [], [], 0
    for t in plan:  # greedy in write order, like save_pretrained's sharding
        if cur and size + t.nbytes > max_shard:
            shards.append(cur)
            cur, size = [], 0
        cur.append(t)
        size += t.nbytes
    shards.append(cur)
    if total <= max_shard:
        shards = [plan]
    n = len(shards)
    files = ["model.safetensors"] if n == 1 else [f"model-{i + 1:05d}-of-{n:05d}.safetensors" for i in range(n)]
    for fname, group in zip(files, shards):
        off = 0
        for t in group:
            t.file, t.offset = fname, off
            off += t.nbytes
    return files


def header_bytes(group: list[HFTensor], metadata: dict) -> bytes:
    h = {"__metadata__": {str(k): str(v) for k, v in metadata.items()}}
    for t in group:  # data order = header order (ascending offsets)
        h[t.name] = {"dtype": t.dtype, "shape": list(t.shape), "data_offsets": [t.offset, t.offset + t.nbytes]}
    hb = json.dumps(h, separators=(",", ":")).encode()
    return hb + b" " * ((8 - len(hb) % 8) % 8)


def write_array(f, x: np.ndarray, dtype: str) -> None:
    a = np.ascontiguousarray(x, dtype=np.float32).reshape(-1)
    if dtype == "F32":
        f.write(memoryview(a).cast("B"))
        return
    for i in range(0, a.size, _CHUNK):
        f.write(memoryview(np.ascontiguousarray(st_io.f32_to_bf16_bits(a[i:i + _CHUNK]))).cast("B"))


def write_folder(out: Path, cfg: dict, plan: list[HFTensor], files: list[str], stream, metadata: dict) -> dict:
    assert sys.byteorder == "little"
    out.mkdir(parents=True, exist_ok=True)
    for old in list(out.glob("model*.safetensors")) + list(out.glob("model.safetensors.index.json")):
        old.unlink()  # a rerun may change the number of shards
    with open(out / "config.json", "w") as f:
        json.dump(cfg, f, indent=2)
        f.write("\n")
    groups = {fn: [t for t in plan if t.file == fn] for fn in files}
    it = iter(stream)
    sizes = {}
    for fn in files:
        group = groups[fn]
        hb = header_bytes(group, metadata)
        with open(out / fn, "wb") as f:
            f.write(struct.pack("<Q", len(hb)))
            f.write(hb)
            for t in group:
                t2, x = next(it)
                assert t2 is t, (t.name, t2.name)
                assert x.shape == t.shape and x.dtype == np.float32, (t.name, x.shape, t.shape)
                write_array(f, x, t.dtype)
                del x
        sizes[fn] = (out / fn).stat().st_size
        expect = 8 + len(hb) + sum(t.nbytes for t in group)
        assert sizes[fn] == expect, (fn, sizes[fn], expect)
    if len(files) > 1:
        index = {"metadata": {"total_parameters": sum(t.numel for t in plan),
                              "total_size": sum(t.nbytes for t in plan)},
                 "weight_map": {t.name: t.file for t in sorted(plan, key=lambda t: t.name)}}
        with open(out / "model.safetensors.index.json", "w") as f:
            json.dump(index, f, indent=2)
            f.write("\n")
    return sizes


# --------------------------------------------------------------------------
# reading back + forward check
# --------------------------------------------------------------------------


def read_headers(folder: Path) -> dict[str, tuple[Path, dict, int]]:
    """name -> (file, header entry, absolute data start) for a single or sharded folder."""
    idx = folder / "model.safetensors.index.json"
    files = sorted(set(json.load(open(idx))["weight_map"].values())) if idx.exists() else ["model.safetensors"]
    out = {}
    for fn in files:
        p = folder / fn
        with open(p, "rb") as f:
            n = struct.unpack("<Q", f.read(8))[0]
            h = json.loads(f.read(n))
        h.pop("__metadata__", None)
        size = p.stat().st_size
        spans = sorted(tuple(e["data_offsets"]) for e in h.values())
        end = 0
        for b, e in spans:  # contiguous, no holes, no overlap, covers the file
            assert b == end, (fn, b, end)
            end = e
        assert 8 + n + end == size, (fn, 8 + n + end, size)
        for k, e in h.items():
            out[k] = (p, e, 8 + n)
    return out


def read_tensor(entry) -> np.ndarray:
    p, e, base = entry
    b, end = e["data_offsets"]
    dt = {"F32": np.dtype("<f4"), "BF16": np.dtype("<u2")}[e["dtype"]]
    a = np.memmap(p, dtype=dt, mode="r", offset=base + b, shape=((end - b) // dt.itemsize,))
    if e["dtype"] == "BF16":
        a = st_io.bf16_bits_to_f32(a)
    else:
        a = np.array(a)
    return a.reshape(e["shape"])


def check_folder(folder: Path, src: str, tokens: list[int] | None = None, n_tokens: int = 8, seed: int = 1) -> dict:
    """float32 forward of a few tokens through the HF modeling code (torch fallbacks, eager).
    The last position's logits are summarised (first/last 3, sum) the way llama-eval-callback
    prints result_output, for a comparison with the GGUF twin on the same token ids."""
    cfg = json.load(open(folder / "config.json"))
    hf = HF(src, cfg["model_type"])
    torch = hf.torch
    t0 = time.time()
    model, conf = hf.causal_lm(cfg)
    model.eval()
    params = dict(model.named_parameters())
    headers = read_headers(folder)
    loaded = set()
    for k, entry in headers.items():
        if k.startswith("model.visual.") or k.startswith("mtp."):
            continue
        name = "model." + k[len(QWEN_PREFIX):] if k.startswith(QWEN_PREFIX) else k
        if name not in params:
            raise SystemExit(f"checkpoint tensor {k} has no parameter {name} in {type(model).__name__}")
        p = params[name]
        x = read_tensor(entry)
        if tuple(x.shape) != tuple(p.shape):
            raise SystemExit(f"{k}: shape {x.shape} vs parameter {tuple(p.shape)}")
        with torch.no_grad():
            p.copy_(torch.from_numpy(x))
        loaded.add(name)
        del x
    tied = bool(text_part(cfg).get("tie_word_embeddings"))
    if tied and "lm_head.weight" not in loaded:
        model.lm_head.weight = model.get_input_embeddings().weight
        loaded.add("lm_head.weight")
    missing = sorted(set(params) - loaded)
    if missing:
        raise SystemExit(f"parameters not in the checkpoint: {missing[:10]}")
    t_load = time.time() - t0
    V = conf.vocab_size
    if tokens is None:
        tokens = np.random.default_rng(seed).integers(0, V, size=n_tokens).tolist()
    ids = torch.tensor([tokens], dtype=torch.long)
    t0 = time.time()
    with torch.no_grad():
        logits = model(input_ids=ids, use_cache=False).logits[0].double()
    t_fwd = time.time() - t0
    finite = bool(torch.isfinite(logits).all())
    res = {"tokens": ids[0].tolist(), "finite": finite, "logits_shape": list(logits.shape),
           "logits_std": float(logits.std()), "logits_max_abs": float(logits.abs().max()),
           "logits_mean": float(logits.mean()),
           "top1": logits.argmax(-1).tolist(),
           "last_logits_head_tail_sum": [round(float(v), 4) for v in logits[-1, :3]] +
                                        [round(float(v), 4) for v in logits[-1, -3:]] + [float(logits[-1].sum())],
           "load_s": round(t_load, 1), "forward_s": round(t_fwd, 1)}
    if not finite:
        raise SystemExit(f"non-finite logits: {res}")
    return res


# --------------------------------------------------------------------------


def param_counts(plan: list[HFTensor]) -> dict:
    tot = sum(t.numel for t in plan)
    emb = sum(t.numel for t in plan if t.name.endswith("embed_tokens.weight") or t.name == "lm_head.weight")
    vis = sum(t.numel for t in plan if t.name.startswith("model.visual."))
    out = {"total": tot, "embedding_and_lm_head": emb, "non_embedding": tot - emb}
    if vis:
        out["vision"] = vis
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", choices=sorted(RELEASED))
    ap.add_argument("--dtype", default="f32", choices=["f32", "bf16"])
    ap.add_argument("--out", help="output folder (created; model files in it are replaced)")
    ap.add_argument("--seed", type=int, default=0, help="same default as make_random_gguf.py")
    ap.add_argument("--std", type=float, default=0.02)
    ap.add_argument("--set", action="append", default=[], metavar="KEY=JSON",
                    help="override a field of the (text) config, e.g. --set num_hidden_layers=2")
    ap.add_argument("--max-shard-bytes", type=float, default=2e9,
                    help="shard when the tensors exceed this many bytes (default 2e9)")
    ap.add_argument("--small-f32", action="store_true",
                    help="bf16: keep 1-D tensors and conv kernels F32 (as the GGUF files do)")
    ap.add_argument("--transformers", help="<transformers checkout>/src/transformers: check names/shapes "
                    "against the real model class (and needed by --check, --with-vision)")
    ap.add_argument("--with-vision", action="store_true", help="qwen3_5: also write model.visual.* (random)")
    ap.add_argument("--gguf-equivalent", action="store_true",
                    help="falcon_h1: divide the weights by the config's µP multipliers, so that the HF model "
                    "computes the GGUF twin's function (the weights are then not N(0, std))")
    ap.add_argument("--check", action="store_true", help="after writing, run a float32 forward of a few tokens")
    ap.add_argument("--check-dir", help="only run the forward check on an existing folder")
    ap.add_argument("--check-tokens", help="comma-separated token ids for the check (default: 8 random ids)")
    ap.add_argument("--threads", type=int, default=0, help="torch threads for --check (0: all cores)")
    ap.add_argument("--list-presets", action="store_true")
    ap.add_argument("--print-config", action="store_true", help="print config.json and the plan summary, write nothing")
    args = ap.parse_args()

    if args.list_presets:
        print(json.dumps({k: {"model_type": v["model_type"], "gguf_preset": G.PRESETS.get(k)}
                          for k, v in RELEASED.items()}, indent=1))
        return 0
    if args.check_dir:
        if not args.transformers:
            ap.error("--check-dir needs --transformers")
        _threads(args.threads)
        print(json.dumps({"folder": args.check_dir,
                          "check": check_folder(Path(args.check_dir), args.transformers, _ids(args.check_tokens))}))
        return 0
    if not args.preset:
        ap.error("--preset is required")
    if (args.check or args.with_vision) and not args.transformers:
        ap.error("--check and --with-vision need --transformers")
    if args.with_vision and RELEASED[args.preset]["model_type"] != "qwen3_5":
        ap.error("--with-vision is for the qwen3_5 preset only")
    if args.gguf_equivalent and RELEASED[args.preset]["model_type"] != "falcon_h1":
        ap.error("--gguf-equivalent is for falcon_h1 only (the other presets match their GGUF twins as they are)")

    cfg = copy.deepcopy(RELEASED[args.preset])
    apply_overrides(cfg, args.set)
    set_dtype(cfg, args.dtype)
    c = gguf_fields(cfg)
    notes = []
    if not args.set and args.preset in G.PRESETS:
        notes = compare_with_gguf_preset(c, G.PRESETS[args.preset])
    specs, plan = plan_text(c)

    if args.transformers:
        params = hf_parameters(HF(args.transformers, cfg["model_type"]), cfg)
        if args.with_vision:
            plan += plan_vision(params)
        validate_names(plan, params, tied=bool(text_part(cfg)["tie_word_embeddings"]), with_vision=args.with_vision)

    unfold = args.gguf_equivalent
    files = layout(plan, args.dtype, args.small_f32, int(args.max_shard_bytes))
    info = {"preset": args.preset, "dtype": args.dtype, "seed": args.seed, "std": args.std,
            "overrides": args.set, "small_f32": args.small_f32, "with_vision": args.with_vision,
            "params": param_counts(plan), "n_tensors": len(plan),
            "tensor_bytes": sum(t.nbytes for t in plan), "files": files,
            "names_checked_against_transformers": bool(args.transformers),
            "gguf_preset_vs_released_config": notes,
            "gguf_equivalent": unfold,
            "gguf_twin": "make_random_gguf.py --preset %s --seed %d --std %g%s: %s" % (
                args.preset, args.seed, args.std, " with the equivalent --set overrides" if args.set else "",
                twin_relation(c["arch"], unfold))}
    if args.print_config:
        print(json.dumps(cfg, indent=2))
        print(json.dumps(info, indent=1))
        return 0
    if not args.out:
        ap.error("--out is required")
    for n in notes:
        print("note: GGUF preset differs from the released config (released value used):", n, file=sys.stderr)

    t0 = time.time()
    text = [t for t in plan if not t.name.startswith("model.visual.")]
    vis = [t for t in plan if t.name.startswith("model.visual.")]
    stream = generate_text(specs, text, args.seed, args.std)
    if unfold:
        stream = _mapped(stream, falcon_unfold(cfg))
    if vis:  # after the text tensors, from their own stream: the text values do not depend on it
        stream = _chain(stream, generate_vision(vis, np.random.default_rng([args.seed, 1]), args.std))
    out = Path(args.out)
    sizes = write_folder(out, cfg, plan, files, stream, metadata={"format": "pt"})
    info["file_bytes"] = sizes
    info["folder_bytes"] = sum(sizes.values())
    info["seconds"] = round(time.time() - t0, 1)
    with open(out / "random_weights.json", "w") as f:
        json.dump({"generator": "tools/anchor/make_random_hf.py", **info}, f, indent=1)
        f.write("\n")
    if args.check:
        _threads(args.threads)
        info["check"] = check_folder(out, args.transformers, _ids(args.check_tokens))
        with open(out / "random_weights.json", "w") as f:
            json.dump({"generator": "tools/anchor/make_random_hf.py", **info}, f, indent=1)
            f.write("\n")
    print(json.dumps({**{k: info[k] for k in ("preset", "dtype", "params", "n_tensors", "tensor_bytes",
                                             "folder_bytes", "seconds") + (("check",) if args.check else ())},
                      "n_files": len(files)}))
    return 0


def twin_relation(arch: str, unfold: bool) -> str:
    if arch != "falcon-h1":
        return "same values, same function"
    if unfold:
        return "same function, values divided by the µP multipliers"
    return ("same values, not the same function (HF applies the config's µP multipliers; llama.cpp reads "
            "the GGUF weights as already multiplied; see --gguf-equivalent)")


def _chain(*its):
    for it in its:
        yield from it


def _ids(text: str | None) -> list[int] | None:
    return [int(x) for x in text.split(",")] if text else None


def _threads(n: int) -> None:
    import torch
    torch.set_num_threads(n if n > 0 else max(1, os.cpu_count() or 1))


if __name__ == "__main__":
    sys.exit(main())
