#pragma once
// Causal depthwise conv1d with state (families.md §0.3, HF semantics):
//   y_t[c] = bias[c] + sum_{k<K} weight[c][k] * u_{t-K+1+k}[c],  optionally silu(y)
// where u is the cached window (the last K pre-convolution inputs, oldest first) followed by
// the T new inputs. The state afterwards holds the last K inputs of that extended sequence, so
// any split of a sequence into calls gives the same outputs (the continuation contract).
// Accumulation in float32, at the instruction-set level chosen at run time (core/simd.hpp; the
// loops are isa/recurrent_body.inl's conv_block, and conv_step for one token). Plain twin:
// reference/conv1d.hpp.

#include <algorithm>  // std::min
#include <cstddef>    // std::size_t
#include <vector>     // std::vector

#include "../core/simd.hpp"
#include "../core/thread_pool.hpp"
#include "isa/recurrent.hpp"
#include "recurrent_common.hpp"

namespace hylens::kernels {

/// x: (T, C) rows at stride ldx; weight: (C, K) row-major (conv1d.weight (C, 1, K) flattened),
/// weight[c*K + K-1] multiplies the current token; bias: (C) or nullptr; state: (C, K) in/out
/// (zeros = fresh sequence); y: (T, C) rows at stride ldy, may not alias x. Any T >= 1.
/// Throws ShapeError on zero sizes, short strides, null pointers or aliasing.
inline void causal_conv1d(const float* x, std::size_t ldx, std::size_t T, std::size_t C, const float* weight,
                          std::size_t K, const float* bias, float* state, float* y, std::size_t ldy,
                          bool apply_silu) {
    detail::check_conv_args("causal_conv1d", x, ldx, T, C, weight, K, state, y, ldy);
    const simd::Level level = simd::active();
    if (T == 1) {
        // A decode step: each channel's window shifted in place, no blocks (isa conv_step); split
        // over the pool only where a part has at least 32,768 taps (a few microseconds).
        parallel_for(
            C,
            [&](std::size_t c0, std::size_t c1) {
                isa::with_isa(level,
                              [&](auto tag) { conv_step(tag, x, weight, K, c0, c1, bias, state, y, apply_silu); });
            },
            row_grain(K));
        return;
    }
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
            // The outputs at the run-time instruction-set level (isa/recurrent_body.inl).
            isa::with_isa(level, [&](auto tag) {
                conv_block(tag, wT, win, x, ldx, c0, T, K, nc, bias, y, ldy, apply_silu);
            });
            // Row s of the extended sequence: the window for s < K, else input row s - K.
            auto ext = [&](std::size_t s) { return s < K ? win + s * nc : x + (s - K) * ldx + c0; };
            // New window: rows T .. T+K-1 of the extended sequence (reads the saved old window).
            for (std::size_t j = 0; j < K; ++j) {
                const float* u = ext(T + j);
                for (std::size_t c = 0; c < nc; ++c) state[(c0 + c) * K + j] = u[c];
            }
        }
    });
}

}  // namespace hylens::kernels
