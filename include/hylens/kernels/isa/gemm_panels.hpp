#pragma once
// The loop of our own float32 GEMMs (isa/avx2_gemm.hpp, isa/avx512_gemm.hpp), written once:
// C = alpha A W^T (or C += alpha A W^T) over W's rows [n0, n1), one panel of Kernel::kPanel
// rows at a time, packed once and multiplied by every tile of Kernel::kTileRows rows of A, then
// by one tile of the rows left. A Kernel supplies, compiled for its instruction set:
//   static constexpr std::size_t kPanel, kTileRows;
//   template <class T> static void pack(const T* W, std::size_t ldw, std::size_t K,
//                                       std::size_t n, std::size_t nc, float* pack);
//   template <std::size_t R> static void tile(const float* A, std::size_t lda, const float* pack,
//                                             std::size_t K, float* C, std::size_t ldc,
//                                             std::size_t nc, float alpha, bool accumulate);
// The loop itself carries no instruction-set attribute, so each panel and tile is a call, one
// per R x kPanel x K products (not timed apart; the models' prefill at avx2 ran within the
// noise of the inlined loop it replaced).

#include <algorithm>    // std::min
#include <cstddef>      // std::size_t
#include <type_traits>  // std::integral_constant

namespace hylens::kernels::isa {

/// Calls tile(std::integral_constant<std::size_t, R>{}) with R == rows, for 0 < rows <= Max: the
/// row tile of a GEMM's rows left over, its row count a template argument.
template <std::size_t Max, class Tile>
inline void with_tile_rows(std::size_t rows, Tile&& tile) noexcept {
    if constexpr (Max > 0) {
        if (rows == Max) return tile(std::integral_constant<std::size_t, Max>{});
        with_tile_rows<Max - 1>(rows, tile);
    }
}

/// C[m, n] = alpha * sum_k A[m, k] * W[n, k] for m < M and n in [n0, n1) (C[m, n] + that sum
/// times alpha when `accumulate`): A float32 with row stride lda, W float32 or bf16 row-major
/// with row stride ldw, pack a scratch of Kernel::kPanel * K floats.
template <class Kernel, class T>
inline void gemm_panels(const float* A, std::size_t lda, std::size_t M, const T* W, std::size_t ldw, std::size_t K,
                        std::size_t n0, std::size_t n1, float* C, std::size_t ldc, float alpha, float* pack,
                        bool accumulate) noexcept {
    constexpr std::size_t P = Kernel::kPanel, R = Kernel::kTileRows;
    for (std::size_t n = n0; n < n1; n += P) {
        const std::size_t nc = std::min(P, n1 - n);
        Kernel::pack(W, ldw, K, n, nc, pack);
        std::size_t m = 0;
        for (; m + R <= M; m += R)
            Kernel::template tile<R>(A + m * lda, lda, pack, K, C + m * ldc + n, ldc, nc, alpha, accumulate);
        if (m < M)
            with_tile_rows<R - 1>(M - m, [&](auto rows) {
                Kernel::template tile<decltype(rows)::value>(A + m * lda, lda, pack, K, C + m * ldc + n, ldc, nc, alpha,
                                                             accumulate);
            });
    }
}

}  // namespace hylens::kernels::isa
