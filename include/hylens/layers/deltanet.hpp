#pragma once
// DeltaNetLayer: the Gated DeltaNet token mixer of Qwen3.5 / Qwen3-Next (families.md §3.6).
//   w = in_proj_qkv x            [T, 2Kd+Vd]   (q | k | v, head-major)
//   z = in_proj_z x, b, a        [T, Vd], [T, Hv], [T, Hv]
//   w <- silu(causal_conv1d(w))  (state: last K pre-conv inputs)
//   beta = sigmoid(b); g = -exp(A_log) * softplus(a + dt_bias)
//   o = gated_delta_rule(L2(q)/sqrt(dk), L2(k), v, g, beta; S)   value head h reads key head h/(Hv/Hk)
//   o <- GNorm_nbg(o, z) per value head;   out = out_proj o
// Qwen3-Next stores in_proj_qkvz / in_proj_ba grouped per key head (§3.6.2); the layer keeps
// the fused matrices and de-interleaves the projected rows (no weight copy).

#include <algorithm>  // std::copy
#include <cmath>    // std::exp
#include <cstddef>  // std::size_t
#include <span>     // std::span
#include <string>   // std::string
#include <vector>   // std::vector

#include "../cache/recurrent_cache.hpp"
#include "../core/error.hpp"
#include "../core/weight.hpp"
#include "../kernels/activations.hpp"
#include "../kernels/conv1d.hpp"
#include "../kernels/gated_delta.hpp"
#include "../kernels/linear.hpp"
#include "../kernels/rms_norm.hpp"
#include "hooks.hpp"
#include "../kernels/workspace.hpp"

namespace hylens {

struct DeltaNetConfig {
    std::size_t hidden = 0;
    std::size_t Hk = 0, Hv = 0, dk = 0, dv = 0;  ///< key heads, value heads, key / value head dims
    std::size_t conv_width = 4;
    float eps = 1e-6f;     ///< epsilon of the gated output norm
    bool fused = false;    ///< Qwen3-Next in_proj_qkvz / in_proj_ba layout
    std::size_t Kd() const noexcept { return Hk * dk; }
    std::size_t Vd() const noexcept { return Hv * dv; }
    std::size_t conv_channels() const noexcept { return 2 * Kd() + Vd(); }
};

struct DeltaNetWeights {
    Weight in_proj_qkv, in_proj_z, in_proj_b, in_proj_a;  ///< Qwen3.5 layout
    Weight in_proj_qkvz, in_proj_ba;                       ///< Qwen3-Next fused layout
    std::vector<float> conv;     ///< [2Kd+Vd, K] (small parameters are widened to float32 at load)
    std::vector<float> A_log;    ///< [Hv]
    std::vector<float> dt_bias;  ///< [Hv]
    std::vector<float> norm;     ///< [dv] plain weight of the gated norm
    Weight out_proj;             ///< [hidden, Vd]
};

template <class Scalar = float>
class DeltaNetLayer {
    static_assert(std::is_same_v<Scalar, float>, "hylens: DeltaNetLayer computes in float32 only");

public:
    using cache_type = RecurrentCache;
    using config_type = DeltaNetConfig;
    using weights_type = DeltaNetWeights;
    static constexpr Site out_site = Site::ssm_out;
    static constexpr const char* kind_name = "gdn";

    DeltaNetLayer() = default;
    DeltaNetLayer(DeltaNetConfig cfg, DeltaNetWeights w) : c_(cfg), w_(std::move(w)) { validate(); }

    const DeltaNetConfig& config() const noexcept { return c_; }
    const DeltaNetWeights& weights() const noexcept { return w_; }

    RecurrentCache new_cache(std::size_t batch) const {
        return RecurrentCache(batch, c_.conv_channels(), c_.conv_width, {c_.Hv, c_.dk, c_.dv});
    }

    /// x: [B*T, hidden] normed input; out: [B*T, hidden].
    void forward(const float* x, std::size_t B, std::size_t T, float* out, RecurrentCache& cache,
                 const ForwardContext& ctx) const {
        check_cache(cache, B);
        const std::size_t M = B * T, H = c_.hidden, Cc = c_.conv_channels(), Vd = c_.Vd(), Hv = c_.Hv;
        Workspace::Frame ws;
        const std::span<float> w = ws.uninitialized<float>(M * Cc), z = ws.uninitialized<float>(M * Vd),
                               braw = ws.uninitialized<float>(M * Hv), araw = ws.uninitialized<float>(M * Hv);
        project(x, M, w.data(), z.data(), braw.data(), araw.data());

        const std::span<float> g = ws.zeros<float>(M * Hv), beta = ws.zeros<float>(M * Hv);
        for (std::size_t r = 0; r < M; ++r)
            for (std::size_t h = 0; h < Hv; ++h) {
                beta[r * Hv + h] = kernels::sigmoid(braw[r * Hv + h]);
                g[r * Hv + h] = -std::exp(w_.A_log[h]) * kernels::softplus(araw[r * Hv + h] + w_.dt_bias[h]);
            }
        ctx.fire(Site::gate_g, g.data(), B, T, Hv, Hv);
        ctx.fire(Site::gate_beta, beta.data(), B, T, Hv, Hv);

        const std::span<float> act = ws.uninitialized<float>(T * Cc), o = ws.uninitialized<float>(M * Vd);
        const kernels::GatedDeltaShape shape{T, c_.Hk, Hv, c_.dk, c_.dv};
        for (std::size_t b = 0; b < B; ++b) {
            kernels::causal_conv1d(w.data() + b * T * Cc, Cc, T, Cc, w_.conv.data(), c_.conv_width, nullptr,
                                   cache.conv(b), act.data(), Cc, true);
            const float* q = act.data();
            const float* k = act.data() + c_.Kd();
            const float* v = act.data() + 2 * c_.Kd();
            kernels::gated_delta_rule(shape, q, Cc, k, Cc, v, Cc, g.data() + b * T * Hv, beta.data() + b * T * Hv,
                                      cache.state(b), o.data() + b * T * Vd, Vd, true);
        }
        kernels::gated_rms_norm(o.data(), Vd, z.data(), Vd, M, Vd, c_.dv, norm_tiled_.data(), c_.eps,
                                kernels::GateOrder::norm_before_gate, o.data(), Vd);
        ctx.fire(Site::lin_head_out, o.data(), B, T, Vd, Vd);
        kernels::linear(o.data(), Vd, M, w_.out_proj, nullptr, out, H);
    }

private:
    void validate() {
        const std::string n = "DeltaNetLayer";
        check<ShapeError>(c_.Hk > 0 && c_.Hv % c_.Hk == 0, "[", n, "] ", c_.Hv, " value heads cannot share ", c_.Hk,
                          " key heads");
        const std::size_t H = c_.hidden, Kd = c_.Kd(), Vd = c_.Vd();
        if (c_.fused) {
            require_shape(w_.in_proj_qkvz, {2 * Kd + 2 * Vd, H}, n + " in_proj_qkvz");
            require_shape(w_.in_proj_ba, {2 * c_.Hv, H}, n + " in_proj_ba");
        } else {
            require_shape(w_.in_proj_qkv, {2 * Kd + Vd, H}, n + " in_proj_qkv");
            require_shape(w_.in_proj_z, {Vd, H}, n + " in_proj_z");
            require_shape(w_.in_proj_b, {c_.Hv, H}, n + " in_proj_b");
            require_shape(w_.in_proj_a, {c_.Hv, H}, n + " in_proj_a");
        }
        require_size(w_.conv, c_.conv_channels() * c_.conv_width, n + " conv1d.weight");
        require_size(w_.A_log, c_.Hv, n + " A_log");
        require_size(w_.dt_bias, c_.Hv, n + " dt_bias");
        require_size(w_.norm, c_.dv, n + " norm.weight");
        require_shape(w_.out_proj, {H, Vd}, n + " out_proj");
        norm_tiled_.resize(Vd);
        for (std::size_t i = 0; i < Vd; ++i) norm_tiled_[i] = w_.norm[i % c_.dv];
    }

    void check_cache(const RecurrentCache& cache, std::size_t B) const {
        check<ShapeError>(cache.batch() == B && cache.conv_channels() == c_.conv_channels() &&
                              cache.conv_width() == c_.conv_width && cache.state_size() == c_.Hv * c_.dk * c_.dv,
                          "[DeltaNetLayer] cache (batch ", cache.batch(), ", conv ", cache.conv_channels(), "x",
                          cache.conv_width(), ", state ", cache.state_size(), ") does not fit this layer (batch ", B,
                          ", conv ", c_.conv_channels(), "x", c_.conv_width, ", state ", c_.Hv * c_.dk * c_.dv, ")");
    }

    /// Projected rows in the canonical layout: w [M, 2Kd+Vd], z [M, Vd], b [M, Hv], a [M, Hv].
    void project(const float* x, std::size_t M, float* w, float* z, float* b, float* a) const {
        const std::size_t H = c_.hidden, Kd = c_.Kd(), Vd = c_.Vd(), Hv = c_.Hv, Cc = c_.conv_channels();
        if (!c_.fused) {
            kernels::linear_group(x, H, M,
                                  {{w_.in_proj_qkv, nullptr, w, Cc},
                                   {w_.in_proj_z, nullptr, z, Vd},
                                   {w_.in_proj_b, nullptr, b, Hv},
                                   {w_.in_proj_a, nullptr, a, Hv}});
            return;
        }
        // Fused: per key head g, qkvz rows are [q_g (dk) | k_g (dk) | v of r heads (r*dv) | z of r heads (r*dv)]
        // and ba rows are [b of r heads | a of r heads] (families.md §3.6.2).
        const std::size_t r = Hv / c_.Hk, dk = c_.dk, dv = c_.dv, Pg = 2 * dk + 2 * r * dv;
        Workspace::Frame ws;
        const std::span<float> qkvz = ws.uninitialized<float>(M * (2 * Kd + 2 * Vd)),
                               ba = ws.uninitialized<float>(M * 2 * Hv);
        kernels::linear(x, H, M, w_.in_proj_qkvz, nullptr, qkvz.data(), 2 * Kd + 2 * Vd);
        kernels::linear(x, H, M, w_.in_proj_ba, nullptr, ba.data(), 2 * Hv);
        for (std::size_t m = 0; m < M; ++m) {
            const float* src = qkvz.data() + m * (2 * Kd + 2 * Vd);
            const float* sba = ba.data() + m * 2 * Hv;
            for (std::size_t g = 0; g < c_.Hk; ++g) {
                const float* blk = src + g * Pg;
                std::copy(blk, blk + dk, w + m * Cc + g * dk);                                   // q_g
                std::copy(blk + dk, blk + 2 * dk, w + m * Cc + Kd + g * dk);                     // k_g
                std::copy(blk + 2 * dk, blk + 2 * dk + r * dv, w + m * Cc + 2 * Kd + g * r * dv);  // v of heads g*r..
                std::copy(blk + 2 * dk + r * dv, blk + Pg, z + m * Vd + g * r * dv);              // z of heads g*r..
                for (std::size_t j = 0; j < r; ++j) {
                    b[m * Hv + g * r + j] = sba[g * 2 * r + j];
                    a[m * Hv + g * r + j] = sba[g * 2 * r + r + j];
                }
            }
        }
    }

    DeltaNetConfig c_;
    DeltaNetWeights w_;
    std::vector<float> norm_tiled_;  // [Vd]: the per-head norm weight repeated for each value head
};

}  // namespace hylens
