#include <hylens/core/blas.hpp>

#include <doctest/doctest.h>

#include <cmath>
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
