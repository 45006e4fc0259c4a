#pragma once
// The product with A packed of our own float32 GEMMs (isa/avx2_gemm_packed_a.hpp,
// isa/avx512_gemm_packed_a.hpp), written once: C = alpha A W^T over a range of W's rows for few
// rows of A (short prompts), A packed into k-major panels of Kernel::kARows rows once a product,
// W float32 read in place. A Kernel supplies, compiled for its instruction set:
//   static constexpr std::size_t kARows, kWRows, kBlockBytes;
//   static void pack_panel(const float* A, std::size_t lda, std::size_t K, std::size_t m0,
//                          std::size_t mc, float* pack);   // the W-packed GEMM's pack_panel
//   template <std::size_t R> static void tile(const float* W, std::size_t ldw, const float* ap,
//                                             std::size_t K, float* C, std::size_t ldc,
//                                             std::size_t mc, float alpha);
// (tile: R <= kWRows rows of W times the packed panel ap, C[i, r] for i < mc). For each block of
// panels that fits in kBlockBytes (they stay in L2 while W passes), every group of kWRows rows
// of W times each panel of the block: W is read from memory once a block. The rows of C a
// panel covers and the columns a group covers are each computed by one tile, so the bits do not
// depend on the split of W's rows.

#include <algorithm>  // std::min, std::max
#include <cstddef>    // std::size_t

#include "gemm_panels.hpp"  // with_tile_rows

namespace hylens::kernels::isa {

template <class Kernel>
struct PackedA {
    static constexpr std::size_t kARows = Kernel::kARows, kWRows = Kernel::kWRows;

    /// Panels of the packed A of M rows (the last padded with zero rows).
    static constexpr std::size_t panels(std::size_t M) noexcept { return (M + kARows - 1) / kARows; }
    /// Floats of the packed A of M rows and K columns.
    static constexpr std::size_t floats(std::size_t M, std::size_t K) noexcept { return panels(M) * kARows * K; }

    /// Panels [p0, p1) of the packed A of M rows (row stride lda, K values a row): panel p holds
    /// rows [P p, P p + P) as pack[k * P + r] = A[P p + r, k] (P = kARows), rows past M zero.
    static void pack(const float* A, std::size_t lda, std::size_t M, std::size_t K, std::size_t p0, std::size_t p1,
                     float* packed) noexcept {
        for (std::size_t p = p0; p < p1; ++p) {
            const std::size_t m0 = p * kARows;
            Kernel::pack_panel(A, lda, K, m0, std::min(kARows, M - m0), packed + m0 * K);
        }
    }

    /// C[m, n] = alpha * sum_k A[m, k] * W[n, k] for m < M and n in [n0, n1): A as packed by
    /// pack (every panel of its M rows), W float32 row-major with row stride ldw, C row-major
    /// with row stride ldc.
    static void rows(const float* packed, std::size_t M, std::size_t K, const float* W, std::size_t ldw,
                     std::size_t n0, std::size_t n1, float* C, std::size_t ldc, float alpha) noexcept {
        constexpr std::size_t P = kARows, G = kWRows;
        const std::size_t n_panels = panels(M);
        const std::size_t panel_bytes = std::max<std::size_t>(1, P * K * sizeof(float));
        const std::size_t block = std::max<std::size_t>(1, Kernel::kBlockBytes / panel_bytes);
        for (std::size_t b0 = 0; b0 < n_panels; b0 += block) {
            const std::size_t b1 = std::min(n_panels, b0 + block);
            for (std::size_t n = n0; n < n1; n += G) {
                const std::size_t R = std::min(G, n1 - n);
                for (std::size_t p = b0; p < b1; ++p) {
                    const std::size_t mc = std::min(P, M - p * P);
                    const float* ap = packed + p * P * K;
                    float* c = C + p * P * ldc + n;
                    with_tile_rows<G>(R, [&](auto r) {
                        Kernel::template tile<decltype(r)::value>(W + n * ldw, ldw, ap, K, c, ldc, mc, alpha);
                    });
                }
            }
        }
    }
};

}  // namespace hylens::kernels::isa
