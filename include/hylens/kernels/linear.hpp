#pragma once
// y = x W^T (+ bias): the projection of every layer. W is a Weight [out, in] (nn.Linear
// layout) held as float32 or bfloat16.
//  * float32: one sgemm, split over the thread pool by output columns (core/blas.hpp).
//  * bfloat16, few rows (decode): a fused widen-and-dot kernel that reads the bf16 bytes once
//    (half the bytes of float32: decode is bandwidth-bound).
//  * bfloat16, many rows (prefill): blocks of W rows are widened into a per-thread scratch of
//    kBlockRows x in floats and multiplied with sgemm; the widening costs in/2 bytes per
//    row against 2*M*in FLOPs, negligible once M >= 16.

#include <cstddef>  // std::size_t
#include <cstdint>  // std::uint16_t
#include <vector>   // std::vector

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "../core/blas.hpp"
#include "../core/error.hpp"
#include "../core/thread_pool.hpp"
#include "../core/weight.hpp"

namespace hylens::kernels {

namespace detail {

inline float dot_bf16(const float* x, const bf16* w, std::size_t n) noexcept {
    std::size_t i = 0;
    float acc = 0.0f;
#if defined(__AVX512F__)
    __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
    for (; i + 32 <= n; i += 32) {
        const __m256i h0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + i));
        const __m256i h1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + i + 16));
        const __m512 w0 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h0), 16));
        const __m512 w1 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h1), 16));
        a0 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i), w0, a0);
        a1 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 16), w1, a1);
    }
    acc = _mm512_reduce_add_ps(_mm512_add_ps(a0, a1));
#endif
    for (; i < n; ++i) acc += x[i] * to_f32(w[i]);
    return acc;
}

inline float dot_f32(const float* x, const float* w, std::size_t n) noexcept {
    float acc = 0.0f;
    for (std::size_t i = 0; i < n; ++i) acc += x[i] * w[i];
    return acc;
}

}  // namespace detail

/// y[m, o] = alpha * sum_i x[m, i] * W[o, i] (+ bias[o]) for m < M. Row strides ldx, ldy.
/// y must not alias x.
inline void linear(const float* x, std::size_t ldx, std::size_t M, const Weight& W, const float* bias, float* y,
                   std::size_t ldy, float alpha = 1.0f) {
    const std::size_t out = W.rows(), in = W.cols();
    check<ShapeError>(W.rank() == 2, "[linear] weight ", W.name(), " must be 2-D, got ", shape_string(W.shape()));
    check<ShapeError>(ldx >= in && ldy >= out, "[linear] ", W.name(), ": row strides ", ldx, "/", ldy,
                      " too small for [", out, ", ", in, "]");
    if (M == 0) return;
    if (!W.is_bf16()) {
        blas::gemm(false, true, M, out, in, alpha, x, ldx, W.f32(), in, 0.0f, y, ldy);
    } else if (M <= 4) {
        const bf16* w = W.bf16_data();
        parallel_for(
            out,
            [&](std::size_t o0, std::size_t o1) {
                for (std::size_t o = o0; o < o1; ++o)
                    for (std::size_t m = 0; m < M; ++m) y[m * ldy + o] = alpha * detail::dot_bf16(x + m * ldx, w + o * in, in);
            },
            64);
    } else {
        constexpr std::size_t kBlockRows = 64;
        const std::size_t blocks = (out + kBlockRows - 1) / kBlockRows;
        parallel_for(blocks, [&](std::size_t b0, std::size_t b1) {
            thread_local std::vector<float> scratch;
            scratch.resize(kBlockRows * in);
            for (std::size_t b = b0; b < b1; ++b) {
                const std::size_t r0 = b * kBlockRows;
                const std::size_t nr = std::min(kBlockRows, out - r0);
                widen(W.bf16_data() + r0 * in, scratch.data(), nr * in);
                blas::gemm_serial(false, true, M, nr, in, alpha, x, ldx, scratch.data(), in, 0.0f, y + r0, ldy);
            }
        });
    }
    if (bias) {
        for (std::size_t m = 0; m < M; ++m)
            for (std::size_t o = 0; o < out; ++o) y[m * ldy + o] += bias[o];
    }
}

/// One output row o of W times x (used for the unembedding of a single token and for
/// routers): returns sum_i x[i] * W[o, i].
inline float linear_row(const float* x, const Weight& W, std::size_t o) noexcept {
    const std::size_t in = W.cols();
    return W.is_bf16() ? detail::dot_bf16(x, W.bf16_data() + o * in, in) : detail::dot_f32(x, W.f32() + o * in, in);
}

}  // namespace hylens::kernels
