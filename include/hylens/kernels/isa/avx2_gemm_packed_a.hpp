#pragma once
// The avx2 level's product for few rows of A (short prompts), C = alpha A W^T over a range of
// W's rows, W float32, with A packed instead of W:
//   PackedA::pack  16 rows of A a panel, transposed into k-major order (isa/avx2_gemm.hpp's
//                  pack_panel), once per product for all of W (A is M x K, W is N x K: the
//                  W-packed GEMM reads and packs N x K, all of W, once per product)
//   gemm_tile_w    R <= 6 rows of W times a packed panel of 16 rows of A: the W-packed tile's
//                  sums (isa/avx2_gemm.hpp's tile_sums, 12 accumulators at R = 6) with the roles
//                  swapped, W's element broadcast; the tile transposed in registers as it is
//                  stored
//   PackedA::rows  for each block of panels that fits in L2, every group of 6 rows of W (read
//                  in place) times each panel of the block (the loop of isa/gemm_packed_a.hpp)
// Each element of C is one register lane summed over k = 0, 1, ..., K - 1 in that order from
// zero, then times alpha: the arithmetic of isa/avx2_gemm.hpp, so the same bits as it (and as
// the avx512 GEMM) for any split of W's rows. Measured on an AVX2-only AMD Zen 3, one thread,
// W evicted from the caches before each product (docs/performance-log.md, "Short prompts: the
// product with A packed"): 1.5-1.9x the W-packed GEMM's speed at M = 8-16, 1.1-1.5x at 32-64,
// 1.02-1.08x at 128, 0.93-1.02x at 144-192, 0.95-0.99x at 512 (W read from memory once per
// block of panels); slower when W has fewer rows than 2 M (N = 64, M = 64: 0.93x) or when the
// last panel is mostly padding (M = 180: 0.96x). kernels/gemm_nt.hpp holds the rule.

#include <algorithm>  // std::min
#include <cstddef>    // std::size_t

#include "../../core/simd.hpp"
#include "avx2_gemm.hpp"
#include "gemm_packed_a.hpp"

namespace hylens::kernels::isa::avx2 {
/// Rows of A per packed panel, rows of W per register tile.
inline constexpr std::size_t kPackedARows = 16, kPackedAWRows = 6;
/// Bytes of packed panels a block keeps in L2 while every row group of W passes over them
/// (half of a Zen 3 core's 512 KiB L2).
inline constexpr std::size_t kPackedABlockBytes = 256 * 1024;
}  // namespace hylens::kernels::isa::avx2

#if HYLENS_SIMD_X86
#include <immintrin.h>

namespace hylens::kernels::isa::avx2 {

/// R rows of W (row stride ldw, float32) times the packed panel ap of 16 rows of A:
/// C[i, r] = alpha * sum_k ap[k * 16 + i] * W[r, k] for i < mc (rows of C, stride ldc), r < R.
template <std::size_t R>
HYLENS_TARGET_AVX2 inline void gemm_tile_w(const float* W, std::size_t ldw, const float* ap, std::size_t K, float* C,
                                           std::size_t ldc, std::size_t mc, float alpha) noexcept {
    static_assert(kPackedARows == kGemmPanel, "the packed A's panels are tile_sums' panels");
    __m256 acc[R][2];
    tile_sums<R>(W, ldw, ap, K, acc);  // W's element broadcast, the panel of A's rows loaded
    // Rows 8 h .. 8 h + 7 of the tile: the R sums of each (with zeros to 8) transposed, then R
    // lanes stored a row. Every loop over acc unrolled: an indexed acc would live in memory,
    // stored every k (a third of the speed, as in gemm_tile).
    const __m256 s = _mm256_set1_ps(alpha);
    const __m256i mask = lane_mask(R);
#pragma GCC unroll 2
    for (std::size_t h = 0; h < 2; ++h) {
        __m256 v[8];
#pragma GCC unroll 8
        for (std::size_t j = 0; j < 8; ++j) v[j] = _mm256_setzero_ps();
#pragma GCC unroll 6
        for (std::size_t r = 0; r < R; ++r) v[r] = _mm256_mul_ps(acc[r][h], s);
        transpose8(v);
        const std::size_t rows = mc > 8 * h ? std::min<std::size_t>(8, mc - 8 * h) : 0;
        for (std::size_t i = 0; i < rows; ++i) _mm256_maskstore_ps(C + (8 * h + i) * ldc, mask, v[i]);
    }
}

/// This level's kernel of the shared A-packed loop (isa/gemm_packed_a.hpp).
struct PackedATile {
    static constexpr std::size_t kARows = kPackedARows, kWRows = kPackedAWRows, kBlockBytes = kPackedABlockBytes;
    static void pack_panel(const float* A, std::size_t lda, std::size_t K, std::size_t m0, std::size_t mc,
                           float* pack) noexcept {
        avx2::pack_panel(A, lda, K, m0, mc, pack);
    }
    template <std::size_t R>
    static void tile(const float* W, std::size_t ldw, const float* ap, std::size_t K, float* C, std::size_t ldc,
                     std::size_t mc, float alpha) noexcept {
        gemm_tile_w<R>(W, ldw, ap, K, C, ldc, mc, alpha);
    }
};
/// This level's A-packed product (kernels/linear.hpp's for few rows).
using PackedA = isa::PackedA<PackedATile>;

}  // namespace hylens::kernels::isa::avx2
#endif
