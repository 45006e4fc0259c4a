#pragma once
// Falcon-H1 (falcon_h1): config.json -> HybridStack<ParallelLayer<AttentionLayer<>, Mamba2Layer<>>>
// (families.md §5). Every layer runs attention and Mamba-2 side by side; the µP
// multipliers are applied where Hugging Face applies them (not folded into the weights, so
// every site and cache holds the same quantities as the reference).

#include <cstddef>  // std::size_t
#include <string>   // std::string
#include <vector>   // std::vector

#include "common.hpp"
#include "granite4h.hpp"  // read_mamba_head_dim

namespace hylens::models {

inline FalconH1Model load_falcon_h1(const io::Checkpoint& ckpt, const io::Config& c, bool check_finite = true) {
    const std::string type = c.get_string("model_type");
    check<UnsupportedError>(type == "falcon_h1", "[load] ", c.path(), ": model_type '", type, "' is not falcon_h1");
    const std::size_t H = positive(c, "hidden_size"), V = positive(c, "vocab_size"), L = layer_count(c, ckpt);
    const std::size_t Hq = positive(c, "num_attention_heads");
    const std::size_t Hkv = c.has("num_key_value_heads") ? positive(c, "num_key_value_heads") : Hq;
    const std::size_t hd = c.has("head_dim") ? positive(c, "head_dim") : H / Hq;
    const std::size_t I = positive(c, "intermediate_size");
    const float eps = norm_eps(c, 1e-5);
    const RopeParams rp = read_rope(c, 10000.0);
    const std::string act = c.get_string("hidden_act", "silu");
    check<UnsupportedError>(act == "silu", "[load] ", c.path(), ": hidden_act '", act, "' is not supported (silu only)");

    auto list_or = [&](std::string_view key, std::vector<double> fallback, std::size_t n) {
        if (!c.has(key)) return fallback;
        std::vector<double> v = c.get_double_list(key);
        check<ConfigError>(v.size() == n, "[load] ", c.path(), ": ", key, " must have ", n, " entries, has ", v.size());
        for (std::size_t i = 0; i < n; ++i)  // scale factors, checked as get_multiplier checks one
            check<ConfigError>(io::Config::is_scale_factor(v[i]), "[load] ", c.path(), ": ", key, "[", i,
                               "] must be a positive finite number (a scale factor), got ", v[i]);
        return v;
    };
    const std::vector<double> mlp_mult = list_or("mlp_multipliers", {1.0, 1.0}, 2);
    const std::vector<double> ssm_mult = list_or("ssm_multipliers", {1, 1, 1, 1, 1}, 5);

    // Mamba inner width: mamba_d_ssm; null -> expand * hidden; absent -> 1024 (HF's class default).
    std::size_t Ds = 1024;
    if (c.raw().contains("mamba_d_ssm")) {
        Ds = c.has("mamba_d_ssm") ? positive(c, "mamba_d_ssm")
                                  : positive(c, "mamba_expand", 2) * H;
    }
    const bool mamba_norm = c.get_bool("mamba_rms_norm", false);
    const bool norm_before_gate = c.get_bool("mamba_norm_before_gate", true);

    const TensorSource src(ckpt, "model.", check_finite);
    FalconH1Stack stack;
    using PL = ParallelLayer<AttentionLayer<>, Mamba2Layer<>>;
    for (std::size_t i = 0; i < L; ++i) {
        const std::string p = "layers." + std::to_string(i) + ".";
        DecoderConfig dc{H, eps, false, 1.0f};

        AttentionConfig ac;
        ac.hidden = H;
        ac.Hq = Hq;
        ac.Hkv = Hkv;
        ac.head_dim = hd;
        ac.rope = kernels::Rope{hd, static_cast<float>(rp.theta)};
        ac.in_multiplier = c.get_multiplier("attention_in_multiplier");
        ac.key_multiplier = c.get_multiplier("key_multiplier");
        AttentionWeights aw = attention_weights(src, p, ac, false);  // the HF config class forces attention_bias = false

        Mamba2Config mc;
        mc.hidden = H;
        mc.H = positive(c, "mamba_n_heads");
        mc.P = read_mamba_head_dim(c, Ds, mc.H);
        check<ConfigError>(mc.H * mc.P == Ds, "[load] ", c.path(), ": mamba_n_heads x mamba_d_head = ", mc.H * mc.P,
                           " but the Mamba inner width is ", Ds);
        mc.N = positive(c, "mamba_d_state");
        mc.G = positive(c, "mamba_n_groups", 1);
        mc.conv_width = positive(c, "mamba_d_conv", 4);
        mc.eps = eps;
        mc.norm = !mamba_norm ? MambaNorm::gate_only
                              : (norm_before_gate ? MambaNorm::norm_before_gate : MambaNorm::gate_before_norm);
        check<ConfigError>(mc.G > 0 && Ds % mc.G == 0, "[load] ", c.path(), ": mamba_n_groups ", mc.G,
                           " does not divide ", Ds);
        mc.norm_group = Ds / mc.G;
        mc.in_multiplier = c.get_multiplier("ssm_in_multiplier");
        for (std::size_t s = 0; s < 5; ++s) mc.mup[s] = static_cast<float>(ssm_mult[s]);
        std::tie(mc.dt_min, mc.dt_max) = read_time_step_limit(c);
        Mamba2Weights w = mamba2_weights(src, p + "mamba.", mc,
                                         {c.get_bool("mamba_proj_bias", false), c.get_bool("mamba_conv_bias", true),
                                          mamba_norm, c.get_bool("projectors_bias", false)});

        FeedForward ffn;  // the HF config class forces mlp_bias = false
        ffn.hidden = H;
        ffn.has_dense = true;
        ffn.dense = dense_swiglu(src, p + "feed_forward.", H, I);
        ffn.dense.gate_mult = static_cast<float>(mlp_mult[0]);
        ffn.dense.down_mult = static_cast<float>(mlp_mult[1]);

        PL layer(AttentionLayer<>(ac, std::move(aw)), Mamba2Layer<>(mc, std::move(w)),
                 c.get_multiplier("attention_out_multiplier"),
                 c.get_multiplier("ssm_out_multiplier"));
        stack.push_back(DecoderLayer<PL>(dc, src.vec(p + "input_layernorm.weight", {H}), std::move(layer),
                                         src.vec(p + "pre_ff_layernorm.weight", {H}), std::move(ffn)));
    }

    LMConfig lc{.model_type = type, .vocab = V, .hidden = H, .eps = eps,
                .embed_multiplier = c.get_multiplier("embedding_multiplier"),
                .logits_multiplier = c.get_multiplier("lm_head_multiplier")};
    return assemble(src, std::move(lc), std::move(stack), "final_layernorm.weight",
                    c.get_bool("tie_word_embeddings", false));
}

}  // namespace hylens::models
