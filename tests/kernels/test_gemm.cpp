// The many-row products of kernels::linear (prefill) at every instruction-set level this machine
// supports, forced in turn: against the double-precision twin on shapes that hit every tail of
// isa::avx512::gemm_rows and isa::avx2::gemm_rows (K below and past their 16- and 8-wide
// transposes, partial panels of 32 and 16, every row tail of the 12- and 6-row tiles, strided
// rows), and, where the level runs our own GEMM (avx2 and up), its exact
// arithmetic: each element is the float32 FMA chain over k = 0 .. K-1 from zero, times alpha,
// so the bits equal a scalar std::fma twin's (the thread counts: test_simd_dispatch.cpp). And
// kernels::gemm_nt, the small products of the SSD chunks and attention, on the same kernel with
// strided W rows and accumulation into C; and kernels::gemm_nn (B row-major, A or A^T, any
// beta), the gated delta rule's chunk products. At levels avx2 and up linear() packs A instead of
// W for few rows (kernels::detail::packed_a_gemm): kShapes falls on both sides of that rule, and
// each level's A-packed kernel is checked against its W-packed one bit for bit on every tail of
// its own.

#include <hylens/core/simd.hpp>
#include <hylens/kernels/gemm_nt.hpp>
#include <hylens/kernels/isa/avx2_gemm_packed_a.hpp>
#include <hylens/kernels/isa/avx512_gemm_packed_a.hpp>
#include <hylens/kernels/linear.hpp>
#include <hylens/kernels/reference/linear.hpp>

#include "../support/random_values.hpp"
#include "../support/nan_max.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

using namespace hylens;

namespace {

// y[m, o] = alpha * fma-chain_k(x[m, k] * W[o, k]) in float32: the arithmetic gemm_rows promises.
std::vector<float> fma_twin(const std::vector<float>& x, std::size_t ldx, std::size_t M, const Weight& W,
                            std::size_t ldy, float alpha) {
    std::vector<float> y(M * ldy, 0.0f);
    for (std::size_t m = 0; m < M; ++m)
        for (std::size_t o = 0; o < W.rows(); ++o) {
            float acc = 0.0f;
            for (std::size_t k = 0; k < W.cols(); ++k) acc = std::fma(x[m * ldx + k], W.at(o * W.cols() + k), acc);
            y[m * ldy + o] = acc * alpha;
        }
    return y;
}

using Shape = std::tuple<std::size_t, std::size_t, std::size_t>;  // M, out, in
const std::vector<Shape> kShapes = {
    {5, 1, 1},     {5, 32, 16},   {13, 33, 15},  {12, 64, 17},  {24, 31, 48},  {25, 95, 100}, {11, 128, 256},
    {37, 70, 96},  {64, 300, 64}, {7, 1100, 24}, {9, 40, 1},    {6, 16, 31},   {23, 129, 200},
    {8, 20, 9},    {14, 7, 12},   {37, 80, 96},  {17, 40, 8},   {128, 256, 20}, {192, 390, 20}, {193, 400, 9}};

}  // namespace

TEST_CASE("gemm: linear with many rows at every level against the double twin, f32 and bf16 weights") {
    std::mt19937 rng(11);
    for (auto level : simd::supported_levels()) {
        const simd::ForceLevel force(level);
        for (bool bf : {false, true})
            for (auto [M, out, in] : kShapes) {
                const std::size_t ldx = in + 3, ldy = out + 5;
                const auto wv = test::normal_floats(out * in, rng), x = test::normal_floats(M * ldx, rng), bias = test::normal_floats(out, rng);
                const Weight W = bf ? Weight::from_floats_bf16(wv, {out, in}, "w") : Weight::from_floats(wv, {out, in}, "w");
                std::vector<float> y(M * ldy, -7.0f), r(M * ldy, -7.0f);
                kernels::linear(x.data(), ldx, M, W, bias.data(), y.data(), ldy, 0.5f);
                reference::linear(x.data(), ldx, M, W, bias.data(), r.data(), ldy, 0.5f);
                double worst = 0;
                bool pad_kept = true;
                for (std::size_t m = 0; m < M; ++m) {
                    for (std::size_t o = 0; o < out; ++o)
                        worst = hylens::test::nan_max(worst, std::fabs(double(y[m * ldy + o]) - r[m * ldy + o]) /
                                                    (1.0 + std::fabs(r[m * ldy + o])));
                    for (std::size_t o = out; o < ldy; ++o) pad_kept = pad_kept && y[m * ldy + o] == -7.0f;
                }
                INFO("level " << std::string(simd::level_name(level)) << " bf16 " << bf << " M " << M << " out "
                              << out << " in " << in);
                CHECK(worst <= 1e-5);
                CHECK(pad_kept);  // nothing written past `out` in a row (the masked panel stores)
            }
    }
}

TEST_CASE("gemm: at the levels of our GEMM (avx2 and up), each element is the float32 FMA chain over k, bit for bit") {
    std::mt19937 rng(12);
    std::size_t levels_run = 0;
    for (auto level : simd::supported_levels()) {
        if (!kernels::detail::own_gemm(level)) continue;
        ++levels_run;
        const simd::ForceLevel force(level);
        for (bool bf : {false, true})
            for (auto [M, out, in] : kShapes) {
                const std::size_t ldx = in + 1, ldy = out + 2;
                const auto wv = test::normal_floats(out * in, rng), x = test::normal_floats(M * ldx, rng);
                const Weight W = bf ? Weight::from_floats_bf16(wv, {out, in}, "w") : Weight::from_floats(wv, {out, in}, "w");
                std::vector<float> y(M * ldy, 0.0f);
                kernels::linear(x.data(), ldx, M, W, nullptr, y.data(), ldy, 0.25f);
                const auto want = fma_twin(x, ldx, M, W, ldy, 0.25f);
                INFO("level " << std::string(simd::level_name(level)) << " bf16 " << bf << " M " << M << " out "
                              << out << " in " << in);
                CHECK(std::memcmp(y.data(), want.data(), y.size() * sizeof(float)) == 0);
            }
    }
    MESSAGE("own GEMM levels checked: " << levels_run);
}

TEST_CASE("gemm: gemm_nt at every level, strided rows, overwrite and accumulate, against the double twin") {
    std::mt19937 rng(13);
    for (auto level : simd::supported_levels()) {
        const simd::ForceLevel force(level);
        const bool own = kernels::detail::own_gemm(level);
        for (bool accumulate : {false, true})
            for (auto [M, cols, K] : kShapes) {
                const std::size_t lda = K + 2, ldw = K + 5, ldc = cols + 3;
                const auto A = test::normal_floats(M * lda, rng), W = test::normal_floats(cols * ldw, rng);
                const auto C0 = test::normal_floats(M * ldc, rng);
                std::vector<float> C = C0, pack(kernels::gemm_nt_pack_floats(K));
                kernels::gemm_nt(level, M, cols, K, 0.5f, A.data(), lda, W.data(), ldw, C.data(), ldc, accumulate,
                                 pack.data());
                double worst = 0;
                bool pad_kept = true, bits = true;
                for (std::size_t m = 0; m < M; ++m) {
                    for (std::size_t n = 0; n < cols; ++n) {
                        double want = 0;
                        float chain = 0.0f;
                        for (std::size_t k = 0; k < K; ++k) {
                            want += double(A[m * lda + k]) * W[n * ldw + k];
                            chain = std::fma(A[m * lda + k], W[n * ldw + k], chain);
                        }
                        want *= 0.5;
                        if (accumulate) want += C0[m * ldc + n];
                        const float got = C[m * ldc + n];
                        worst = hylens::test::nan_max(worst, std::fabs(got - want) / (1.0 + std::fabs(want)));
                        // own GEMM: the FMA chain times alpha, then (accumulating) added to C
                        const float exact = accumulate ? C0[m * ldc + n] + chain * 0.5f : chain * 0.5f;
                        bits = bits && (!own || std::memcmp(&got, &exact, sizeof got) == 0);
                    }
                    for (std::size_t n = cols; n < ldc; ++n) pad_kept = pad_kept && C[m * ldc + n] == C0[m * ldc + n];
                }
                INFO("level " << std::string(simd::level_name(level)) << " accumulate " << accumulate << " M " << M
                              << " cols " << cols << " K " << K);
                CHECK(worst <= 1e-5);
                CHECK(pad_kept);
                CHECK(bits);
            }
    }
}

TEST_CASE("gemm: gemm_nn at every level, A or A^T, beta 0, 1 and 0.75, against the double twin") {
    // The gated delta rule's chunk products. Where the level has our own kernel, each element is
    // the float32 FMA chain over k from zero, times alpha, plus beta times C: bit for bit. With
    // beta 0, C starts as NaN (BLAS does not read it).
    std::mt19937 rng(17);
    for (auto level : simd::supported_levels()) {
        const simd::ForceLevel force(level);
        const bool own = kernels::detail::own_gemm(level);
        for (bool trans : {false, true})
            for (float beta : {0.0f, 1.0f, 0.75f})
                for (auto [M, N, K] : kShapes) {
                    const std::size_t lda = (trans ? M : K) + 2, ldb = N + 5, ldc = N + 3;
                    const auto A = test::normal_floats((trans ? K : M) * lda, rng), B = test::normal_floats(K * ldb, rng);
                    auto C0 = test::normal_floats(M * ldc, rng);
                    if (beta == 0.0f)
                        for (std::size_t m = 0; m < M; ++m)
                            for (std::size_t n = 0; n < N; ++n) C0[m * ldc + n] = std::nanf("");
                    std::vector<float> C = C0;
                    kernels::gemm_nn(level, trans, M, N, K, -0.5f, A.data(), lda, B.data(), ldb, beta, C.data(), ldc);
                    double worst = 0;
                    bool pad_kept = true, bits = true;
                    for (std::size_t m = 0; m < M; ++m) {
                        for (std::size_t n = 0; n < N; ++n) {
                            double want = 0;
                            float chain = 0.0f;
                            for (std::size_t k = 0; k < K; ++k) {
                                const float a = trans ? A[k * lda + m] : A[m * lda + k];
                                want += double(a) * B[k * ldb + n];
                                chain = std::fma(a, B[k * ldb + n], chain);
                            }
                            want *= -0.5;
                            if (beta != 0.0f) want += double(beta) * C0[m * ldc + n];
                            const float got = C[m * ldc + n];
                            worst = hylens::test::nan_max(worst, std::fabs(got - want) / (1.0 + std::fabs(want)));
                            const float scaled = chain * -0.5f;
                            const float exact = beta != 0.0f ? scaled + beta * C0[m * ldc + n] : scaled;
                            bits = bits && (!own || std::memcmp(&got, &exact, sizeof got) == 0);
                        }
                        for (std::size_t n = N; n < ldc; ++n)
                            pad_kept = pad_kept && std::memcmp(&C[m * ldc + n], &C0[m * ldc + n], sizeof(float)) == 0;
                    }
                    INFO("level " << std::string(simd::level_name(level)) << " trans " << trans << " beta " << beta
                                  << " M " << M << " N " << N << " K " << K);
                    CHECK(worst <= 1e-5);
                    CHECK(pad_kept);
                    CHECK(bits);
                }
    }
}

#if HYLENS_SIMD_X86
namespace {
// The A-packed product of one level (PackedA: isa::avx2::PackedA or isa::avx512::PackedA)
// against that level's W-packed GEMM (wpacked: its gemm_rows), bit for bit; C's other columns
// and rows untouched.
template <class PackedA, class WPacked>
void check_packed_a_bits(const std::vector<Shape>& shapes, WPacked wpacked) {
    std::mt19937 rng(19);
    for (auto [M, N, K] : shapes)
        for (auto [n0, n1] : {std::pair<std::size_t, std::size_t>{0, N}, {N / 3, N - N / 4}}) {
            const std::size_t lda = K + 3, ldw = K + 2, ldc = N + 4;
            const auto A = test::normal_floats(M * lda, rng), W = test::normal_floats(N * ldw, rng);
            const auto C0 = test::normal_floats(M * ldc, rng);
            std::vector<float> want = C0, got = C0, pack(kernels::gemm_nt_pack_floats(K));
            std::vector<float> packed(PackedA::floats(M, K), -3.0f);  // the padding rows too
            PackedA::pack(A.data(), lda, M, K, 0, PackedA::panels(M), packed.data());
            wpacked(A.data(), lda, M, W.data(), ldw, K, n0, n1, want.data(), ldc, 0.75f, pack.data());
            PackedA::rows(packed.data(), M, K, W.data(), ldw, n0, n1, got.data(), ldc, 0.75f);
            INFO("M " << M << " N " << N << " K " << K << " rows of W " << n0 << ".." << n1);
            CHECK(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) == 0);
        }
}
}  // namespace

TEST_CASE("gemm: the product with A packed (avx2, few rows) gives the W-packed GEMM's bits on every tail") {
    // Panels of 16 rows of A (every row count of the last one), groups of 6 rows of W (every
    // remainder), ranges [n0, n1) of W's rows as the pool's parts take them, K past and below
    // the 8-wide transposes, blocks of panels (K = 2,048: 2 panels a block, 5 panels).
    if (!simd::at_least(simd::detected(), simd::Level::avx2)) {
        MESSAGE("no avx2 on this machine: skipped");
        return;
    }
    namespace a2 = kernels::isa::avx2;
    check_packed_a_bits<a2::PackedA>({{1, 6, 8}, {5, 13, 7}, {16, 12, 16}, {17, 25, 33}, {31, 40, 1}, {48, 7, 64},
                                      {70, 100, 2048}, {9, 64, 300}},
                                     [](auto... args) { a2::gemm_rows(args...); });
}

TEST_CASE("gemm: the product with A packed (avx512, few rows) gives the W-packed GEMM's bits on every tail") {
    // Panels of 32 rows of A (every row count of the last one: 1-32, two halves of 16 in the
    // store's transposes), groups of 12 rows of W (every remainder), ranges of W's rows, K past
    // and below the 16-wide transposes, blocks of panels (K = 2,048: 1 panel a block, 3 panels).
    if (!simd::at_least(simd::detected(), simd::Level::avx512)) {
        MESSAGE("no avx512 on this machine: skipped");
        return;
    }
    namespace a5 = kernels::isa::avx512;
    std::vector<Shape> shapes = {{1, 12, 16}, {5, 13, 7}, {16, 24, 17}, {17, 25, 33}, {31, 40, 1}, {33, 7, 64},
                                 {70, 100, 2048}, {9, 64, 300}, {96, 150, 40}};
    for (std::size_t M = 1; M <= 32; ++M) shapes.emplace_back(M, 12 + M % 12, 20);  // every last panel, every group
    check_packed_a_bits<a5::PackedA>(shapes, [](auto... args) { a5::gemm_rows(args...); });
}
#endif

TEST_CASE("gemm: linear packs A at levels avx2 and up for few rows of A, many of a float32 W, else W") {
    using kernels::detail::packed_a_gemm;
    const auto avx2 = simd::Level::avx2;
    const bool x86 = HYLENS_SIMD_X86;                       // avx2 and avx512 are x86 levels
    CHECK(packed_a_gemm(avx2, 5, 10, false) == x86);     // 11 rows of padding: the most allowed
    CHECK(packed_a_gemm(avx2, 64, 128, false) == x86);   // W twice A's rows
    CHECK(packed_a_gemm(avx2, 128, 256, false) == x86);  // the most rows
    CHECK_FALSE(packed_a_gemm(avx2, 64, 127, false));
    CHECK_FALSE(packed_a_gemm(avx2, 144, 4000, false));  // no padding, but too many rows
    CHECK_FALSE(packed_a_gemm(avx2, 180, 4000, false));  // 12 rows of padding
    CHECK_FALSE(packed_a_gemm(avx2, 33, 4000, false));
    CHECK_FALSE(packed_a_gemm(avx2, 64, 4000, true));    // bf16 W: packed as before
    CHECK_FALSE(packed_a_gemm(simd::Level::baseline, 64, 4000, false));
    for (const auto avx512 : {simd::Level::avx512, simd::Level::avx512bf16}) {
        CHECK(packed_a_gemm(avx512, 24, 48, false) == x86);    // 8 rows of padding: the most allowed
        CHECK(packed_a_gemm(avx512, 64, 128, false) == x86);   // W twice A's rows
        CHECK(packed_a_gemm(avx512, 128, 256, false) == x86);  // the most rows
        CHECK(packed_a_gemm(avx512, 120, 4000, false) == x86);
        CHECK_FALSE(packed_a_gemm(avx512, 64, 127, false));
        CHECK_FALSE(packed_a_gemm(avx512, 160, 4000, false));  // no padding, but too many rows
        CHECK_FALSE(packed_a_gemm(avx512, 23, 4000, false));   // 9 rows of padding
        CHECK_FALSE(packed_a_gemm(avx512, 48, 4000, false));   // 16
        CHECK_FALSE(packed_a_gemm(avx512, 8, 4000, false));    // 24
        CHECK_FALSE(packed_a_gemm(avx512, 64, 4000, true));    // bf16 W
    }
}
