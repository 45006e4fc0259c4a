#pragma once
// The small single-threaded products inside the prefill kernels (the SSD chunks, attention's
// scores and values): C = alpha A W^T, or C += alpha A W^T, with W's rows as the columns of C.
// At levels avx512 and avx512bf16 on our own AVX-512 GEMM (isa/avx512_gemm.hpp): OpenBLAS 0.3.21
// runs its AVX2 kernels on CPUs it does not know (Zen 4 / 5), half the FMA width; at the other
// levels on OpenBLAS sgemm. The caller splits the work over the pool.

#include <cstddef>  // std::size_t

#include "../core/blas.hpp"
#include "../core/simd.hpp"
#include "isa/avx512_gemm.hpp"

namespace hylens::kernels {

/// Floats of the scratch gemm_nt needs for an inner dimension K.
inline constexpr std::size_t gemm_nt_pack_floats(std::size_t K) noexcept { return isa::avx512::gemm_pack_floats(K); }

/// C[m, n] = alpha * sum_k A[m, k] * W[n, k] for m < M, n < cols, k < K, added to C[m, n] when
/// `accumulate`: A, W, C row-major with row strides lda, ldw, ldc. own: detail::own_gemm(level)
/// of the level the caller dispatches at; pack: gemm_nt_pack_floats(K) floats (unused by sgemm).
inline void gemm_nt(bool own, std::size_t M, std::size_t cols, std::size_t K, float alpha, const float* A,
                    std::size_t lda, const float* W, std::size_t ldw, float* C, std::size_t ldc, bool accumulate,
                    float* pack) {
    if (M == 0 || cols == 0) return;
#if HYLENS_SIMD_X86
    if (own) return isa::avx512::gemm_rows(A, lda, M, W, ldw, K, 0, cols, C, ldc, alpha, pack, accumulate);
#else
    (void)own, (void)pack;
#endif
    blas::gemm_serial(false, true, M, cols, K, alpha, A, lda, W, ldw, accumulate ? 1.0f : 0.0f, C, ldc);
}

}  // namespace hylens::kernels
