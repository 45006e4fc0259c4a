#pragma once
// Causal depthwise conv1d with state (architectures.md §0.3, HF semantics):
//   y_t[c] = bias[c] + sum_{k<K} weight[c][k] * u_{t-K+1+k}[c],  optionally silu(y)
// where u is the cached window (the last K pre-convolution inputs, oldest first) followed by
// the T new inputs. The state afterwards holds the last K inputs of that extended sequence, so
// any split of a sequence into calls gives the same outputs (the continuation contract).
// Accumulation in float32. Plain twin: reference/conv1d.hpp.

#include <algorithm>  // std::min, std::max
#include <bit>        // std::bit_cast
#include <cstdint>    // std::int32_t
#include <cstddef>    // std::size_t
#include <vector>     // std::vector

#include "../core/thread_pool.hpp"
#include "recurrent_common.hpp"

namespace hylens::kernels {

namespace detail {

// e^x for float x, within 2 ulp over the clamped range [-87.3, 88.3] (which keeps 2^n normal):
// n = round(x log2 e) by the 1.5 * 2^23 rounding trick, r = x - n ln 2 in two parts (Cephes
// constants), e^r by its degree-7 Taylor polynomial (|r| <= 0.35, truncation 5e-9), 2^n built
// in the exponent bits. Written as plain scalar code so that g++ vectorises the calling loop.
// Why not xsimd::exp: its AVX-512 path inlines intrinsics that make g++ 12 at -O1 (the
// sanitizer build) raise a false -Wuninitialized (GCC bug 105593), which -Werror turns fatal.
inline float exp_fast(float x) noexcept {
    x = std::min(std::max(x, -87.3f), 88.3f);
    constexpr float kRound = 12582912.0f;  // 1.5 * 2^23
    const float t = x * 1.44269504f + kRound;
    const float n = t - kRound;
    const float r = (x - n * 0.693359375f) + n * 2.12194440e-4f;
    float p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    const std::int32_t e = (std::bit_cast<std::int32_t>(t) - 0x4B400000 + 127) << 23;  // n + 127 in [1, 254]
    return p * std::bit_cast<float>(e);
}

// silu over n values (why a vectorised exp: a scalar expf per channel and token made silu
// 90 % of a 512-token conv at 6144 channels).
inline void silu_inplace_fast(float* y, std::size_t n) noexcept {
    for (std::size_t c = 0; c < n; ++c) y[c] = y[c] / (1.0f + exp_fast(-y[c]));
}

}  // namespace detail

/// x: (T, C) rows at stride ldx; weight: (C, K) row-major (conv1d.weight (C, 1, K) flattened),
/// weight[c*K + K-1] multiplies the current token; bias: (C) or nullptr; state: (C, K) in/out
/// (zeros = fresh sequence); y: (T, C) rows at stride ldy, may not alias x. Any T >= 1.
/// Throws ShapeError on zero sizes, short strides, null pointers or aliasing.
inline void causal_conv1d(const float* x, std::size_t ldx, std::size_t T, std::size_t C, const float* weight,
                          std::size_t K, const float* bias, float* state, float* y, std::size_t ldy,
                          bool apply_silu) {
    detail::check_conv_args("causal_conv1d", x, ldx, T, C, weight, K, state, y, ldy);
    // Channels are independent: split them into blocks that stay in L1 (why 256: the block's
    // transposed weights and window, 2 * K * 256 floats, are 8 KB at K = 4).
    constexpr std::size_t kBlock = 256;
    const std::size_t n_blocks = (C + kBlock - 1) / kBlock;
    parallel_for(n_blocks, [&](std::size_t b0, std::size_t b1) {
        // The block's scratch: on the stack up to kStackWidth taps, so no pool thread allocates
        // on its first call (a warm decode step allocates nothing, docs/performance.md).
        constexpr std::size_t kStackWidth = 8;
        float on_stack[2 * kStackWidth * kBlock];
        float* scratch = on_stack;
        if (K > kStackWidth) {
            thread_local std::vector<float> wide;
            wide.resize(2 * K * kBlock);
            scratch = wide.data();
        }
        for (std::size_t blk = b0; blk < b1; ++blk) {
            const std::size_t c0 = blk * kBlock, nc = std::min(kBlock, C - c0);
            float* wT = scratch;              // (K, nc): weights, tap-major so the channel loop is contiguous
            float* win = wT + K * kBlock;     // (K, nc): the cached window, oldest first
            for (std::size_t c = 0; c < nc; ++c)
                for (std::size_t k = 0; k < K; ++k) {
                    wT[k * nc + c] = weight[(c0 + c) * K + k];
                    win[k * nc + c] = state[(c0 + c) * K + k];
                }
            // Row s of the extended sequence: the window for s < K, else input row s - K.
            auto ext = [&](std::size_t s) { return s < K ? win + s * nc : x + (s - K) * ldx + c0; };
            for (std::size_t t = 0; t < T; ++t) {
                float* yr = y + t * ldy + c0;
                for (std::size_t c = 0; c < nc; ++c) yr[c] = bias ? bias[c0 + c] : 0.0f;
                for (std::size_t k = 0; k < K; ++k) {
                    const float* u = ext(t + 1 + k);
                    const float* w = wT + k * nc;
                    for (std::size_t c = 0; c < nc; ++c) yr[c] += w[c] * u[c];
                }
                if (apply_silu) detail::silu_inplace_fast(yr, nc);
            }
            // New window: rows T .. T+K-1 of the extended sequence (reads the saved old window).
            for (std::size_t j = 0; j < K; ++j) {
                const float* u = ext(T + j);
                for (std::size_t c = 0; c < nc; ++c) state[(c0 + c) * K + j] = u[c];
            }
        }
    });
}

}  // namespace hylens::kernels
