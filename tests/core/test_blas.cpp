#include <hylens/core/blas.hpp>
#include <hylens/core/thread_pool.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

using namespace hylens;

TEST_CASE("blas: gemm matches a plain triple loop for every transpose combination") {
    std::mt19937 rng(3);
    std::normal_distribution<float> nd;
    for (auto [M, N, K] : {std::tuple{1, 1, 1}, {3, 70, 5}, {64, 300, 129}, {200, 97, 64}}) {
        for (int ta = 0; ta < 2; ++ta) {
            for (int tb = 0; tb < 2; ++tb) {
                std::vector<float> A(M * K), B(K * N), C(M * N, 1.0f), R(M * N);
                for (auto& v : A) v = nd(rng);
                for (auto& v : B) v = nd(rng);
                for (int m = 0; m < M; ++m)
                    for (int n = 0; n < N; ++n) {
                        double s = 0;
                        for (int k = 0; k < K; ++k) {
                            const float a = ta ? A[k * M + m] : A[m * K + k];
                            const float b = tb ? B[n * K + k] : B[k * N + n];
                            s += double(a) * b;
                        }
                        R[m * N + n] = float(0.5 * s + 2.0);
                    }
                blas::gemm(ta, tb, M, N, K, 0.5f, A.data(), ta ? M : K, B.data(), tb ? K : N, 2.0f, C.data(), N);
                for (int i = 0; i < M * N; ++i) REQUIRE(std::fabs(C[i] - R[i]) <= 1e-4f * (1 + std::fabs(R[i])));
            }
        }
    }
}

TEST_CASE("blas: gemm gives the same bits for any thread count, those of its fixed column blocks") {
    // OpenBLAS rounds a column by how many columns its call covers, so a split cut by the
    // pool's size made the bits depend on the thread count (the stitch study's adapters).
    std::mt19937 rng(11);
    std::normal_distribution<float> nd;
    const std::size_t M = 120, N = 600, K = 96;  // 13.8 MFLOP: split into 10 blocks of 64 columns
    REQUIRE(blas::gemm_columns(N) == 64);
    std::vector<float> A(M * K), B(N * K);
    for (auto& v : A) v = nd(rng);
    for (auto& v : B) v = nd(rng);
    std::vector<float> blocks(M * N);
    for (std::size_t n0 = 0; n0 < N; n0 += blas::gemm_columns(N)) {
        const std::size_t n = std::min(blas::gemm_columns(N), N - n0);
        blas::gemm_serial(false, true, M, n, K, 1.0f, A.data(), K, B.data() + n0 * K, K, 0.0f, blocks.data() + n0, N);
    }
    const std::size_t before = ThreadPool::instance().size();
    for (std::size_t threads : {1u, 2u, 3u}) {
        ThreadPool::instance().resize(threads);
        std::vector<float> C(M * N);
        blas::gemm(false, true, M, N, K, 1.0f, A.data(), K, B.data(), K, 0.0f, C.data(), N);
        INFO("threads " << threads);
        CHECK(std::memcmp(C.data(), blocks.data(), C.size() * sizeof(float)) == 0);
    }
    ThreadPool::instance().resize(before);
}

TEST_CASE("blas: gemm's column blocks come from the shape alone, 16 where N allows, 64 to 256 columns") {
    CHECK(blas::gemm_columns(1) == 64);
    CHECK(blas::gemm_columns(600) == 64);
    CHECK(blas::gemm_columns(1024) == 64);    // 16 blocks
    CHECK(blas::gemm_columns(2048) == 128);   // 16 blocks
    CHECK(blas::gemm_columns(3584) == 256);   // 14 blocks
    CHECK(blas::gemm_columns(151936) == 256);
}
