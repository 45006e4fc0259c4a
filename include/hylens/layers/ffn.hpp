#pragma once
// Feed-forward parts of a decoder layer (families.md §0.6, §3.7, §4.7, §5.7):
//   SwiGLU(y)  = down_mult * (down · (silu(gate_mult * (gate·y + bg)) ⊙ (up·y + bu)) + bd)
//                gate and up either separate or fused in one [2I, H] matrix ([gate | up] rows)
//   MoE(y)     = Σ_{e in top-k} w_e SwiGLU_e(y)       (routing: kernels/moe.hpp)
//   FeedForward = dense SwiGLU | MoE (+ shared expert, optionally sigmoid-gated)

#include <algorithm>  // std::copy, std::fill, std::max
#include <cstddef>  // std::size_t
#include <span>     // std::span
#include <string>   // std::string
#include <vector>   // std::vector

#include "../core/error.hpp"
#include "../core/thread_pool.hpp"
#include "../core/weight.hpp"
#include "../kernels/activations.hpp"
#include "../kernels/linear.hpp"
#include "../kernels/moe.hpp"
#include "../kernels/swiglu.hpp"
#include "../kernels/workspace.hpp"

namespace hylens {

struct SwiGLU {
    std::size_t hidden = 0, inter = 0;
    Weight gate, up;   ///< [I, H] each, or empty when fused
    Weight gate_up;    ///< [2I, H] fused, rows [gate | up]
    Weight down;       ///< [H, I]
    std::vector<float> gate_bias, up_bias, down_bias;
    float gate_mult = 1.0f, down_mult = 1.0f;

    void validate(const std::string& what) const {
        if (!gate_up.empty()) {
            require_shape(gate_up, {2 * inter, hidden}, what + " gate_up");
        } else {
            require_shape(gate, {inter, hidden}, what + " gate_proj");
            require_shape(up, {inter, hidden}, what + " up_proj");
        }
        require_shape(down, {hidden, inter}, what + " down_proj");
        if (!gate_bias.empty()) require_size(gate_bias, inter, what + " gate bias");
        if (!up_bias.empty()) require_size(up_bias, inter, what + " up bias");
        if (!down_bias.empty()) require_size(down_bias, hidden, what + " down bias");
    }

    /// out[M, H] = SwiGLU(y[M, H]) (overwrites out).
    void forward(const float* y, std::size_t M, float* out) const {
        const std::size_t I = inter;
        Workspace::Frame ws;
        const std::span<float> gu = ws.uninitialized<float>(M * 2 * I);
        if (!gate_up.empty()) {
            kernels::linear(y, hidden, M, gate_up, nullptr, gu.data(), 2 * I);
        } else {
            kernels::linear_group(y, hidden, M,
                                  {{gate, gate_bias.empty() ? nullptr : gate_bias.data(), gu.data(), 2 * I},
                                   {up, up_bias.empty() ? nullptr : up_bias.data(), gu.data() + I, 2 * I}});
        }
        // The gating, rows split over the pool (row_grain: M x I exps, on one thread ~3 % of a
        // 2-thread prefill; a decode step's single row runs inline).
        // Each value is computed alike whatever the split.
        const std::span<float> act = ws.uninitialized<float>(M * I);
        for_each_row(M, I, [&](std::size_t m) {
            kernels::swiglu(gu.data() + m * 2 * I, gu.data() + m * 2 * I + I, I, act.data() + m * I, gate_mult);
        });
        kernels::linear(act.data(), I, M, down, down_bias.empty() ? nullptr : down_bias.data(), out, hidden);
        if (down_mult != 1.0f)
            for_each_element(M, hidden, [&](std::size_t i) { out[i] *= down_mult; });
    }
};

struct MoE {
    std::size_t hidden = 0, top_k = 1;
    kernels::Routing routing = kernels::Routing::softmax_topk_renorm;
    Weight router;                 ///< [E, H]
    std::vector<SwiGLU> experts;   ///< E experts (views into fused tensors or per-expert tensors)

    void validate(const std::string& what) const {
        check<ShapeError>(!experts.empty(), "[", what, "] MoE without experts");
        require_shape(router, {experts.size(), hidden}, what + " router");
        check<ShapeError>(top_k >= 1 && top_k <= experts.size(), "[", what, "] top-k ", top_k, " of ",
                          experts.size(), " experts");
        for (std::size_t e = 0; e < experts.size(); ++e) experts[e].validate(what + " expert " + std::to_string(e));
    }

    /// out[M, H] += Σ_e w_e Expert_e(y) (accumulates).
    void forward_add(const float* y, std::size_t M, float* out) const {
        const std::size_t E = experts.size(), k = top_k;
        Workspace::Frame ws;
        const std::span<float> logits = ws.zeros<float>(M * E);
        kernels::linear(y, hidden, M, router, nullptr, logits.data(), E);
        // Each token's top-k experts and their weights.
        const std::span<int> chosen = ws.zeros<int>(M * k), order = ws.zeros<int>(E);
        const std::span<float> weight = ws.zeros<float>(M * k), score = ws.zeros<float>(E);
        for (std::size_t m = 0; m < M; ++m)
            kernels::route_into(logits.data() + m * E, E, k, routing, score.data(), order.data(), chosen.data() + m * k,
                                weight.data() + m * k);
        // Run each expert once on the rows of the tokens that chose it (in token order).
        const std::span<std::size_t> rows = ws.zeros<std::size_t>(M);
        const std::span<float> wts = ws.zeros<float>(M), xin = ws.zeros<float>(M * hidden),
                               xout = ws.zeros<float>(M * hidden);
        for (std::size_t e = 0; e < E; ++e) {
            std::size_t n = 0;
            for (std::size_t m = 0; m < M; ++m)
                for (std::size_t i = 0; i < k; ++i)
                    if (static_cast<std::size_t>(chosen[m * k + i]) == e) {
                        rows[n] = m;
                        wts[n++] = weight[m * k + i];
                    }
            if (n == 0) continue;
            for (std::size_t i = 0; i < n; ++i)
                std::copy(y + rows[i] * hidden, y + (rows[i] + 1) * hidden, xin.data() + i * hidden);
            experts[e].forward(xin.data(), n, xout.data());
            for (std::size_t i = 0; i < n; ++i)
                for (std::size_t d = 0; d < hidden; ++d) out[rows[i] * hidden + d] += wts[i] * xout[i * hidden + d];
        }
    }
};

/// The feed-forward block of one decoder layer.
struct FeedForward {
    std::size_t hidden = 0;
    bool has_dense = false;    ///< a dense SwiGLU (dense models; Granite's shared_mlp)
    SwiGLU dense;
    bool has_moe = false;
    MoE moe;
    bool has_shared_gate = false;  ///< Qwen: sigmoid(shared_expert_gate · y) scales the dense part
    Weight shared_gate;            ///< [1, H]

    void validate(const std::string& what) const {
        check<ShapeError>(has_dense || has_moe, "[", what, "] feed-forward has neither a dense MLP nor experts");
        if (has_dense) dense.validate(what + " mlp");
        if (has_moe) moe.validate(what + " moe");
        if (has_shared_gate) require_shape(shared_gate, {1, hidden}, what + " shared_expert_gate");
    }

    /// out[M, H] = FFN(y[M, H]).
    void forward(const float* y, std::size_t M, float* out) const {
        if (has_dense) {
            dense.forward(y, M, out);
            if (has_shared_gate)
                for (std::size_t m = 0; m < M; ++m) {
                    const float s = kernels::sigmoid(kernels::linear_row(y + m * hidden, shared_gate, 0));
                    for (std::size_t d = 0; d < hidden; ++d) out[m * hidden + d] *= s;
                }
        } else {
            std::fill(out, out + M * hidden, 0.0f);
        }
        if (has_moe) moe.forward_add(y, M, out);
    }
};

}  // namespace hylens
