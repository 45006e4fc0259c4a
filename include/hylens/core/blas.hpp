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

/// Columns of C per gemm_serial call when gemm() splits a product over the pool: from the
/// shape alone, never the thread count, so the calls, and with them every bit of C, are the
/// same for any number of threads (OpenBLAS rounds a column differently by how many columns its
/// call covers: one call of N = 64 and two of N = 32 differ in the last bits, and a split cut by
/// the pool's size made a result depend on the thread count). About N / 16, rounded up to a
/// multiple of 64, within [64, 256]: 16 blocks for up to 16 threads where N allows. Each call
/// repacks A; on one thread (M = 512, K = 1024, N = 1024 and 3584, session 43) 256-column calls
/// took 1.02x the time of one call, 128-column 1.03x, 64-column 1.06x (32-column ones 1.2-1.5x).
inline constexpr std::size_t gemm_columns(std::size_t N) noexcept {
    const std::size_t c = ((N + 15) / 16 + 63) / 64 * 64;
    return c < 64 ? 64 : (c > 256 ? 256 : c);
}

/// As gemm_serial, but splits N across the thread pool in blocks of gemm_columns(N) when the
/// product is large enough; the result is bitwise the same for any thread count.
inline void gemm(bool trans_a, bool trans_b, std::size_t M, std::size_t N, std::size_t K, float alpha, const float* A,
                 std::size_t lda, const float* B, std::size_t ldb, float beta, float* C, std::size_t ldc) {
    const double flops = 2.0 * static_cast<double>(M) * static_cast<double>(N) * static_cast<double>(K);
    const std::size_t cols = gemm_columns(N);
    if (flops < 4.0e6 || N <= cols) {
        gemm_serial(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    parallel_for((N + cols - 1) / cols, [&](std::size_t b0, std::size_t b1) {
        for (std::size_t b = b0; b < b1; ++b) {  // one call per block, whichever thread takes it
            const std::size_t n0 = b * cols, n1 = n0 + cols < N ? n0 + cols : N;
            const float* Bp = trans_b ? B + n0 * ldb : B + n0;
            gemm_serial(trans_a, trans_b, M, n1 - n0, K, alpha, A, lda, Bp, ldb, beta, C + n0, ldc);
        }
    });
}

}  // namespace hylens::blas
