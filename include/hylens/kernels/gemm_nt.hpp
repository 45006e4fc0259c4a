#pragma once
// Our own GEMM, C = alpha A W^T (or C += alpha A W^T) with W's rows as the columns of C, at the
// levels that have one, and the small single-threaded products inside the prefill kernels (the
// SSD chunks, attention's scores and values, the gated delta rule's chunks) on it or on
// OpenBLAS sgemm:
//   levels avx512, avx512bf16: isa/avx512_gemm.hpp (OpenBLAS 0.3.21 runs its AVX2 kernels on
//                              CPUs it does not know, Zen 4 / 5: half the FMA width)
//   level avx2:                isa/avx2_gemm.hpp (as fast as OpenBLAS's AVX2 kernels on the
//                              projections, no faster inside the chunked SSD, and the same
//                              bits for any thread count)
//   level baseline:            OpenBLAS sgemm.
// linear() at levels avx2 and up multiplies few rows of A (short prompts) with A packed instead
// of W (isa/avx2_gemm_packed_a.hpp, isa/avx512_gemm_packed_a.hpp; detail::packed_a_gemm: the
// rule), the same bits.
// Both GEMMs sum each element of C in one lane in k order from zero, so they give the same
// bits as each other. The caller splits the work over the pool.
// gemm_nn, C = alpha op(A) B + beta C with B row-major (the gated delta rule's chunk products):
// isa/avx2_gemm_nn.hpp where the level has our own GEMM (avx2 and up), else OpenBLAS sgemm.

#include <algorithm>  // std::max
#include <cstddef>    // std::size_t

#include "../core/blas.hpp"
#include "../core/simd.hpp"
#include "isa/avx2_gemm.hpp"
#include "isa/avx2_gemm_nn.hpp"
#include "isa/avx2_gemm_packed_a.hpp"
#include "isa/avx512_gemm.hpp"
#include "isa/avx512_gemm_packed_a.hpp"

namespace hylens::kernels {

namespace detail {
/// Whether the many-row float32 products run on our own GEMM at this level (else OpenBLAS
/// sgemm): levels avx2, avx512 and avx512bf16 on x86-64.
inline bool own_gemm(simd::Level level) noexcept {
    return HYLENS_SIMD_X86 && simd::at_least(level, simd::Level::avx2);
}
/// Rows of W per packed panel of the own GEMM at `level` (the unit a product is split by).
inline std::size_t own_gemm_panel(simd::Level level) noexcept {
    return simd::at_least(level, simd::Level::avx512) ? isa::avx512::kGemmPanel : isa::avx2::kGemmPanel;
}

/// Most rows of A with which linear() packs A instead of W (below), and most rows of padding in
/// the last packed panel: panels of 16 rows of A at level avx2, of 32 at the avx512 levels.
inline constexpr std::size_t kPackedAMaxRows = 128, kPackedAMaxPadRows = 11, kPackedAMaxPadRows512 = 8;

/// Whether linear()'s product of M rows of A with a float32 W of N rows packs A
/// (isa/avx2_gemm_packed_a.hpp, isa/avx512_gemm_packed_a.hpp) rather than W (the own GEMM): at
/// levels avx2 and up, W float32, M <= kPackedAMaxRows, N >= 2 M, and at most kPackedAMaxPadRows
/// rows of padding in the last panel of 16 rows of A (level avx2), kPackedAMaxPadRows512 in the
/// last panel of 32 (the avx512 levels). Packing W reads all of it from memory once a product,
/// about as long as 11 rows of A take in the avx2 tiles (K = 1,024), which dominates at few rows;
/// packing A costs the padding of its last panel, and from ~150 rows on reading W once per block
/// of panels costs as much as packing it. A bf16 W is packed as before: its pack reads half the
/// bytes, and widening the rows of W for the A-packed tiles measured 0.75-1.14x at 8-48 rows
/// (avx2). Measured at one thread, W from memory, on a Zen 3 (avx2) and an Intel Xeon with
/// AVX-512 (docs/performance-log.md, "Short prompts: the product with A packed" and "... at the
/// avx512 levels"). The two give the same bits, so the rule changes only the speed.
inline bool packed_a_gemm(simd::Level level, std::size_t M, std::size_t N, bool bf16_w) noexcept {
    if (!HYLENS_SIMD_X86 || bf16_w || M > kPackedAMaxRows || N < 2 * M) return false;
    const auto padding = [M](std::size_t panel) { return (M + panel - 1) / panel * panel - M; };
    if (simd::at_least(level, simd::Level::avx512)) return padding(isa::avx512::kPackedARows) <= kPackedAMaxPadRows512;
    return level == simd::Level::avx2 && padding(isa::avx2::kPackedARows) <= kPackedAMaxPadRows;
}

/// gemm_rows of the own GEMM at `level` (own_gemm(level) must hold): rows [n0, n1) of W.
template <class T>
inline void own_gemm_rows(simd::Level level, const float* A, std::size_t lda, std::size_t M, const T* W,
                          std::size_t ldw, std::size_t K, std::size_t n0, std::size_t n1, float* C, std::size_t ldc,
                          float alpha, float* pack, bool accumulate = false) {
#if HYLENS_SIMD_X86
    if (simd::at_least(level, simd::Level::avx512))
        isa::avx512::gemm_rows(A, lda, M, W, ldw, K, n0, n1, C, ldc, alpha, pack, accumulate);
    else
        isa::avx2::gemm_rows(A, lda, M, W, ldw, K, n0, n1, C, ldc, alpha, pack, accumulate);
#else
    (void)level, (void)A, (void)lda, (void)M, (void)W, (void)ldw, (void)K, (void)n0, (void)n1, (void)C, (void)ldc,
        (void)alpha, (void)pack, (void)accumulate;
#endif
}
}  // namespace detail

/// Floats of the scratch gemm_nt and the own GEMMs need for an inner dimension K (the wider
/// panel's).
inline constexpr std::size_t gemm_nt_pack_floats(std::size_t K) noexcept {
    return std::max(isa::avx512::gemm_pack_floats(K), isa::avx2::gemm_pack_floats(K));
}

/// C[m, n] = alpha * sum_k A[m, k] * W[n, k] for m < M, n < cols, k < K, added to C[m, n] when
/// `accumulate`: A, W, C row-major with row strides lda, ldw, ldc, at the instruction-set level
/// the caller dispatches at (own GEMM where detail::own_gemm(level), else sgemm); pack:
/// gemm_nt_pack_floats(K) floats (unused by sgemm).
inline void gemm_nt(simd::Level level, std::size_t M, std::size_t cols, std::size_t K, float alpha, const float* A,
                    std::size_t lda, const float* W, std::size_t ldw, float* C, std::size_t ldc, bool accumulate,
                    float* pack) {
    if (M == 0 || cols == 0) return;
    if (detail::own_gemm(level))
        return detail::own_gemm_rows(level, A, lda, M, W, ldw, K, 0, cols, C, ldc, alpha, pack, accumulate);
    blas::gemm_serial(false, true, M, cols, K, alpha, A, lda, W, ldw, accumulate ? 1.0f : 0.0f, C, ldc);
}

/// C = alpha op(A) B + beta C (C not read when beta is zero): op(A) M x K (A row-major, M x K
/// with row stride lda, or K x M when trans_a), B row-major K x N (row stride ldb), C row-major
/// M x N (row stride ldc), at the level the caller dispatches at: our own kernel where
/// detail::own_gemm(level) (each element the FMA chain over k from zero, then alpha times it plus
/// beta times C), else sgemm. Single-threaded.
inline void gemm_nn([[maybe_unused]] simd::Level level, bool trans_a, std::size_t M, std::size_t N, std::size_t K,
                    float alpha, const float* A, std::size_t lda, const float* B, std::size_t ldb, float beta,
                    float* C, std::size_t ldc) {
    if (M == 0 || N == 0) return;
#if HYLENS_SIMD_X86
    if (detail::own_gemm(level)) {
        if (trans_a)
            isa::avx2::gemm_nn<true>(M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        else
            isa::avx2::gemm_nn<false>(M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
#endif
    blas::gemm_serial(trans_a, false, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

}  // namespace hylens::kernels
