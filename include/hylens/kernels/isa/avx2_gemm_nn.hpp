#pragma once
// The avx2 level's small products with B in its own row-major layout, C = alpha op(A) B + beta C
// (op(A) = A or A^T): the gated delta rule's chunk products (kernels/gated_delta.hpp, through
// kernels/gemm_nt.hpp's gemm_nn), which were OpenBLAS sgemm calls of 32 x 128 x 32 to
// 128 x 128 x 32. B's row k holds the 16 columns a tile needs side by side, so B is read in
// place, not packed: a tile of R rows of op(A) times 16 columns of B sums, for each k, op(A)'s
// element broadcast times B[k, n .. n + 15] (two 8-float loads, masked at the right edge) into
// 2R accumulators (R = 6: twelve, as in isa/avx2_gemm.hpp's tile). Each element of C is one
// register lane summed over k = 0 .. K - 1 in that order from zero, then alpha times it plus
// beta times C (C not read when beta is zero, as in BLAS).

#include <algorithm>  // std::min
#include <cstddef>    // std::size_t

#include "../../core/simd.hpp"
#include "avx2_gemm.hpp"    // kGemmPanel, kGemmTileRows, lane_mask
#include "gemm_panels.hpp"  // with_tile_rows

#if HYLENS_SIMD_X86
#include <immintrin.h>

namespace hylens::kernels::isa::avx2 {

/// R rows of op(A) times columns [0, nc) (nc <= 16) of B (K rows, row stride ldb):
/// C[r, c] = alpha * sum_k op(A)[r, k] * B[k, c] + beta * C[r, c], where op(A)[r, k] is
/// A[r * lda + k], or A[k * lda + r] when TransA.
template <std::size_t R, bool TransA>
HYLENS_TARGET_AVX2 inline void gemm_nn_tile(const float* A, std::size_t lda, const float* B, std::size_t ldb,
                                            std::size_t K, float* C, std::size_t ldc, std::size_t nc, float alpha,
                                            float beta) noexcept {
    __m256 acc[R][2];
#pragma GCC unroll 6
    for (std::size_t r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
    const __m256i m0 = lane_mask(nc < 8 ? nc : 8), m1 = lane_mask(nc > 8 ? nc - 8 : 0);
    const bool full = nc == kGemmPanel;
    for (std::size_t k = 0; k < K; ++k) {
        const float* b = B + k * ldb;
        const __m256 w0 = full ? _mm256_loadu_ps(b) : _mm256_maskload_ps(b, m0);
        const __m256 w1 = full ? _mm256_loadu_ps(b + 8) : _mm256_maskload_ps(b + 8, m1);
#pragma GCC unroll 6
        for (std::size_t r = 0; r < R; ++r) {
            const __m256 a = _mm256_broadcast_ss(TransA ? A + k * lda + r : A + r * lda + k);
            acc[r][0] = _mm256_fmadd_ps(a, w0, acc[r][0]);
            acc[r][1] = _mm256_fmadd_ps(a, w1, acc[r][1]);
        }
    }
    const __m256 s = _mm256_set1_ps(alpha), t = _mm256_set1_ps(beta);
#pragma GCC unroll 6
    for (std::size_t r = 0; r < R; ++r) {  // unrolled: acc stays in registers (isa/avx2_gemm.hpp)
        float* c = C + r * ldc;
        __m256 v0 = _mm256_mul_ps(acc[r][0], s), v1 = _mm256_mul_ps(acc[r][1], s);
        if (beta != 0.0f) {
            v0 = _mm256_add_ps(v0, _mm256_mul_ps(t, full ? _mm256_loadu_ps(c) : _mm256_maskload_ps(c, m0)));
            v1 = _mm256_add_ps(v1, _mm256_mul_ps(t, full ? _mm256_loadu_ps(c + 8) : _mm256_maskload_ps(c + 8, m1)));
        }
        if (full) {
            _mm256_storeu_ps(c, v0);
            _mm256_storeu_ps(c + 8, v1);
        } else {
            _mm256_maskstore_ps(c, m0, v0);
            _mm256_maskstore_ps(c + 8, m1, v1);
        }
    }
}

/// C = alpha op(A) B + beta C for an M x K op(A) (A row-major with row stride lda: M x K, or
/// K x M when TransA), a row-major K x N B (row stride ldb) and a row-major M x N C (row
/// stride ldc); C is not read when beta is zero. Single-threaded.
template <bool TransA>
HYLENS_TARGET_AVX2 inline void gemm_nn(std::size_t M, std::size_t N, std::size_t K, float alpha, const float* A,
                                       std::size_t lda, const float* B, std::size_t ldb, float beta, float* C,
                                       std::size_t ldc) noexcept {
    constexpr std::size_t R = kGemmTileRows;
    for (std::size_t n = 0; n < N; n += kGemmPanel) {
        const std::size_t nc = std::min(kGemmPanel, N - n);
        std::size_t m = 0;
        for (; m + R <= M; m += R)
            gemm_nn_tile<R, TransA>(TransA ? A + m : A + m * lda, lda, B + n, ldb, K, C + m * ldc + n, ldc, nc, alpha,
                                    beta);
        if (m < M)
            with_tile_rows<R - 1>(M - m, [&](auto rows) {
                gemm_nn_tile<decltype(rows)::value, TransA>(TransA ? A + m : A + m * lda, lda, B + n, ldb, K,
                                                            C + m * ldc + n, ldc, nc, alpha, beta);
            });
    }
}

}  // namespace hylens::kernels::isa::avx2
#endif
