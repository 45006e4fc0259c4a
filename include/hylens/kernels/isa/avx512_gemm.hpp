#pragma once
// The prefill product of the avx512 level (core/simd.hpp): C = alpha A W^T (or C += alpha A W^T)
// over a range of W's rows, A float32 and W float32 or bf16 (widened while it is packed), for
// kernels/linear.hpp and, through kernels/gemm_nt.hpp, the chunked SSD and attention.
// OpenBLAS's sgemm (the other levels' path) runs its AVX2 kernels on CPUs it does not know,
// which halves the FMA width of an AVX-512 core (docs/performance.md, "F32 prefill").
//   pack_panel  32 rows of W transposed into k-major order: pack[k * 32 + c] = W[n + c, k],
//               16 rows x 16 columns at a time through avx512::transpose16
//   tile        R rows of A times the panel: an R x 32 register tile of sums, one FMA per
//               (row, 16 columns, k), A's element broadcast
//   gemm_rows   panels of W's rows [n0, n1), each times every row tile of A (the loop of
//               isa/gemm_panels.hpp, shared with the avx2 GEMM)
// Each element of C is one register lane summed over k = 0, 1, ..., K - 1 in that order from
// zero, then times alpha (then added to C's value when accumulating), whatever the range, the
// tile and the thread: the same bits for any split of W's rows. Same rule as isa/avx512.hpp:
// only masked or zero-masked intrinsic forms.

#include <algorithm>  // std::min
#include <cstddef>    // std::size_t

#include "../../core/bf16.hpp"
#include "../../core/simd.hpp"
#include "avx512.hpp"
#include "gemm_panels.hpp"

namespace hylens::kernels::isa::avx512 {
/// Columns of C (rows of W) per packed panel and rows of A per register tile: 2 x 12 sums, two
/// panel vectors and the broadcasts. Measured at 1 thread on a Zen 5 core ([512 x 1024] times
/// [3584 x 1024]^T and three other projection shapes): 8, 12 and 14 rows gave 165-172, 165-172
/// and 150-170 GFLOP/s, OpenBLAS 0.3.21's sgemm 91-94.
inline constexpr std::size_t kGemmPanel = 32, kGemmTileRows = 12;

/// Floats of the packing scratch gemm_rows needs for an inner dimension K.
inline constexpr std::size_t gemm_pack_floats(std::size_t K) noexcept { return kGemmPanel * K; }

}  // namespace hylens::kernels::isa::avx512

#if HYLENS_SIMD_X86
#include <immintrin.h>

namespace hylens::kernels::isa::avx512 {

/// How far ahead of the 16 columns it transposes pack_panel prefetches each row (elements).
inline constexpr std::size_t kPackAhead = 64;

inline float widen_one(float v) noexcept { return v; }
inline float widen_one(bf16 v) noexcept { return to_f32(v); }

/// W rows [n, n + nc) (nc <= 32) of a row-major W (K values a row, row stride ldw)
/// transposed: pack[k * 32 + c] = W[n + c, k] as float32, columns past nc zero.
template <class T>
HYLENS_TARGET_AVX512 inline void pack_panel(const T* W, std::size_t ldw, std::size_t K, std::size_t n,
                                            std::size_t nc, float* pack) noexcept {
    std::size_t k0 = 0;
    if (nc == kGemmPanel)
        for (; k0 + 16 <= K; k0 += 16)
            for (std::size_t c0 = 0; c0 < kGemmPanel; c0 += 16) {
                __m512i r[16];
                for (std::size_t i = 0; i < 16; ++i) {
                    const T* p = W + (n + c0 + i) * ldw + k0;
                    if (k0 + kPackAhead < K) _mm_prefetch(reinterpret_cast<const char*>(p + kPackAhead), _MM_HINT_T0);
                    r[i] = _mm512_castps_si512(load(p));
                }
                transpose16(r);
                for (std::size_t j = 0; j < 16; ++j)
                    _mm512_storeu_ps(pack + (k0 + j) * kGemmPanel + c0, _mm512_castsi512_ps(r[j]));
            }
    for (std::size_t c = 0; c < kGemmPanel; ++c) {
        const T* row = W + (n + c) * ldw;
        for (std::size_t k = k0; k < K; ++k) pack[k * kGemmPanel + c] = c < nc ? widen_one(row[k]) : 0.0f;
    }
}

/// The sums of an R x 32 register tile: acc[r][h] lane c = sum_k B[r * ldb + k] * pack[k * 32 +
/// 16 h + c], one FMA chain over k from zero, B's element broadcast against the panel's two
/// vectors. The W-packed tile (B = A's rows) and the A-packed one (B = W's rows,
/// isa/avx512_gemm_packed_a.hpp) share it: a product of two floats does not depend on their
/// order, so the two give the same bits.
template <std::size_t R>
HYLENS_TARGET_AVX512 HYLENS_ALWAYS_INLINE inline void tile_sums(const float* B, std::size_t ldb, const float* pack,
                                                                std::size_t K, __m512 (&acc)[R][2]) noexcept {
#pragma GCC unroll 12
    for (std::size_t r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
    for (std::size_t k = 0; k < K; ++k) {
        const __m512 w0 = _mm512_loadu_ps(pack + k * kGemmPanel), w1 = _mm512_loadu_ps(pack + k * kGemmPanel + 16);
#pragma GCC unroll 12
        for (std::size_t r = 0; r < R; ++r) {
            const __m512 b = _mm512_set1_ps(B[r * ldb + k]);
            acc[r][0] = _mm512_fmadd_ps(b, w0, acc[r][0]);
            acc[r][1] = _mm512_fmadd_ps(b, w1, acc[r][1]);
        }
    }
}

/// R rows of A (row stride lda) times the packed panel: C[r, c] = alpha * sum_k A[r, k] *
/// pack[k * 32 + c] for c < nc (masked stores), added to C[r, c] when `accumulate`.
template <std::size_t R>
HYLENS_TARGET_AVX512 inline void gemm_tile(const float* A, std::size_t lda, const float* pack, std::size_t K,
                                           float* C, std::size_t ldc, std::size_t nc, float alpha,
                                           bool accumulate) noexcept {
    __m512 acc[R][2];
    tile_sums<R>(A, lda, pack, K, acc);
    store_tile<R>(acc, C, ldc, nc, alpha, accumulate);
}

/// This level's kernel of the shared panel loop (isa/gemm_panels.hpp).
struct Gemm {
    static constexpr std::size_t kPanel = kGemmPanel, kTileRows = kGemmTileRows;
    template <class T>
    HYLENS_TARGET_AVX512 static void pack(const T* W, std::size_t ldw, std::size_t K, std::size_t n, std::size_t nc,
                                    float* p) noexcept {
        pack_panel(W, ldw, K, n, nc, p);
    }
    template <std::size_t R>
    HYLENS_TARGET_AVX512 static void tile(const float* A, std::size_t lda, const float* p, std::size_t K, float* C,
                                    std::size_t ldc, std::size_t nc, float alpha, bool accumulate) noexcept {
        gemm_tile<R>(A, lda, p, K, C, ldc, nc, alpha, accumulate);
    }
};

/// C[m, n] = alpha * sum_k A[m, k] * W[n, k] for m < M and n in [n0, n1) (C[m, n] + that sum
/// times alpha when `accumulate`): A float32 with row stride lda, W float32 or bf16 row-major
/// with row stride ldw, pack a scratch of gemm_pack_floats(K).
template <class T>
inline void gemm_rows(const float* A, std::size_t lda, std::size_t M, const T* W, std::size_t ldw, std::size_t K,
                      std::size_t n0, std::size_t n1, float* C, std::size_t ldc, float alpha, float* pack,
                      bool accumulate = false) noexcept {
    gemm_panels<Gemm>(A, lda, M, W, ldw, K, n0, n1, C, ldc, alpha, pack, accumulate);
}

}  // namespace hylens::kernels::isa::avx512
#endif
