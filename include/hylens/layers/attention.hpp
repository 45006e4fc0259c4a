#pragma once
// AttentionLayer: causal GQA softmax attention over a KV cache, in the variants the three
// families use (families.md §3.5, §4.5, §5.5):
//   u = in_mult * x                                    (Falcon-H1 attention_in_multiplier)
//   q = q_proj u (+b)  [T, Hq*hd]; gated models: per head [q_h | gate_h] (Qwen)
//   k = key_mult * (k_proj u (+b)), v = v_proj u (+b)  [T, Hkv*hd]
//   q, k <- RMSNorm_1p per head (Qwen q_norm / k_norm);  q, k <- partial RoPE or none (NoPE)
//   o = softmax(scale q K^T) V over cached + new keys;  gated: o <- o * sigmoid(gate)
//   out = o_proj o (+b)
// The KV cache stores k after norm, key multiplier and RoPE, and raw v.

#include <algorithm>  // std::copy
#include <cmath>    // std::sqrt
#include <cstddef>  // std::size_t
#include <span>     // std::span
#include <string>   // std::string
#include <vector>   // std::vector

#include "../cache/kv_cache.hpp"
#include "../core/error.hpp"
#include "../core/thread_pool.hpp"
#include "../core/weight.hpp"
#include "../kernels/activations.hpp"
#include "../kernels/attention.hpp"
#include "../kernels/linear.hpp"
#include "../kernels/rms_norm.hpp"
#include "../kernels/rope.hpp"
#include "hooks.hpp"
#include "../kernels/workspace.hpp"

namespace hylens {

struct AttentionConfig {
    std::size_t hidden = 0;
    std::size_t Hq = 0, Hkv = 0, head_dim = 0;
    bool gated = false;           ///< q_proj holds [query | gate] per head (Qwen3.5 / Qwen3-Next)
    bool qk_norm = false;         ///< per-head RMSNorm of q and k
    bool qk_norm_one_plus = true; ///< (1 + w) form of that norm (Qwen)
    float eps = 1e-6f;
    kernels::Rope rope{};         ///< rot_dim 0 = no positional encoding (NoPE)
    float scale = 0.0f;           ///< score scale; 0 means 1/sqrt(head_dim)
    float in_multiplier = 1.0f;   ///< Falcon-H1 attention_in_multiplier
    float key_multiplier = 1.0f;  ///< Falcon-H1 key_multiplier
    float score_scale() const noexcept { return scale != 0.0f ? scale : 1.0f / std::sqrt(static_cast<float>(head_dim)); }
};

struct AttentionWeights {
    Weight q_proj, k_proj, v_proj, o_proj;
    std::vector<float> q_bias, k_bias, v_bias, o_bias;  ///< empty when the model has no attention bias
    std::vector<float> q_norm, k_norm;                  ///< [head_dim] when qk_norm
};

template <class Scalar = float>
class AttentionLayer {
    static_assert(std::is_same_v<Scalar, float>, "hylens: AttentionLayer computes in float32 only");

public:
    using cache_type = KVCache;
    using config_type = AttentionConfig;
    using weights_type = AttentionWeights;
    static constexpr Site out_site = Site::attn_out;
    static constexpr const char* kind_name = "attention";

    AttentionLayer() = default;
    AttentionLayer(AttentionConfig cfg, AttentionWeights w) : c_(cfg), w_(std::move(w)) { validate(); }

    const AttentionConfig& config() const noexcept { return c_; }
    const AttentionWeights& weights() const noexcept { return w_; }

    KVCache new_cache(std::size_t batch) const { return KVCache(batch, c_.Hkv, c_.head_dim); }

    void forward(const float* x, std::size_t B, std::size_t T, float* out, KVCache& cache,
                 const ForwardContext& ctx) const {
        check<ShapeError>(cache.batch() == B && cache.kv_heads() == c_.Hkv && cache.head_dim() == c_.head_dim,
                          "[AttentionLayer] KV cache (batch ", cache.batch(), ", ", cache.kv_heads(), " heads x ",
                          cache.head_dim(), ") does not fit this layer (batch ", B, ", ", c_.Hkv, " heads x ",
                          c_.head_dim, ")");
        check<ShapeError>(T == 0 || ctx.positions != nullptr, "[AttentionLayer] positions are required");
        const std::size_t M = B * T, hd = c_.head_dim, Qd = c_.Hq * hd, KVd = c_.Hkv * hd, Hd = c_.hidden;
        const std::size_t Qp = c_.gated ? 2 * Qd : Qd;
        Workspace::Frame ws;
        const std::span<float> qp = ws.uninitialized<float>(M * Qp), k = ws.uninitialized<float>(M * KVd),
                               v = ws.uninitialized<float>(M * KVd);
        kernels::linear_group(x, Hd, M,
                              {{w_.q_proj, bias(w_.q_bias), qp.data(), Qp},
                               {w_.k_proj, bias(w_.k_bias), k.data(), KVd},
                               {w_.v_proj, bias(w_.v_bias), v.data(), KVd}},
                              c_.in_multiplier);
        // The elementwise passes below split their rows (tokens) over the pool; a decode step's
        // single row runs inline.
        if (c_.key_multiplier != 1.0f)
            for_each_element(M, KVd, [&](std::size_t i) { k[i] *= c_.key_multiplier; });

        std::span<float> q = qp, gate;
        if (c_.gated) {  // de-interleave per head [q_h | gate_h]
            q = ws.uninitialized<float>(M * Qd);
            gate = ws.uninitialized<float>(M * Qd);
            for_each_row(M, Qp, [&](std::size_t m) {
                for (std::size_t h = 0; h < c_.Hq; ++h) {
                    const float* src = qp.data() + m * Qp + h * 2 * hd;
                    std::copy(src, src + hd, q.data() + m * Qd + h * hd);
                    std::copy(src + hd, src + 2 * hd, gate.data() + m * Qd + h * hd);
                }
            });
        }
        ctx.fire(Site::q, q.data(), B, T, Qd, Qd);
        ctx.fire(Site::k, k.data(), B, T, KVd, KVd);
        ctx.fire(Site::v, v.data(), B, T, KVd, KVd);

        if (c_.qk_norm) {
            kernels::rms_norm(q.data(), hd, M * c_.Hq, hd, w_.q_norm.data(), c_.eps, q.data(), hd, c_.qk_norm_one_plus);
            kernels::rms_norm(k.data(), hd, M * c_.Hkv, hd, w_.k_norm.data(), c_.eps, k.data(), hd,
                              c_.qk_norm_one_plus);
        }
        for (std::size_t b = 0; b < B; ++b) {
            c_.rope.apply(q.data() + b * T * Qd, Qd, T, c_.Hq, hd, ctx.positions);
            c_.rope.apply(k.data() + b * T * KVd, KVd, T, c_.Hkv, hd, ctx.positions);
        }

        // Append the new K/V, then attend over everything cached.
        cache.reserve_more(T);
        const std::size_t L = cache.length();
        for (std::size_t b = 0; b < B; ++b)
            for (std::size_t j = 0; j < c_.Hkv; ++j)
                for (std::size_t t = 0; t < T; ++t) {
                    const float* ks = k.data() + (b * T + t) * KVd + j * hd;
                    const float* vs = v.data() + (b * T + t) * KVd + j * hd;
                    std::copy(ks, ks + hd, cache.k(b, j) + (L + t) * hd);
                    std::copy(vs, vs + hd, cache.v(b, j) + (L + t) * hd);
                }
        cache.commit(T);

        const std::span<float> o = ws.uninitialized<float>(M * Qd);
        const bool want_probs = ctx.wants(Site::attn_probs);
        const kernels::AttentionShape shape{T, L + T, c_.Hq, c_.Hkv, hd};
        // A decode step (T = 1) has the kernel write its scores here instead of into its
        // per-thread scratch: Hq x capacity floats a sequence, so this buffer is reallocated only
        // when the KV cache grows (docs/kernels.md, "Per-call buffers"). The kernel writes every
        // score it reads.
        std::span<float> probs;
        if (want_probs)
            probs = ws.zeros<float>(B * c_.Hq * T * (L + T));
        else if (T == 1)
            probs = ws.uninitialized<float>(B * c_.Hq * cache.capacity());
        for (std::size_t b = 0; b < B; ++b)
            kernels::attention(shape, q.data() + b * T * Qd, Qd, cache.k(b, 0), cache.v(b, 0), cache.head_stride(),
                               c_.score_scale(), o.data() + b * T * Qd, Qd,
                               probs.empty() ? nullptr : probs.data() + b * c_.Hq * T * (L + T));
        if (want_probs) ctx.fire(Site::attn_probs, probs.data(), B, c_.Hq * T, L + T, L + T);

        if (c_.gated)
            for_each_element(M, Qd, [&](std::size_t i) { o[i] *= kernels::sigmoid(gate[i]); });
        ctx.fire(Site::head_out, o.data(), B, T, Qd, Qd);
        kernels::linear(o.data(), Qd, M, w_.o_proj, bias(w_.o_bias), out, Hd);
    }

private:
    static const float* bias(const std::vector<float>& b) noexcept { return b.empty() ? nullptr : b.data(); }

    void validate() {
        const std::string n = "AttentionLayer";
        check<ShapeError>(c_.Hq > 0 && c_.Hkv > 0 && c_.Hq % c_.Hkv == 0, "[", n, "] ", c_.Hq,
                          " query heads cannot share ", c_.Hkv, " KV heads");
        const std::size_t hd = c_.head_dim, Qd = c_.Hq * hd, KVd = c_.Hkv * hd;
        require_shape(w_.q_proj, {c_.gated ? 2 * Qd : Qd, c_.hidden}, n + " q_proj");
        require_shape(w_.k_proj, {KVd, c_.hidden}, n + " k_proj");
        require_shape(w_.v_proj, {KVd, c_.hidden}, n + " v_proj");
        require_shape(w_.o_proj, {c_.hidden, Qd}, n + " o_proj");
        if (!w_.q_bias.empty()) require_size(w_.q_bias, c_.gated ? 2 * Qd : Qd, n + " q_proj.bias");
        if (!w_.k_bias.empty()) require_size(w_.k_bias, KVd, n + " k_proj.bias");
        if (!w_.v_bias.empty()) require_size(w_.v_bias, KVd, n + " v_proj.bias");
        if (!w_.o_bias.empty()) require_size(w_.o_bias, c_.hidden, n + " o_proj.bias");
        if (c_.qk_norm) {
            require_size(w_.q_norm, hd, n + " q_norm.weight");
            require_size(w_.k_norm, hd, n + " k_norm.weight");
        }
        check<ShapeError>(c_.rope.rot_dim % 2 == 0 && c_.rope.rot_dim <= hd, "[", n, "] rotary dim ", c_.rope.rot_dim,
                          " for head dim ", hd);
    }

    AttentionConfig c_;
    AttentionWeights w_;
};

}  // namespace hylens
