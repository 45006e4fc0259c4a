#pragma once
// The avx512 levels' product for few rows of A (short prompts), C = alpha A W^T over a range of
// W's rows, W float32, with A packed instead of W (the counterpart of isa/avx2_gemm_packed_a.hpp):
//   PackedA::pack  32 rows of A a panel, transposed into k-major order (isa/avx512_gemm.hpp's
//                  pack_panel), once per product for all of W
//   gemm_tile_w    R <= 12 rows of W times a packed panel of 32 rows of A: the W-packed tile's
//                  sums (isa/avx512_gemm.hpp's tile_sums, 24 accumulators at R = 12) with the
//                  roles swapped, W's element broadcast; the tile transposed in registers
//                  (transpose16) as it is stored
//   PackedA::rows  for each block of panels that fits in L2, every group of 12 rows of W (read
//                  in place) times each panel of the block (the loop of isa/gemm_packed_a.hpp)
// Each element of C is one register lane summed over k = 0, 1, ..., K - 1 in that order from zero,
// then times alpha: the arithmetic of isa/avx512_gemm.hpp's tile, so the same bits as the W-packed
// GEMM for any split of W's rows. Measured on an Intel Xeon (AVX-512), one thread, W evicted from
// the caches before each product (docs/performance-log.md, "Short prompts at the avx512 levels"):
// 1.17-1.88x the W-packed GEMM's speed at M = 24, 32 and 64, 1.01-1.26x at 96-128; a last panel of
// 16 or more rows of padding gains unevenly (M = 48: 0.94-1.11x). kernels/gemm_nt.hpp holds the
// rule.

#include <algorithm>  // std::min
#include <cstddef>    // std::size_t

#include "../../core/simd.hpp"
#include "avx512_gemm.hpp"
#include "gemm_packed_a.hpp"

namespace hylens::kernels::isa::avx512 {
/// Rows of A per packed panel (the W-packed GEMM's panel width), rows of W per register tile.
inline constexpr std::size_t kPackedARows = kGemmPanel, kPackedAWRows = kGemmTileRows;
/// Bytes of packed panels a block keeps in L2 while every row group of W passes over them.
inline constexpr std::size_t kPackedABlockBytes = 256 * 1024;
}  // namespace hylens::kernels::isa::avx512

#if HYLENS_SIMD_X86
#include <immintrin.h>

namespace hylens::kernels::isa::avx512 {

/// R rows of W (row stride ldw, float32) times the packed panel ap of 32 rows of A:
/// C[i, r] = alpha * sum_k ap[k * 32 + i] * W[r, k] for i < mc (rows of C, stride ldc), r < R.
template <std::size_t R>
HYLENS_TARGET_AVX512 inline void gemm_tile_w(const float* W, std::size_t ldw, const float* ap, std::size_t K,
                                             float* C, std::size_t ldc, std::size_t mc, float alpha) noexcept {
    __m512 acc[R][2];
    tile_sums<R>(W, ldw, ap, K, acc);  // W's element broadcast, the panel of A's rows loaded
    // Rows 16 h .. 16 h + 15 of the tile: the R sums of each (zeros to 16) transposed, then R
    // lanes stored a row. Every loop over acc unrolled (an indexed acc would live in memory).
    const __m512 s = _mm512_set1_ps(alpha);
    const __mmask16 mask = tail_mask(R);
#pragma GCC unroll 2
    for (std::size_t h = 0; h < 2; ++h) {
        __m512i v[16];
#pragma GCC unroll 16
        for (std::size_t j = 0; j < 16; ++j) v[j] = _mm512_setzero_si512();
#pragma GCC unroll 12
        for (std::size_t r = 0; r < R; ++r) v[r] = _mm512_castps_si512(_mm512_mul_ps(acc[r][h], s));
        transpose16(v);
        const std::size_t rows = mc > 16 * h ? std::min<std::size_t>(16, mc - 16 * h) : 0;
        for (std::size_t i = 0; i < rows; ++i)
            _mm512_mask_storeu_ps(C + (16 * h + i) * ldc, mask, _mm512_castsi512_ps(v[i]));
    }
}

/// This level's kernel of the shared A-packed loop (isa/gemm_packed_a.hpp).
struct PackedATile {
    static constexpr std::size_t kARows = kPackedARows, kWRows = kPackedAWRows, kBlockBytes = kPackedABlockBytes;
    static void pack_panel(const float* A, std::size_t lda, std::size_t K, std::size_t m0, std::size_t mc,
                           float* pack) noexcept {
        avx512::pack_panel(A, lda, K, m0, mc, pack);
    }
    template <std::size_t R>
    static void tile(const float* W, std::size_t ldw, const float* ap, std::size_t K, float* C, std::size_t ldc,
                     std::size_t mc, float alpha) noexcept {
        gemm_tile_w<R>(W, ldw, ap, K, C, ldc, mc, alpha);
    }
};
/// This level's A-packed product (kernels/linear.hpp's for few rows).
using PackedA = isa::PackedA<PackedATile>;

}  // namespace hylens::kernels::isa::avx512
#endif
