// The opt-in arithmetic of core/precision.hpp: products with bf16 weights whose activations are
// rounded to bf16. At every instruction-set level this machine has (avx512bf16 runs VDPBF16PS,
// the others the float32 kernels on rounded values): against a double-precision twin that
// rounds the activations the same way; the exact invariants (the rounding itself bit for bit,
// the emulated levels bitwise the float32 path on pre-rounded input, the same bits for any
// number of threads, linear_group bitwise linear()); and the default staying float32.

#include <hylens/core/precision.hpp>
#include <hylens/core/simd.hpp>
#include <hylens/core/thread_pool.hpp>
#include <hylens/kernels/linear.hpp>

#include "../support/random_model.hpp"
#include "../support/random_values.hpp"
#include "../support/nan_max.hpp"

#include <doctest/doctest.h>

#include <atomic>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

using namespace hylens;

namespace bf16_activations_test {

float rounded(float x) { return to_f32(precision::round_activation(x)); }
std::uint16_t bits_of(float x) { return precision::round_activation(x).bits; }

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Largest |y - twin| / (sum of |terms| + 1e-30) over the M x out outputs (row strides ldy), the
// twin summing round(x) * w in double.
// The tolerance on it, for n terms: 4 sqrt(n) float32 unit roundoffs (2^-24 = 6e-8). A float32
// sum in any order of n terms of random signs is off by about sqrt(n) roundoffs of the terms'
// magnitude or less (the worst case of adversarial data is n; the tests' data is random).
double tol(std::size_t n) { return 4.0 * 6e-8 * std::sqrt(double(n)); }
double worst_error(const std::vector<float>& y, std::size_t ldy, const std::vector<float>& x, std::size_t ldx,
                   std::size_t M, const Weight& W, float alpha, const std::vector<float>* bias) {
    const std::size_t out = W.rows(), in = W.cols();
    double worst = 0;
    for (std::size_t m = 0; m < M; ++m)
        for (std::size_t o = 0; o < out; ++o) {
            double s = 0, mag = 0;
            for (std::size_t i = 0; i < in; ++i) {
                const double t = double(rounded(x[m * ldx + i])) * W.at(o * in + i);
                s += t;
                mag += std::fabs(t);
            }
            s *= alpha;
            mag *= std::fabs(alpha);
            if (bias) s += (*bias)[o], mag += std::fabs((*bias)[o]);
            worst = hylens::test::nan_max(worst, std::fabs(double(y[m * ldy + o]) - s) / (mag + 1e-30));
        }
    return worst;
}

}  // namespace bf16_activations_test
using namespace bf16_activations_test;

TEST_CASE("bf16 activations: the scalar rounding (to nearest even, denormals to zero, NaN quiet)") {
    CHECK(bits_of(1.0f) == 0x3F80);
    CHECK(bits_of(-2.5f) == 0xC020);
    CHECK(bits_of(std::bit_cast<float>(0x3F808000u)) == 0x3F80);  // a tie, to the even 0x3F80
    CHECK(bits_of(std::bit_cast<float>(0x3F818000u)) == 0x3F82);  // a tie, to the even 0x3F82
    CHECK(bits_of(std::bit_cast<float>(0x3F808001u)) == 0x3F81);  // above the tie
    CHECK(bits_of(std::numeric_limits<float>::denorm_min()) == 0x0000);
    CHECK(bits_of(-std::numeric_limits<float>::denorm_min()) == 0x8000);
    CHECK(bits_of(std::numeric_limits<float>::min()) == 0x0080);  // the smallest normal stays
    CHECK(bits_of(std::numeric_limits<float>::infinity()) == 0x7F80);
    CHECK(bits_of(std::numeric_limits<float>::max()) == 0x7F80);  // rounds up to infinity
    CHECK(std::isnan(rounded(std::numeric_limits<float>::quiet_NaN())));
    CHECK((bits_of(std::bit_cast<float>(0x7F800001u)) & 0x7FC0) == 0x7FC0);  // a signalling NaN made quiet
}

TEST_CASE("bf16 activations: the mode is off by default, and the guard sets and restores it") {
    precision::unset_round_activations();
    const bool env = precision::round_activations();  // HYLENS_BF16_ACTIVATIONS, unset in the tests
    CHECK_FALSE(env);
    {
        precision::RoundActivations on;
        CHECK(precision::round_activations());
        {
            precision::RoundActivations off(false);
            CHECK_FALSE(precision::round_activations());
        }
        CHECK(precision::round_activations());
    }
    CHECK(precision::round_activations() == env);
}

#if HYLENS_SIMD_X86
TEST_CASE("bf16 activations: VCVTNEPS2BF16 rounds bit for bit as the scalar definition, nothing past the end") {
    if (simd::detected() != simd::Level::avx512bf16) {
        MESSAGE("no AVX512_BF16 on this CPU: the native rounding is not run");
        return;
    }
    std::mt19937 rng(17);
    std::vector<float> specials = {0.0f, -0.0f, 1.0f, std::bit_cast<float>(0x3F808000u), std::bit_cast<float>(0x3F818000u),
                                   std::numeric_limits<float>::denorm_min(), -1e-40f, std::numeric_limits<float>::min(),
                                   std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                                   std::numeric_limits<float>::max(), std::numeric_limits<float>::quiet_NaN(),
                                   std::bit_cast<float>(0x7F800001u), 3.0e38f, -6.1e-5f};
    for (std::size_t n : {1u, 15u, 16u, 17u, 31u, 33u, 100u}) {
        auto x = test::normal_floats(n, rng);
        for (std::size_t i = 0; i < n; ++i)
            if (i % 3 == 0) x[i] = specials[(i / 3) % specials.size()];
        std::vector<bf16> got(n + 1, bf16{0x1234});
        kernels::isa::avx512bf16::round(x.data(), got.data(), n);
        bool exact = got[n].bits == 0x1234;
        for (std::size_t i = 0; i < n; ++i) {
            const std::uint16_t want = bits_of(x[i]);
            // NaN: any quiet NaN of the same sign (the payload is not specified).
            exact = exact && (std::isnan(x[i]) ? (got[i].bits & 0xFFC0) == (want & 0xFFC0) : got[i].bits == want);
        }
        INFO("n " << n);
        CHECK(exact);
    }
}
#endif

TEST_CASE("bf16 activations: linear at every level against the twin that rounds the activations") {
    std::mt19937 rng(23);
    precision::RoundActivations on;
    for (auto level : simd::supported_levels()) {
        simd::ForceLevel force(level);
        for (const auto& shape : {std::tuple<std::size_t, std::size_t, std::size_t>{1, 1, 1}, {1, 5, 17}, {2, 64, 128},
                                  {3, 33, 1027}, {4, 257, 33}, {1, 70, 1024},  // matvec (M <= 4)
                                  {5, 31, 2}, {7, 32, 65}, {8, 33, 64}, {9, 100, 3}, {16, 130, 257},
                                  {37, 70, 1027}, {12, 1100, 40}}) {  // the product of many rows
            const std::size_t M = std::get<0>(shape), out = std::get<1>(shape), in = std::get<2>(shape);
            const std::size_t ldx = in + 3, ldy = out + 1;
            const auto wv = test::normal_floats(out * in, rng), x = test::normal_floats(M * ldx, rng), bias = test::normal_floats(out, rng);
            const Weight W = Weight::from_floats_bf16(wv, {out, in}, "w");
            std::vector<float> y(M * ldy, 0.0f), yb(M * ldy, 0.0f);
            kernels::linear(x.data(), ldx, M, W, nullptr, y.data(), ldy, 0.5f);
            kernels::linear(x.data(), ldx, M, W, bias.data(), yb.data(), ldy, 1.0f);
            INFO("level " << std::string(simd::level_name(level)) << " M " << M << " out " << out << " in " << in);
            CHECK(worst_error(y, ldy, x, ldx, M, W, 0.5f, nullptr) <= tol(in + 1));
            CHECK(worst_error(yb, ldy, x, ldx, M, W, 1.0f, &bias) <= tol(in + 1));
            // The padding of y between rows is untouched.
            bool pad = true;
            for (std::size_t m = 0; m < M; ++m) pad = pad && y[m * ldy + out] == 0.0f;
            CHECK(pad);
        }
    }
}

TEST_CASE("bf16 activations: the twin test tells rounded activations from float32 ones") {
    // The float32 path (the mode off) misses the twin above by far more than its tolerance: the
    // tolerance is tight enough to see the rounding.
    std::mt19937 rng(29);
    const std::size_t M = 5, out = 64, in = 512;
    const auto wv = test::normal_floats(out * in, rng), x = test::normal_floats(M * in, rng);
    const Weight W = Weight::from_floats_bf16(wv, {out, in}, "w");
    std::vector<float> y(M * out);
    kernels::linear(x.data(), in, M, W, nullptr, y.data(), out);
    CHECK(worst_error(y, out, x, in, M, W, 1.0f, nullptr) > 10 * tol(in + 1));
}

TEST_CASE("bf16 activations: the emulated levels are bitwise the float32 path on pre-rounded input") {
    std::mt19937 rng(31);
    for (auto level : simd::supported_levels()) {
        if (level == simd::Level::avx512bf16) continue;
        simd::ForceLevel force(level);
        for (std::size_t M : {1u, 3u, 9u}) {
            const std::size_t out = 77, in = 129;
            const auto wv = test::normal_floats(out * in, rng), x = test::normal_floats(M * in, rng);
            std::vector<float> xr(x.size());
            for (std::size_t i = 0; i < x.size(); ++i) xr[i] = rounded(x[i]);
            const Weight W = Weight::from_floats_bf16(wv, {out, in}, "w");
            std::vector<float> y(M * out), want(M * out);
            {
                precision::RoundActivations on;
                kernels::linear(x.data(), in, M, W, nullptr, y.data(), out);
            }
            kernels::linear(xr.data(), in, M, W, nullptr, want.data(), out);
            INFO("level " << std::string(simd::level_name(level)) << " M " << M);
            CHECK(same_bits(y, want));
        }
    }
}

TEST_CASE("bf16 activations: float32 weights are not rounded, and the mode off gives the float32 bits") {
    std::mt19937 rng(37);
    const std::size_t out = 40, in = 96;
    for (std::size_t M : {2u, 11u}) {
        const auto wv = test::normal_floats(out * in, rng), x = test::normal_floats(M * in, rng);
        const Weight Wf = Weight::from_floats(wv, {out, in}, "wf"), Wb = Weight::from_floats_bf16(wv, {out, in}, "wb");
        std::vector<float> f_on(M * out), f_off(M * out), b_off(M * out), b_off2(M * out);
        kernels::linear(x.data(), in, M, Wf, nullptr, f_off.data(), out);
        kernels::linear(x.data(), in, M, Wb, nullptr, b_off.data(), out);
        {
            precision::RoundActivations on;
            kernels::linear(x.data(), in, M, Wf, nullptr, f_on.data(), out);
        }
        kernels::linear(x.data(), in, M, Wb, nullptr, b_off2.data(), out);
        CHECK(same_bits(f_on, f_off));
        CHECK(same_bits(b_off, b_off2));
    }
}

TEST_CASE("bf16 activations: the same bits with 1, 2 and 3 threads at every level") {
    std::mt19937 rng(41);
    const std::size_t before = ThreadPool::instance().size();
    precision::RoundActivations on;
    for (auto level : simd::supported_levels()) {
        simd::ForceLevel force(level);
        for (std::size_t M : {1u, 4u, 13u}) {
            const std::size_t out = 301, in = 257;
            const auto wv = test::normal_floats(out * in, rng), x = test::normal_floats(M * in, rng);
            const Weight W = Weight::from_floats_bf16(wv, {out, in}, "w");
            std::vector<std::vector<float>> ys;
            for (std::size_t threads : {1u, 2u, 3u}) {
                ThreadPool::instance().resize(threads);
                ys.emplace_back(M * out);
                kernels::linear(x.data(), in, M, W, nullptr, ys.back().data(), out);
            }
            INFO("level " << std::string(simd::level_name(level)) << " M " << M);
            if (M <= kernels::kMatvecMaxRows || level == simd::Level::avx512bf16) {
                CHECK(same_bits(ys[0], ys[1]));
                CHECK(same_bits(ys[0], ys[2]));
            } else {  // the emulated product of many rows is OpenBLAS sgemm, blocked per thread
                CHECK(worst_error(ys[1], out, x, in, M, W, 1.0f, nullptr) <= tol(in + 1));
                CHECK(worst_error(ys[2], out, x, in, M, W, 1.0f, nullptr) <= tol(in + 1));
            }
        }
    }
    ThreadPool::instance().resize(before);
}

TEST_CASE("bf16 activations: linear_group is bitwise one linear() per projection at every level") {
    std::mt19937 rng(43);
    const std::size_t in = 301, ldx = in + 5, M = 3;
    precision::RoundActivations on;
    const auto x = test::normal_floats(M * ldx, rng), bq = test::normal_floats(96, rng);
    const Weight Wq = Weight::from_floats_bf16(test::normal_floats(96 * in, rng), {96, in}, "q");
    const Weight Wk = Weight::from_floats(test::normal_floats(40 * in, rng), {40, in}, "k");  // float32: not rounded
    const Weight Wv = Weight::from_floats_bf16(test::normal_floats(200 * in, rng), {200, in}, "v");
    for (auto level : simd::supported_levels()) {
        simd::ForceLevel force(level);
        std::vector<float> q(M * 96), k(M * 40), v(M * 200), q1(M * 96), k1(M * 40), v1(M * 200);
        kernels::linear_group(x.data(), ldx, M, {{Wq, bq.data(), q.data(), 96}, {Wk, nullptr, k.data(), 40},
                                                 {Wv, nullptr, v.data(), 200}});
        kernels::linear(x.data(), ldx, M, Wq, bq.data(), q1.data(), 96);
        kernels::linear(x.data(), ldx, M, Wk, nullptr, k1.data(), 40);
        kernels::linear(x.data(), ldx, M, Wv, nullptr, v1.data(), 200);
        INFO("level " << std::string(simd::level_name(level)));
        CHECK(same_bits(q, q1));
        CHECK(same_bits(k, k1));
        CHECK(same_bits(v, v1));
    }
}

TEST_CASE("bf16 activations: a guard is its thread's, a held setting outlasts another thread's change") {
    precision::unset_round_activations();
    std::atomic<int> seen{-1};
    {
        precision::RoundActivations on;  // this thread only: it set the process's setting, which
        std::thread other([&] { seen = precision::round_activations() ? 1 : 0; });  // reached here
        other.join();
        CHECK(precision::round_activations());
    }
    CHECK(seen == 0);
    // A held setting: another thread's set_round_activations changes later calls, not this one.
    std::atomic<bool> holding{false}, changed{false};
    std::atomic<int> during{-1}, after{-1};
    std::thread holder([&] {
        {
            const precision::HoldRoundActivations hold;
            holding = true;
            while (!changed) std::this_thread::yield();
            during = precision::round_activations() ? 1 : 0;
        }
        after = precision::round_activations() ? 1 : 0;
    });
    while (!holding) std::this_thread::yield();
    precision::set_round_activations(true);
    changed = true;
    holder.join();
    CHECK(during == 0);
    CHECK(after == 1);
    precision::unset_round_activations();
}

TEST_CASE("bf16 activations: a forward keeps the setting it started with") {
    // The setting turned on part-way (as another thread's set_bf16_activations does): the
    // projections after it rounded their input, so the forward was of neither arithmetic.
    precision::unset_round_activations();
    const auto m = test::random_qwen({.bf16 = true});
    const TokenBatch ids({3, 1, 4, 1, 5, 9, 2, 6});
    auto c0 = m.new_cache(1), c1 = m.new_cache(1), c2 = m.new_cache(1);
    const Tensor3 off = m.forward(ids, c0);
    Hook turn_on;
    turn_on.fn = [](Site, LayerIndex layer, const ActivationView&, const std::int64_t*) {
        if (layer == 0) precision::set_round_activations(true);
    };
    ForwardOptions fo;
    fo.hook = &turn_on;
    const Tensor3 changed = m.forward(ids, c1, fo);
    const Tensor3 on = m.forward(ids, c2);  // the setting is on now
    precision::unset_round_activations();
    REQUIRE(off.size() == changed.size());
    CHECK(std::memcmp(off.data(), changed.data(), off.size() * sizeof(float)) == 0);
    CHECK(std::memcmp(off.data(), on.data(), off.size() * sizeof(float)) != 0);  // the change would show
}
