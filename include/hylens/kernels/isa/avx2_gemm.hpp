#pragma once
// The prefill product of the avx2 level (core/simd.hpp): C = alpha A W^T (or C += alpha A W^T)
// over a range of W's rows, A float32 and W float32 or bf16 (widened while it is packed), for
// kernels/linear.hpp and, through kernels/gemm_nt.hpp, the chunked SSD and attention. The
// structure of isa/avx512_gemm.hpp on 8-float vectors:
//   pack_panel  16 rows of W transposed into k-major order: pack[k * 16 + c] = W[n + c, k],
//               8 rows x 8 columns at a time through transpose8
//   gemm_tile   R rows of A times the panel: an R x 16 register tile of sums (tile_sums, 12
//               accumulators at R = 6), one FMA per (row, 8 columns, k), A's element broadcast
//   gemm_rows   panels of W's rows [n0, n1), each times every row tile of A (the loop of
//               isa/gemm_panels.hpp, shared with the avx512 GEMM)
// Each element of C is one register lane summed over k = 0, 1, ..., K - 1 in that order from
// zero, then times alpha (then added to C's value when accumulating): the same arithmetic as
// the avx512 GEMM element for element, so the same bits as it, for any split of W's rows and
// any thread count. Measured on an AVX2-only AMD Zen 3 (docs/performance-log.md, "AVX2 prefill on
// our own GEMM"): at one thread 1.01-1.03x OpenBLAS 0.3.21's sgemm on the projections' shapes
// ([512 x 1024] times [N x 1024]^T, N up to 6,144, and K = 2048; 0.86-0.91x in a noisier
// minute), 1.03-1.12x on small products in a harness, but no faster than sgemm inside the
// chunked SSD; 4 x 16 tiles and a pass over K in blocks of 128 or 256 (the partial sums kept in
// C) were slower.

#include <algorithm>  // std::min
#include <cstddef>    // std::size_t

#include "../../core/bf16.hpp"
#include "../../core/simd.hpp"
#include "avx2.hpp"
#include "gemm_panels.hpp"

namespace hylens::kernels::isa::avx2 {
/// Columns of C (rows of W) per packed panel and rows of A per register tile: 2 x 6 sums, two
/// panel vectors and the broadcast in the 16 registers.
inline constexpr std::size_t kGemmPanel = 16, kGemmTileRows = 6;

/// Floats of the packing scratch gemm_rows needs for an inner dimension K.
inline constexpr std::size_t gemm_pack_floats(std::size_t K) noexcept { return kGemmPanel * K; }
}  // namespace hylens::kernels::isa::avx2

#if HYLENS_SIMD_X86
#include <immintrin.h>

namespace hylens::kernels::isa::avx2 {

/// How far ahead of the 8 columns it transposes pack_panel prefetches each row (elements).
inline constexpr std::size_t kPackAhead = 64;

// An 8 x 8 transpose of floats: r[i] holds row i; afterwards r[j] holds column j. 32-bit then
// 64-bit interleaves within the 128-bit lanes, then the lanes' halves exchanged.
HYLENS_TARGET_AVX2 HYLENS_ALWAYS_INLINE inline void transpose8(__m256* r) noexcept {
    __m256 t[8], s[8];
    for (int i = 0; i < 4; ++i) {
        t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int g = 0; g < 2; ++g) {  // s[4g + j]: word j of each lane, rows 4g .. 4g + 3
        s[4 * g] = _mm256_shuffle_ps(t[4 * g], t[4 * g + 2], 0x44);
        s[4 * g + 1] = _mm256_shuffle_ps(t[4 * g], t[4 * g + 2], 0xEE);
        s[4 * g + 2] = _mm256_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0x44);
        s[4 * g + 3] = _mm256_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0xEE);
    }
    for (int j = 0; j < 4; ++j) {
        r[j] = _mm256_permute2f128_ps(s[j], s[4 + j], 0x20);
        r[4 + j] = _mm256_permute2f128_ps(s[j], s[4 + j], 0x31);
    }
}

/// W rows [n, n + nc) (nc <= 16) of a row-major W (K values a row, row stride ldw)
/// transposed: pack[k * 16 + c] = W[n + c, k] as float32, columns past nc zero.
template <class T>
HYLENS_TARGET_AVX2 inline void pack_panel(const T* W, std::size_t ldw, std::size_t K, std::size_t n, std::size_t nc,
                                          float* pack) noexcept {
    std::size_t k0 = 0;
    if (nc == kGemmPanel)
        for (; k0 + 8 <= K; k0 += 8)
            for (std::size_t c0 = 0; c0 < kGemmPanel; c0 += 8) {
                __m256 r[8];
                for (std::size_t i = 0; i < 8; ++i) {
                    const T* p = W + (n + c0 + i) * ldw + k0;
                    if (k0 + kPackAhead < K) _mm_prefetch(reinterpret_cast<const char*>(p + kPackAhead), _MM_HINT_T0);
                    r[i] = load(p);
                }
                transpose8(r);
                for (std::size_t j = 0; j < 8; ++j) _mm256_storeu_ps(pack + (k0 + j) * kGemmPanel + c0, r[j]);
            }
    for (std::size_t c = 0; c < kGemmPanel; ++c) {
        const T* row = W + (n + c) * ldw;
        for (std::size_t k = k0; k < K; ++k) pack[k * kGemmPanel + c] = c < nc ? widen1(row[k]) : 0.0f;
    }
}

/// Lanes [0, n) of a mask vector (n <= 8) for _mm256_maskload_ps / _mm256_maskstore_ps.
HYLENS_TARGET_AVX2 inline __m256i lane_mask(std::size_t n) noexcept {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/// The sums of a register tile: lane c of acc[r][h] = sum_k A[r, k] * pack[k * 16 + 8 h + c], one
/// FMA a k in order from zero, for R rows of A (row stride lda, each element broadcast) and a
/// packed panel of 16 columns. Shared by gemm_tile (the panel W's rows) and
/// isa/avx2_gemm_packed_a.hpp's gemm_tile_w (the "A" W's rows, the panel A's); always inlined,
/// so acc stays in registers.
template <std::size_t R>
HYLENS_TARGET_AVX2 HYLENS_ALWAYS_INLINE inline void tile_sums(const float* A, std::size_t lda, const float* pack,
                                                              std::size_t K, __m256 (&acc)[R][2]) noexcept {
#pragma GCC unroll 6
    for (std::size_t r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
    for (std::size_t k = 0; k < K; ++k) {
        const __m256 w0 = _mm256_loadu_ps(pack + k * kGemmPanel), w1 = _mm256_loadu_ps(pack + k * kGemmPanel + 8);
#pragma GCC unroll 6
        for (std::size_t r = 0; r < R; ++r) {
            const __m256 a = _mm256_broadcast_ss(A + r * lda + k);
            acc[r][0] = _mm256_fmadd_ps(a, w0, acc[r][0]);
            acc[r][1] = _mm256_fmadd_ps(a, w1, acc[r][1]);
        }
    }
}

/// R rows of A (row stride lda) times the packed panel: C[r, c] = alpha * sum_k A[r, k] *
/// pack[k * 16 + c] for c < nc (masked stores), added to C[r, c] when `accumulate`.
template <std::size_t R>
HYLENS_TARGET_AVX2 inline void gemm_tile(const float* A, std::size_t lda, const float* pack, std::size_t K, float* C,
                                         std::size_t ldc, std::size_t nc, float alpha, bool accumulate) noexcept {
    __m256 acc[R][2];
    tile_sums<R>(A, lda, pack, K, acc);
    // The stores unrolled too: a loop over r that indexes acc would keep it in memory, stored
    // every k (measured: a third of the speed).
    const __m256i m0 = lane_mask(nc < 8 ? nc : 8), m1 = lane_mask(nc > 8 ? nc - 8 : 0);
    const __m256 s = _mm256_set1_ps(alpha);
#pragma GCC unroll 6
    for (std::size_t r = 0; r < R; ++r) {
        float* c = C + r * ldc;
        __m256 v0 = _mm256_mul_ps(acc[r][0], s), v1 = _mm256_mul_ps(acc[r][1], s);
        if (nc == kGemmPanel) {
            if (accumulate) {
                v0 = _mm256_add_ps(_mm256_loadu_ps(c), v0);
                v1 = _mm256_add_ps(_mm256_loadu_ps(c + 8), v1);
            }
            _mm256_storeu_ps(c, v0);
            _mm256_storeu_ps(c + 8, v1);
        } else {
            if (accumulate) {
                v0 = _mm256_add_ps(_mm256_maskload_ps(c, m0), v0);
                v1 = _mm256_add_ps(_mm256_maskload_ps(c + 8, m1), v1);
            }
            _mm256_maskstore_ps(c, m0, v0);
            _mm256_maskstore_ps(c + 8, m1, v1);
        }
    }
}

/// This level's kernel of the shared panel loop (isa/gemm_panels.hpp).
struct Gemm {
    static constexpr std::size_t kPanel = kGemmPanel, kTileRows = kGemmTileRows;
    template <class T>
    HYLENS_TARGET_AVX2 static void pack(const T* W, std::size_t ldw, std::size_t K, std::size_t n, std::size_t nc,
                                    float* p) noexcept {
        pack_panel(W, ldw, K, n, nc, p);
    }
    template <std::size_t R>
    HYLENS_TARGET_AVX2 static void tile(const float* A, std::size_t lda, const float* p, std::size_t K, float* C,
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

}  // namespace hylens::kernels::isa::avx2
#endif
