// Norm variants (families.md §0.2) and RoPE (§0.4) against formulas written out in
// double precision here.

#include <hylens/kernels/rms_norm.hpp>
#include <hylens/kernels/rope.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <vector>

using namespace hylens;

namespace {
double silu_d(double x) { return x / (1 + std::exp(-x)); }
}  // namespace

TEST_CASE("rms_norm: standard and (1 + w) forms, rows whose float32 squares overflow") {
    std::mt19937 rng(3);
    std::normal_distribution<float> nd;
    const std::size_t d = 37, rows = 3;
    std::vector<float> x0(rows * d), w(d), y(rows * d);
    for (auto& v : x0) v = 3 * nd(rng);
    for (auto& v : w) v = nd(rng);
    // Scale 1e25: finite values whose squares pass float32's range (a multiplier of 1e30 in
    // config.json). The float32 sum was infinite and every output 0, with no NaN to see.
    for (const float scale : {1.0f, 1e25f}) {
        std::vector<float> x = x0;
        for (auto& v : x) v *= scale;
        for (bool one_plus : {false, true}) {
            kernels::rms_norm(x.data(), d, rows, d, w.data(), 1e-6f, y.data(), d, one_plus);
            for (std::size_t r = 0; r < rows; ++r) {
                double ss = 0;
                for (std::size_t i = 0; i < d; ++i) ss += double(x[r * d + i]) * x[r * d + i];
                const double inv = 1 / std::sqrt(ss / d + 1e-6);
                for (std::size_t i = 0; i < d; ++i)
                    CHECK(std::fabs(y[r * d + i] - (one_plus ? 1 + w[i] : w[i]) * x[r * d + i] * inv) <= 1e-5);
            }
        }
    }
    // A row holding an infinity stays non-finite (the forward's check sees it), not 0.
    std::vector<float> inf_row = x0;
    inf_row[5] = INFINITY;
    kernels::rms_norm(inf_row.data(), d, 1, d, w.data(), 1e-6f, y.data(), d, false);
    CHECK_FALSE(std::isfinite(y[5]));
}

TEST_CASE("gated_rms_norm: norm-before-gate and gate-before-norm, group-wise") {
    std::mt19937 rng(4);
    std::normal_distribution<float> nd;
    const std::size_t d = 24, group = 8;
    std::vector<float> x(d), z(d), w(d), y(d);
    for (auto& v : x) v = 2 * nd(rng);
    for (auto& v : z) v = nd(rng);
    for (auto& v : w) v = nd(rng);
    // The second pass at 1e25 times the values: their float32 squares overflow (see rms_norm).
    for (const float scale : {1.0f, 1e25f})
    for (auto order : {kernels::GateOrder::norm_before_gate, kernels::GateOrder::gate_before_norm}) {
        if (order == kernels::GateOrder::norm_before_gate && scale != 1.0f)
            for (auto& v : x) v *= scale;
        kernels::gated_rms_norm(x.data(), d, z.data(), d, 1, d, group, w.data(), 1e-5f, order, y.data(), d);
        for (std::size_t g0 = 0; g0 < d; g0 += group) {
            double ss = 0;
            for (std::size_t i = g0; i < g0 + group; ++i) {
                const double u = order == kernels::GateOrder::norm_before_gate ? x[i] : x[i] * silu_d(z[i]);
                ss += u * u;
            }
            const double inv = 1 / std::sqrt(ss / group + 1e-5);
            for (std::size_t i = g0; i < g0 + group; ++i) {
                const double want = order == kernels::GateOrder::norm_before_gate ? w[i] * x[i] * inv * silu_d(z[i])
                                                                                  : w[i] * x[i] * silu_d(z[i]) * inv;
                CHECK(std::fabs(y[i] - want) <= 1e-5);
            }
        }
    }
    CHECK_THROWS_AS(kernels::gated_rms_norm(x.data(), d, z.data(), d, 1, d, 5, w.data(), 1e-5f,
                                            kernels::GateOrder::norm_before_gate, y.data(), d),
                    ShapeError);
}

TEST_CASE("rope: half-rotation pairs (j, j + R/2), partial rotation, float32 angles") {
    const std::size_t hd = 16, R = 8;
    kernels::Rope rope{R, 10000.0f};
    std::vector<float> x(2 * hd), orig;
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = 0.1f * static_cast<float>(i) - 1.0f;
    orig = x;
    const std::int64_t pos[1] = {37};
    rope.apply(x.data(), 2 * hd, 1, 2, hd, pos);
    for (std::size_t h = 0; h < 2; ++h) {
        const float* o = orig.data() + h * hd;
        const float* v = x.data() + h * hd;
        for (std::size_t j = 0; j < R / 2; ++j) {
            const float f = 1.0f / std::pow(10000.0f, static_cast<float>(2 * j) / static_cast<float>(R));
            const float a = 37.0f * f;
            CHECK(std::fabs(v[j] - (o[j] * std::cos(a) - o[j + R / 2] * std::sin(a))) <= 1e-6);
            CHECK(std::fabs(v[j + R / 2] - (o[j + R / 2] * std::cos(a) + o[j] * std::sin(a))) <= 1e-6);
        }
        for (std::size_t i = R; i < hd; ++i) CHECK(v[i] == o[i]);  // pass-through
    }
    const std::int64_t zero[1] = {0};
    std::vector<float> y = orig;
    rope.apply(y.data(), 2 * hd, 1, 2, hd, zero);
    CHECK(y == orig);  // position 0 is the identity
}
