#pragma once
// Qwen3.5 (qwen3_5, qwen3_5_moe, their *_text parts) and Qwen3-Next (qwen3_next):
// config.json -> HybridStack<DeltaNetLayer<>, AttentionLayer<>> (families.md §3).
// Key prefix "model.language_model." (multimodal checkpoints) or "model."; lm_head.weight at
// the top level, absent when tied; mtp.* and model.visual.* are ignored.

#include <cmath>    // std::floor
#include <cstddef>  // std::size_t
#include <string>   // std::string
#include <vector>   // std::vector

#include "common.hpp"

namespace hylens::models {

inline bool is_qwen_type(const std::string& t) {
    return t == "qwen3_5" || t == "qwen3_5_text" || t == "qwen3_5_moe" || t == "qwen3_5_moe_text" || t == "qwen3_next";
}

/// Builds a Qwen-family model from an open checkpoint and its config.json.
inline Qwen35Model load_qwen3_5(const io::Checkpoint& ckpt, const io::Config& root, bool check_finite = true) {
    const std::string type = root.get_string("model_type");
    check<UnsupportedError>(is_qwen_type(type), "[load] ", root.path(), ": model_type '", type, "' is not a Qwen type");
    const io::Config c = root.is_object("text_config") ? root.sub("text_config") : root;
    const std::string text_type = c.get_string("model_type", type);
    const bool next = type == "qwen3_next";
    const bool moe_everywhere = type == "qwen3_5_moe" || text_type == "qwen3_5_moe_text";

    const std::size_t H = positive(c, "hidden_size"), V = positive(c, "vocab_size"), L = layer_count(c, ckpt);
    const std::size_t Hq = positive(c, "num_attention_heads");
    const std::size_t Hkv = c.has("num_key_value_heads") ? positive(c, "num_key_value_heads") : Hq;
    const std::size_t hd = c.has("head_dim") ? positive(c, "head_dim") : H / Hq;
    const float eps = norm_eps(c, 1e-6);
    const RopeParams rope = read_rope(c, 10000.0);
    const std::string act = c.get_string("hidden_act", "silu");
    check<UnsupportedError>(act == "silu", "[load] ", c.path(), ": hidden_act '", act, "' is not supported (silu only)");

    std::vector<bool> attn(L);
    if (c.has("layer_types")) {
        attn = attention_pattern(c, "layer_types", L);
    } else {
        const std::int64_t interval = c.get_int("full_attention_interval", 4);
        check<ConfigError>(interval > 0, "[load] ", c.path(), ": full_attention_interval must be > 0");
        for (std::size_t i = 0; i < L; ++i) attn[i] = (i + 1) % static_cast<std::size_t>(interval) == 0;
    }

    const std::string prefix = ckpt.contains("model.language_model.embed_tokens.weight") ? "model.language_model." : "model.";
    const TensorSource src(ckpt, prefix, check_finite);
    const bool tied = root.get_bool("tie_word_embeddings", c.get_bool("tie_word_embeddings", false));

    QwenStack stack;
    for (std::size_t i = 0; i < L; ++i) {
        const std::string p = "layers." + std::to_string(i) + ".";
        DecoderConfig dc{H, eps, true, 1.0f};
        std::vector<float> in_norm = src.vec(p + "input_layernorm.weight", {H});
        std::vector<float> post_norm = src.vec(p + "post_attention_layernorm.weight", {H});

        // Feed-forward: dense, or MoE with a sigmoid-gated shared expert.
        FeedForward ffn;
        ffn.hidden = H;
        bool is_moe = moe_everywhere;
        if (next) {
            const std::int64_t E = c.get_int("num_experts", 0), step = c.get_int("decoder_sparse_step", 1);
            bool mlp_only = false;
            if (c.has("mlp_only_layers"))
                for (auto l : c.get_int_list("mlp_only_layers")) mlp_only = mlp_only || l == static_cast<std::int64_t>(i);
            is_moe = !mlp_only && E > 0 && step > 0 && (i + 1) % static_cast<std::size_t>(step) == 0;
        }
        if (is_moe) {
            const std::size_t E = positive(c, "num_experts"), k = positive(c, "num_experts_per_tok"),
                              Im = positive(c, "moe_intermediate_size");
            ffn.has_moe = true;
            ffn.moe.hidden = H;
            ffn.moe.top_k = k;
            ffn.moe.routing = (!next || c.get_bool("norm_topk_prob", true)) ? kernels::Routing::softmax_topk_renorm
                                                                              : kernels::Routing::softmax_topk;
            ffn.moe.router = src.matrix(p + "mlp.gate.weight", {E, H});
            if (src.has(p + "mlp.experts.gate_up_proj")) {
                ffn.moe.experts = fused_experts(src.matrix(p + "mlp.experts.gate_up_proj", {E, 2 * Im, H}),
                                                src.matrix(p + "mlp.experts.down_proj", {E, H, Im}), E, H, Im);
            } else {
                for (std::size_t e = 0; e < E; ++e)
                    ffn.moe.experts.push_back(dense_swiglu(src, p + "mlp.experts." + std::to_string(e) + ".", H, Im));
            }
            const std::size_t Is = non_negative(c, "shared_expert_intermediate_size", 0);
            if (Is > 0) {
                ffn.has_dense = true;
                ffn.dense = dense_swiglu(src, p + "mlp.shared_expert.", H, Is);
                ffn.has_shared_gate = true;
                ffn.shared_gate = src.matrix(p + "mlp.shared_expert_gate.weight", {1, H});
            }
        } else {
            ffn.has_dense = true;
            ffn.dense = dense_swiglu(src, p + "mlp.", H, positive(c, "intermediate_size"));
        }

        if (attn[i]) {
            AttentionConfig ac;
            ac.hidden = H;
            ac.Hq = Hq;
            ac.Hkv = Hkv;
            ac.head_dim = hd;
            ac.gated = true;  // Qwen's attention output gate is always on (attn_output_gate is ignored by HF)
            ac.qk_norm = true;
            ac.qk_norm_one_plus = true;
            ac.eps = eps;
            ac.rope = kernels::Rope{static_cast<std::size_t>(std::floor(hd * rope.partial_rotary_factor)),
                                    static_cast<float>(rope.theta)};
            AttentionWeights aw = attention_weights(src, p, ac, c.get_bool("attention_bias", false));
            stack.push_back(DecoderLayer<AttentionLayer<>>(dc, std::move(in_norm), AttentionLayer<>(ac, std::move(aw)),
                                                           std::move(post_norm), std::move(ffn)));
        } else {
            DeltaNetConfig g;
            g.hidden = H;
            g.Hk = positive(c, "linear_num_key_heads");
            g.Hv = positive(c, "linear_num_value_heads");
            g.dk = positive(c, "linear_key_head_dim");
            g.dv = positive(c, "linear_value_head_dim");
            g.conv_width = positive(c, "linear_conv_kernel_dim", 4);
            g.eps = eps;
            g.fused = next;
            check<ConfigError>(g.Hv % g.Hk == 0, "[load] ", c.path(), ": linear_num_value_heads ", g.Hv,
                               " is not a multiple of linear_num_key_heads ", g.Hk);
            const std::size_t Kd = g.Kd(), Vd = g.Vd(), Cc = g.conv_channels();
            DeltaNetWeights w;
            const std::string q = p + "linear_attn.";
            if (next) {
                w.in_proj_qkvz = src.matrix(q + "in_proj_qkvz.weight", {2 * Kd + 2 * Vd, H});
                w.in_proj_ba = src.matrix(q + "in_proj_ba.weight", {2 * g.Hv, H});
            } else {
                w.in_proj_qkv = src.matrix(q + "in_proj_qkv.weight", {Cc, H});
                w.in_proj_z = src.matrix(q + "in_proj_z.weight", {Vd, H});
                w.in_proj_b = src.matrix(q + "in_proj_b.weight", {g.Hv, H});
                w.in_proj_a = src.matrix(q + "in_proj_a.weight", {g.Hv, H});
            }
            w.conv = src.vec(q + "conv1d.weight", {Cc, 1, g.conv_width});
            w.A_log = src.vec(q + "A_log", {g.Hv});
            w.dt_bias = src.vec(q + "dt_bias", {g.Hv});
            w.norm = src.vec(q + "norm.weight", {g.dv});
            w.out_proj = src.matrix(q + "out_proj.weight", {H, Vd});
            stack.push_back(DecoderLayer<DeltaNetLayer<>>(dc, std::move(in_norm), DeltaNetLayer<>(g, std::move(w)),
                                                          std::move(post_norm), std::move(ffn)));
        }
    }

    LMConfig lc{.model_type = type, .vocab = V, .hidden = H, .eps = eps, .norm_one_plus = true};
    return assemble(src, std::move(lc), std::move(stack), "norm.weight", tied);
}

}  // namespace hylens::models
