#pragma once
// IBM Granite 4.0 H (granitemoehybrid): config.json -> HybridStack<Mamba2Layer<>, AttentionLayer<>>
// (families.md §4). Dense (shared MLP only) or MoE (+ shared MLP); RoPE or NoPE;
// embedding_multiplier, residual_multiplier, attention_multiplier (the score scale) and
// logits_scaling (divides the logits).

#include <cstddef>  // std::size_t
#include <string>   // std::string
#include <vector>   // std::vector

#include "common.hpp"

namespace hylens::models {

/// mamba_d_head: an integer, or "auto" = d_inner / n_heads.
inline std::size_t read_mamba_head_dim(const io::Config& c, std::size_t d_inner, std::size_t heads) {
    if (c.has("mamba_d_head") && c.raw().at("mamba_d_head").is_string()) {
        const std::string s = c.get_string("mamba_d_head");
        check<ConfigError>(s == "auto", "[load] ", c.path(), ": mamba_d_head '", s, "' is neither a number nor \"auto\"");
    } else if (c.has("mamba_d_head")) {
        return positive(c, "mamba_d_head");
    }
    check<ConfigError>(heads > 0 && d_inner % heads == 0, "[load] ", c.path(), ": mamba d_inner ", d_inner,
                       " is not divisible by mamba_n_heads ", heads);
    return d_inner / heads;
}

inline GraniteModel load_granite4h(const io::Checkpoint& ckpt, const io::Config& c, bool check_finite = true) {
    const std::string type = c.get_string("model_type");
    check<UnsupportedError>(type == "granitemoehybrid", "[load] ", c.path(), ": model_type '", type,
                            "' is not granitemoehybrid");
    const std::size_t H = positive(c, "hidden_size"), V = positive(c, "vocab_size"), L = layer_count(c, ckpt);
    const std::size_t Hq = positive(c, "num_attention_heads");
    const std::size_t Hkv = c.has("num_key_value_heads") ? positive(c, "num_key_value_heads") : Hq;
    check<ConfigError>(H % Hq == 0, "[load] ", c.path(), ": hidden_size ", H, " not divisible by num_attention_heads ", Hq);
    const std::size_t hd = H / Hq;
    const float eps = norm_eps(c, 1e-6);
    const float res_mult = c.get_multiplier("residual_multiplier");
    const std::string act = c.get_string("hidden_act", "silu");
    check<UnsupportedError>(act == "silu", "[load] ", c.path(), ": hidden_act '", act, "' is not supported (silu only)");

    std::vector<bool> attn(L, false);  // no layer_types: every layer is Mamba
    if (c.has("layer_types")) {
        attn = attention_pattern(c, "layer_types", L);
    } else if (c.has("layers_block_type")) {
        attn = attention_pattern(c, "layers_block_type", L);
    }
    const std::string pos_type = c.get_string("position_embedding_type", "nope");
    check<UnsupportedError>(pos_type == "rope" || pos_type == "nope", "[load] ", c.path(), ": position_embedding_type '",
                            pos_type, "' is not supported (\"rope\" or \"nope\")");
    const bool rope = pos_type == "rope";
    const RopeParams rp = read_rope(c, 10000.0);

    const std::size_t E = non_negative(c, "num_local_experts", 0);
    const std::size_t S = non_negative(c, "shared_intermediate_size", 0);

    const TensorSource src(ckpt, "model.", check_finite);
    GraniteStack stack;
    for (std::size_t i = 0; i < L; ++i) {
        const std::string p = "layers." + std::to_string(i) + ".";
        DecoderConfig dc{H, eps, false, res_mult};
        std::vector<float> in_norm = src.vec(p + "input_layernorm.weight", {H});
        std::vector<float> post_norm = src.vec(p + "post_attention_layernorm.weight", {H});

        FeedForward ffn;
        ffn.hidden = H;
        if (S > 0) {
            ffn.has_dense = true;
            ffn.dense.hidden = H;
            ffn.dense.inter = S;
            ffn.dense.gate_up = src.matrix(p + "shared_mlp.input_linear.weight", {2 * S, H});
            ffn.dense.down = src.matrix(p + "shared_mlp.output_linear.weight", {H, S});
        }
        if (E > 0) {
            const std::size_t I = positive(c, "intermediate_size"), k = positive(c, "num_experts_per_tok");
            ffn.has_moe = true;
            ffn.moe.hidden = H;
            ffn.moe.top_k = k;
            ffn.moe.routing = kernels::Routing::topk_softmax;
            ffn.moe.router = src.matrix(p + "block_sparse_moe.router.layer.weight", {E, H});
            ffn.moe.experts = fused_experts(src.matrix(p + "block_sparse_moe.input_linear.weight", {E, 2 * I, H}),
                                            src.matrix(p + "block_sparse_moe.output_linear.weight", {E, H, I}), E, H, I);
        }

        if (attn[i]) {
            AttentionConfig ac;
            ac.hidden = H;
            ac.Hq = Hq;
            ac.Hkv = Hkv;
            ac.head_dim = hd;
            ac.scale = c.get_multiplier("attention_multiplier");
            if (rope) ac.rope = kernels::Rope{hd, static_cast<float>(rp.theta)};
            AttentionWeights aw = attention_weights(src, p, ac, c.get_bool("attention_bias", false));
            stack.push_back(DecoderLayer<AttentionLayer<>>(dc, std::move(in_norm), AttentionLayer<>(ac, std::move(aw)),
                                                           std::move(post_norm), std::move(ffn)));
        } else {
            Mamba2Config mc;
            mc.hidden = H;
            mc.H = positive(c, "mamba_n_heads");
            const std::size_t Di = positive(c, "mamba_expand", 2) * H;
            mc.P = read_mamba_head_dim(c, Di, mc.H);
            mc.N = positive(c, "mamba_d_state");
            mc.G = positive(c, "mamba_n_groups", 1);
            mc.conv_width = positive(c, "mamba_d_conv", 4);
            mc.eps = eps;
            mc.norm = MambaNorm::gate_before_norm;
            mc.norm_group = mc.d_inner();  // HF Granite normalises over all of d_inner, ignoring groups
            std::tie(mc.dt_min, mc.dt_max) = read_time_step_limit(c);
            const bool proj_bias = c.get_bool("mamba_proj_bias", false);
            Mamba2Weights w = mamba2_weights(src, p + "mamba.", mc,
                                             {proj_bias, c.get_bool("mamba_conv_bias", true), true, proj_bias});
            stack.push_back(DecoderLayer<Mamba2Layer<>>(dc, std::move(in_norm), Mamba2Layer<>(mc, std::move(w)),
                                                        std::move(post_norm), std::move(ffn)));
        }
    }

    LMConfig lc{.model_type = type, .vocab = V, .hidden = H, .eps = eps,
                .embed_multiplier = c.get_multiplier("embedding_multiplier"),
                .logits_multiplier = 1.0f / c.get_multiplier("logits_scaling")};
    return assemble(src, std::move(lc), std::move(stack), "norm.weight", c.get_bool("tie_word_embeddings", false));
}

}  // namespace hylens::models
