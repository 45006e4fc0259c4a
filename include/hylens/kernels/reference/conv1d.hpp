#pragma once
// Plain twin of kernels/conv1d.hpp: the causal depthwise conv1d with state (families.md
// §0.3), one token at a time exactly as transformers' torch_causal_conv1d_update: shift the
// window left, append the new input, dot it with the weight. Accumulates in double.

#include <cmath>    // std::exp
#include <cstddef>  // std::size_t

#include "../recurrent_common.hpp"

namespace hylens::reference {

/// Same contract as kernels::causal_conv1d. x: (T, C) rows at stride ldx; weight (C, K);
/// bias (C) or nullptr; state (C, K) in/out, oldest input first; y: (T, C) rows at stride ldy.
inline void causal_conv1d(const float* x, std::size_t ldx, std::size_t T, std::size_t C, const float* weight,
                          std::size_t K, const float* bias, float* state, float* y, std::size_t ldy,
                          bool apply_silu) {
    kernels::detail::check_conv_args("reference::causal_conv1d", x, ldx, T, C, weight, K, state, y, ldy);
    for (std::size_t t = 0; t < T; ++t) {
        for (std::size_t c = 0; c < C; ++c) {
            float* win = state + c * K;  // (K): oldest first
            for (std::size_t j = 0; j + 1 < K; ++j) win[j] = win[j + 1];
            win[K - 1] = x[t * ldx + c];
            double acc = bias ? bias[c] : 0.0;
            for (std::size_t j = 0; j < K; ++j) acc += double(weight[c * K + j]) * win[j];
            const double out = apply_silu ? acc / (1.0 + std::exp(-acc)) : acc;
            y[t * ldy + c] = static_cast<float>(out);
        }
    }
}

}  // namespace hylens::reference
