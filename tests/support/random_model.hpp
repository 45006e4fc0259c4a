#pragma once
// Random-weight models for invariant tests (continuation contract, surgery identities):
// small stacks of any mixer kinds built directly from layer objects, with float32 or bf16
// weights. Weight scales keep activations O(1) so that relative comparisons are meaningful.

#include <hylens/layers/attention.hpp>
#include <hylens/layers/deltanet.hpp>
#include <hylens/layers/ffn.hpp>
#include <hylens/layers/mamba2.hpp>
#include <hylens/layers/parallel.hpp>
#include <hylens/stack/causal_lm.hpp>
#include <hylens/stack/hybrid_stack.hpp>

#include <cmath>
#include <random>
#include <string>
#include <vector>

namespace hylens::test {

/// Gain of the projections that write into the residual stream: below 1, as in trained
/// models, so the residual path dominates and random layers do not amplify float32 rounding
/// without bound (the kernels' own chunked == recurrent bound is tested at 1e-5 elsewhere).
inline constexpr float kOutGain = 0.5f;

struct RandomSpec {
    std::size_t hidden = 32, vocab = 50;
    bool bf16 = false;
    unsigned seed = 1;
};

class RandomWeights {
public:
    explicit RandomWeights(const RandomSpec& s) : spec_(s), rng_(s.seed) {}

    std::vector<float> values(std::size_t n, float scale, float offset = 0.0f) {
        std::normal_distribution<float> nd(0.0f, 1.0f);
        std::vector<float> v(n);
        for (auto& x : v) x = offset + scale * nd(rng_);
        return v;
    }
    Weight matrix(std::size_t rows, std::size_t cols, const std::string& name, float gain = 1.0f) {
        auto v = values(rows * cols, gain / std::sqrt(static_cast<float>(cols)));
        return spec_.bf16 ? Weight::from_floats_bf16(v, {rows, cols}, name) : Weight::from_floats(std::move(v), {rows, cols}, name);
    }
    SwiGLU swiglu(std::size_t H, std::size_t I) {
        SwiGLU s;
        s.hidden = H;
        s.inter = I;
        s.gate = matrix(I, H, "gate");
        s.up = matrix(I, H, "up");
        s.down = matrix(H, I, "down", kOutGain);
        return s;
    }
    FeedForward dense_ffn(std::size_t H) {
        FeedForward f;
        f.hidden = H;
        f.has_dense = true;
        f.dense = swiglu(H, 2 * H);
        return f;
    }
    /// Four experts, top-2, with a gated shared expert.
    FeedForward moe_ffn(std::size_t H) {
        FeedForward f = dense_ffn(H);
        f.has_shared_gate = true;
        f.shared_gate = matrix(1, H, "shared_gate");
        f.has_moe = true;
        f.moe.hidden = H;
        f.moe.top_k = 2;
        f.moe.router = matrix(4, H, "router");
        for (int e = 0; e < 4; ++e) f.moe.experts.push_back(swiglu(H, H));
        return f;
    }

    DeltaNetLayer<> deltanet(std::size_t Hk = 2, std::size_t Hv = 4, std::size_t dk = 8, std::size_t dv = 6) {
        DeltaNetConfig c;
        c.hidden = spec_.hidden;
        c.Hk = Hk;
        c.Hv = Hv;
        c.dk = dk;
        c.dv = dv;
        DeltaNetWeights w;
        const std::size_t H = c.hidden;
        w.in_proj_qkv = matrix(c.conv_channels(), H, "in_proj_qkv");
        w.in_proj_z = matrix(c.Vd(), H, "in_proj_z");
        w.in_proj_b = matrix(Hv, H, "in_proj_b");
        w.in_proj_a = matrix(Hv, H, "in_proj_a");
        w.conv = values(c.conv_channels() * c.conv_width, 0.5f);
        w.A_log = values(Hv, 0.5f, -1.0f);
        w.dt_bias = values(Hv, 0.5f);
        w.norm = values(dv, 0.1f, 1.0f);
        w.out_proj = matrix(H, c.Vd(), "out_proj", kOutGain);
        return DeltaNetLayer<>(c, std::move(w));
    }

    Mamba2Layer<> mamba2(std::size_t heads = 4, std::size_t P = 8, std::size_t N = 6, std::size_t G = 2,
                         MambaNorm norm = MambaNorm::gate_before_norm) {
        Mamba2Config c;
        c.hidden = spec_.hidden;
        c.H = heads;
        c.P = P;
        c.N = N;
        c.G = G;
        c.norm = norm;
        c.norm_group = norm == MambaNorm::gate_before_norm ? heads * P : heads * P / G;
        Mamba2Weights w;
        const std::size_t H = c.hidden;
        w.in_proj = matrix(c.proj_rows(), H, "in_proj");
        w.conv = values(c.conv_channels() * c.conv_width, 0.5f);
        w.conv_bias = values(c.conv_channels(), 0.1f);
        w.dt_bias = values(heads, 0.5f, -1.0f);
        w.A_log = values(heads, 0.5f, 0.0f);
        w.D = values(heads, 0.5f, 1.0f);
        if (norm != MambaNorm::gate_only) w.norm = values(c.d_inner(), 0.1f, 1.0f);
        w.out_proj = matrix(H, c.d_inner(), "out_proj", kOutGain);
        return Mamba2Layer<>(c, std::move(w));
    }

    AttentionLayer<> attention(bool gated = true, std::size_t Hq = 4, std::size_t Hkv = 2, std::size_t hd = 8,
                               std::size_t rot = 4) {
        AttentionConfig c;
        c.hidden = spec_.hidden;
        c.Hq = Hq;
        c.Hkv = Hkv;
        c.head_dim = hd;
        c.gated = gated;
        c.qk_norm = gated;
        c.rope = kernels::Rope{rot, 10000.0f};
        AttentionWeights w;
        const std::size_t H = c.hidden;
        w.q_proj = matrix((gated ? 2 : 1) * Hq * hd, H, "q_proj");
        w.k_proj = matrix(Hkv * hd, H, "k_proj");
        w.v_proj = matrix(Hkv * hd, H, "v_proj");
        w.o_proj = matrix(H, Hq * hd, "o_proj", kOutGain);
        if (gated) {
            w.q_norm = values(hd, 0.1f);
            w.k_norm = values(hd, 0.1f);
        }
        return AttentionLayer<>(c, std::move(w));
    }

    template <class Kind>
    DecoderLayer<Kind> decoder(Kind mixer, bool moe = false, bool one_plus = false) {
        const std::size_t H = spec_.hidden;
        DecoderConfig dc{H, 1e-6f, one_plus, 1.0f};
        auto n1 = values(H, 0.1f, one_plus ? 0.0f : 1.0f);
        auto n2 = values(H, 0.1f, one_plus ? 0.0f : 1.0f);
        return DecoderLayer<Kind>(dc, std::move(n1), std::move(mixer), std::move(n2), moe ? moe_ffn(H) : dense_ffn(H));
    }

    template <class Stack>
    CausalLM<Stack> model(Stack stack) {
        LMConfig lc;
        lc.model_type = "random";
        lc.vocab = spec_.vocab;
        lc.hidden = spec_.hidden;
        Weight embed = matrix(spec_.vocab, spec_.hidden, "embed", std::sqrt(static_cast<float>(spec_.hidden)));
        return CausalLM<Stack>(lc, embed, std::move(stack), values(spec_.hidden, 0.1f, 1.0f), matrix(spec_.vocab, spec_.hidden, "lm_head"));
    }

private:
    RandomSpec spec_;
    std::mt19937 rng_;
};

using QwenLikeStack = HybridStack<DeltaNetLayer<>, AttentionLayer<>>;
using GraniteLikeStack = HybridStack<Mamba2Layer<>, AttentionLayer<>>;
using FalconLikeStack = HybridStack<ParallelLayer<AttentionLayer<>, Mamba2Layer<>>>;

/// Qwen-like: GDN GDN ATTN GDN (MoE in layer 1).
inline CausalLM<QwenLikeStack> random_qwen(const RandomSpec& s) {
    RandomWeights r(s);
    QwenLikeStack st;
    st.push_back(r.decoder(r.deltanet(), false, true));
    st.push_back(r.decoder(r.deltanet(2, 2, 8, 8), true, true));
    st.push_back(r.decoder(r.attention(true), false, true));
    st.push_back(r.decoder(r.deltanet(), false, true));
    return r.model(std::move(st));
}

/// Granite-like: M ATTN M M (NoPE attention).
inline CausalLM<GraniteLikeStack> random_granite(const RandomSpec& s) {
    RandomWeights r(s);
    GraniteLikeStack st;
    st.push_back(r.decoder(r.mamba2()));
    st.push_back(r.decoder(r.attention(false, 4, 2, 8, 0)));
    st.push_back(r.decoder(r.mamba2(4, 8, 6, 1), true));
    st.push_back(r.decoder(r.mamba2(2, 16, 4, 2, MambaNorm::norm_before_gate)));
    return r.model(std::move(st));
}

/// Falcon-like: three parallel layers.
inline CausalLM<FalconLikeStack> random_falcon(const RandomSpec& s) {
    RandomWeights r(s);
    FalconLikeStack st;
    using PL = ParallelLayer<AttentionLayer<>, Mamba2Layer<>>;
    for (int i = 0; i < 3; ++i)
        st.push_back(r.decoder(PL(r.attention(false, 4, 2, 8, 8), r.mamba2(4, 8, 6, 2, MambaNorm::gate_only), 0.8f, 0.6f)));
    return r.model(std::move(st));
}

}  // namespace hylens::test
