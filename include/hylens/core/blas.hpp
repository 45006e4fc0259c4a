#pragma once
// The one header of hylens that includes cblas.h. Row-major single-precision GEMM, with
// OpenBLAS pinned to one thread: parallelism comes from our own pool (core/thread_pool.hpp),
// which splits large products into column blocks of a fixed size, so OpenBLAS threads and ours
// never run at the same time and a product's bits do not depend on the thread count.

#include <cblas.h>  // cblas_sgemm, openblas_set_num_threads

#include <cstddef>  // std::size_t

#include "thread_pool.hpp"

namespace hylens::blas {

namespace detail {
inline void pin_openblas_once() {
    static const bool pinned = [] {
        openblas_set_num_threads(1);
        return true;
    }();
    (void)pinned;
}
}  // namespace detail

/// C[M,N] = alpha * op(A) * op(B) + beta * C, row-major; lda/ldb/ldc are row strides.
/// op(A) is [M,K] (A stored [K,M] when trans_a); op(B) is [K,N] (B stored [N,K] when trans_b).
/// Runs single-threaded; call gemm() for the pool-parallel version.
inline void gemm_serial(bool trans_a, bool trans_b, std::size_t M, std::size_t N, std::size_t K, float alpha,
                        const float* A, std::size_t lda, const float* B, std::size_t ldb, float beta, float* C,
                        std::size_t ldc) {
    detail::pin_openblas_once();
    if (M == 0 || N == 0) return;
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
                static_cast<int>(M), static_cast<int>(N), static_cast<int>(K), alpha, A, static_cast<int>(lda), B,
                static_cast<int>(ldb), beta, C, static_cast<int>(ldc));
}

/// Columns of C per gemm_serial call when gemm() splits a product over the pool. Fixed, so the
/// calls, and with them every bit of C, are the same for any number of threads: OpenBLAS rounds a
/// column differently by how many columns its call covers (one call of N = 64 and two of N = 32
/// differ in the last bits), and a split sized by the pool made a result depend on the thread
/// count. 256: each call repacks A, so 32-column calls cost 20-50 % of a large product, 256-column
/// ones 0-8 % (one thread, M = 1000, N = K = 2048).
inline constexpr std::size_t kGemmColumns = 256;

/// As gemm_serial, but splits N across the thread pool in blocks of kGemmColumns when the product
/// is large enough; the result is bitwise the same for any thread count.
inline void gemm(bool trans_a, bool trans_b, std::size_t M, std::size_t N, std::size_t K, float alpha, const float* A,
                 std::size_t lda, const float* B, std::size_t ldb, float beta, float* C, std::size_t ldc) {
    const double flops = 2.0 * static_cast<double>(M) * static_cast<double>(N) * static_cast<double>(K);
    if (flops < 4.0e6 || N <= kGemmColumns) {
        gemm_serial(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    parallel_for((N + kGemmColumns - 1) / kGemmColumns, [&](std::size_t b0, std::size_t b1) {
        for (std::size_t b = b0; b < b1; ++b) {  // one call per block, whichever thread takes it
            const std::size_t n0 = b * kGemmColumns, n1 = n0 + kGemmColumns < N ? n0 + kGemmColumns : N;
            const float* Bp = trans_b ? B + n0 * ldb : B + n0;
            gemm_serial(trans_a, trans_b, M, n1 - n0, K, alpha, A, lda, Bp, ldb, beta, C + n0, ldc);
        }
    });
}

}  // namespace hylens::blas
