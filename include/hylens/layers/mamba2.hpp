#pragma once
// Mamba2Layer: the Mamba-2 (SSD) token mixer of Granite 4.0 H and Falcon-H1
// (families.md §4.6, §5.6).
//   zeta = (in_mult * in_proj x + bias) * mup      [T, 2Di + 2GN + H]: z | xBC | dt
//   xBC <- silu(causal_conv1d(xBC) + conv_bias)    (state: last K µP-scaled pre-conv inputs)
//   y = SSD(x, B, C, dt; A = -exp(A_log), dt_bias, D, time_step_limit)   head h reads group h/(H/G)
//   y <- y * silu(z)                   (norm = none: Falcon-H1 without mamba_rms_norm)
//        GNorm_gbn(y, z) / GNorm_nbg   (group-wise; Granite: one group over all of Di)
//   out = out_proj y + out_bias

#include <array>    // std::array
#include <cmath>    // std::exp
#include <cstddef>  // std::size_t
#include <limits>   // std::numeric_limits
#include <span>     // std::span
#include <string>   // std::string
#include <vector>   // std::vector

#include "../cache/recurrent_cache.hpp"
#include "../core/error.hpp"
#include "../core/thread_pool.hpp"
#include "../core/weight.hpp"
#include "../kernels/activations.hpp"
#include "../kernels/conv1d.hpp"
#include "../kernels/linear.hpp"
#include "../kernels/rms_norm.hpp"
#include "../kernels/ssd.hpp"
#include "../kernels/swiglu.hpp"
#include "hooks.hpp"
#include "../kernels/workspace.hpp"

namespace hylens {

enum class MambaNorm {
    gate_only,         ///< y * silu(z), no normalisation
    gate_before_norm,  ///< GNorm_gbn
    norm_before_gate,  ///< GNorm_nbg
};

struct Mamba2Config {
    std::size_t hidden = 0;
    std::size_t H = 0, P = 0, N = 0, G = 1;  ///< heads, head dim, state size, groups
    std::size_t conv_width = 4;
    float eps = 1e-5f;
    MambaNorm norm = MambaNorm::gate_before_norm;
    std::size_t norm_group = 0;  ///< elements per normalisation group (Granite: Di; Falcon-H1: Di / G)
    float in_multiplier = 1.0f;  ///< Falcon-H1 ssm_in_multiplier
    std::array<float, 5> mup{1, 1, 1, 1, 1};  ///< Falcon-H1 ssm_multipliers for z, x, B, C, dt
    float dt_min = 0.0f, dt_max = std::numeric_limits<float>::infinity();  ///< time_step_limit
    std::size_t d_inner() const noexcept { return H * P; }
    std::size_t conv_channels() const noexcept { return d_inner() + 2 * G * N; }
    std::size_t proj_rows() const noexcept { return 2 * d_inner() + 2 * G * N + H; }
};

struct Mamba2Weights {
    Weight in_proj;                  ///< [2Di + 2GN + H, hidden]
    std::vector<float> in_proj_bias; ///< empty or [2Di + 2GN + H]
    std::vector<float> conv;         ///< [Di + 2GN, K]
    std::vector<float> conv_bias;    ///< empty or [Di + 2GN]
    std::vector<float> dt_bias, A_log, D;  ///< [H] each
    std::vector<float> norm;         ///< empty (gate_only) or [Di]
    Weight out_proj;                 ///< [hidden, Di]
    std::vector<float> out_proj_bias;  ///< empty or [hidden]
};

template <class Scalar = float>
class Mamba2Layer {
    static_assert(std::is_same_v<Scalar, float>, "hylens: Mamba2Layer computes in float32 only");

public:
    using cache_type = RecurrentCache;
    using config_type = Mamba2Config;
    using weights_type = Mamba2Weights;
    static constexpr Site out_site = Site::ssm_out;
    static constexpr const char* kind_name = "mamba2";

    Mamba2Layer() = default;
    Mamba2Layer(Mamba2Config cfg, Mamba2Weights w) : c_(cfg), w_(std::move(w)) { validate(); }

    const Mamba2Config& config() const noexcept { return c_; }
    const Mamba2Weights& weights() const noexcept { return w_; }

    RecurrentCache new_cache(std::size_t batch) const {
        return RecurrentCache(batch, c_.conv_channels(), c_.conv_width, {c_.H, c_.P, c_.N});
    }

    void forward(const float* x, std::size_t B, std::size_t T, float* out, RecurrentCache& cache,
                 const ForwardContext& ctx) const {
        check<ShapeError>(cache.batch() == B && cache.conv_channels() == c_.conv_channels() &&
                              cache.conv_width() == c_.conv_width && cache.state_size() == c_.H * c_.P * c_.N,
                          "[Mamba2Layer] cache (batch ", cache.batch(), ", conv ", cache.conv_channels(), "x",
                          cache.conv_width(), ", state ", cache.state_size(), ") does not fit this layer (batch ", B,
                          ", conv ", c_.conv_channels(), "x", c_.conv_width, ", state ", c_.H * c_.P * c_.N, ")");
        const std::size_t M = B * T, Hd = c_.hidden, Di = c_.d_inner(), GN = c_.G * c_.N, Z = c_.proj_rows(),
                          Cm = c_.conv_channels();
        Workspace::Frame ws;
        const std::span<float> zeta = ws.uninitialized<float>(M * Z);  // [M, z | xBC | dt], written in full
        kernels::linear(x, Hd, M, w_.in_proj, w_.in_proj_bias.empty() ? nullptr : w_.in_proj_bias.data(),
                        zeta.data(), Z, c_.in_multiplier);
        if (has_mup_) {
            const std::size_t bounds[6] = {0, Di, 2 * Di, 2 * Di + GN, 2 * Di + 2 * GN, Z};
            for_each_row(M, Z, [&](std::size_t m) {
                for (std::size_t s = 0; s < 5; ++s)
                    for (std::size_t i = bounds[s]; i < bounds[s + 1]; ++i) zeta[m * Z + i] *= c_.mup[s];
            });
        }
        const std::span<float> act = ws.uninitialized<float>(T * Cm), y = ws.uninitialized<float>(M * Di),
                               dt = ws.zeros<float>(ctx.wants(Site::gate_dt) ? M * c_.H : 0);
        const kernels::SsdShape shape{T, c_.H, c_.P, c_.N, c_.G};
        for (std::size_t b = 0; b < B; ++b) {
            const float* zb = zeta.data() + b * T * Z;
            kernels::causal_conv1d(zb + Di, Z, T, Cm, w_.conv.data(), c_.conv_width,
                                   w_.conv_bias.empty() ? nullptr : w_.conv_bias.data(), cache.conv(b), act.data(), Cm,
                                   true);
            kernels::ssd(shape, act.data(), Cm, act.data() + Di, act.data() + Di + GN, Cm, zb + 2 * Di + 2 * GN, Z,
                         w_.dt_bias.data(), A_.data(), w_.D.data(), c_.dt_min, c_.dt_max, cache.state(b),
                         y.data() + b * T * Di, Di, dt.empty() ? nullptr : dt.data() + b * T * c_.H);
        }
        if (!dt.empty()) ctx.fire(Site::gate_dt, dt.data(), B, T, c_.H, c_.H);
        if (c_.norm == MambaNorm::gate_only) {
            for_each_row(M, Di, [&](std::size_t m) {  // y <- silu(z) * y: the SwiGLU gate's kernel
                kernels::swiglu(zeta.data() + m * Z, y.data() + m * Di, Di, y.data() + m * Di);
            });
        } else {
            kernels::gated_rms_norm(y.data(), Di, zeta.data(), Z, M, Di, c_.norm_group, w_.norm.data(), c_.eps,
                                    c_.norm == MambaNorm::norm_before_gate ? kernels::GateOrder::norm_before_gate
                                                                           : kernels::GateOrder::gate_before_norm,
                                    y.data(), Di);
        }
        ctx.fire(Site::lin_head_out, y.data(), B, T, Di, Di);
        kernels::linear(y.data(), Di, M, w_.out_proj, w_.out_proj_bias.empty() ? nullptr : w_.out_proj_bias.data(),
                        out, Hd);
    }

private:
    void validate() {
        const std::string n = "Mamba2Layer";
        check<ShapeError>(c_.H > 0 && c_.G > 0 && c_.H % c_.G == 0, "[", n, "] ", c_.H, " heads cannot share ", c_.G,
                          " groups");
        const std::size_t Di = c_.d_inner();
        require_shape(w_.in_proj, {c_.proj_rows(), c_.hidden}, n + " in_proj");
        if (!w_.in_proj_bias.empty()) require_size(w_.in_proj_bias, c_.proj_rows(), n + " in_proj.bias");
        require_size(w_.conv, c_.conv_channels() * c_.conv_width, n + " conv1d.weight");
        if (!w_.conv_bias.empty()) require_size(w_.conv_bias, c_.conv_channels(), n + " conv1d.bias");
        require_size(w_.dt_bias, c_.H, n + " dt_bias");
        require_size(w_.A_log, c_.H, n + " A_log");
        require_size(w_.D, c_.H, n + " D");
        if (c_.norm != MambaNorm::gate_only) {
            require_size(w_.norm, Di, n + " norm.weight");
            if (c_.norm_group == 0) c_.norm_group = Di;
            check<ShapeError>(Di % c_.norm_group == 0, "[", n, "] norm group ", c_.norm_group, " does not divide ", Di);
        }
        require_shape(w_.out_proj, {c_.hidden, Di}, n + " out_proj");
        if (!w_.out_proj_bias.empty()) require_size(w_.out_proj_bias, c_.hidden, n + " out_proj.bias");
        A_.resize(c_.H);
        for (std::size_t h = 0; h < c_.H; ++h) A_[h] = -std::exp(w_.A_log[h]);
        has_mup_ = false;
        for (float m : c_.mup) has_mup_ = has_mup_ || m != 1.0f;
    }

    Mamba2Config c_;
    Mamba2Weights w_;
    std::vector<float> A_;  // -exp(A_log)
    bool has_mup_ = false;
};

}  // namespace hylens
